// Master weight copies between the model's dtype and f32.
#include "optim/master_weights.h"

#include <cstring>

#include "autograd/kernels/cast.h"

namespace hg::optim {

MasterWeights::MasterWeights(std::vector<Tensor> model_params) : model_(std::move(model_params)) {
  for (const Tensor& p : model_) {
    Tensor master = Tensor::from_vector(p.to_vector(), p.shape(), DType::f32);
    master.set_requires_grad(true).set_name(p.name());
    masters_.push_back(master);
  }
}

void MasterWeights::copy_grads_to_masters() {
  for (size_t i = 0; i < model_.size(); ++i) {
    const Tensor g = model_[i].grad();
    masters_[i].set_grad(g.defined() ? Tensor::from_vector(g.to_vector(), g.shape(), DType::f32) : Tensor());
    model_[i].zero_grad();
  }
}

void MasterWeights::copy_masters_to_model() {
  model_changed_ = 0;
  for (size_t i = 0; i < model_.size(); ++i) {
    const Tensor& p = model_[i];
    const std::vector<uint8_t> before(reinterpret_cast<const uint8_t*>(p.bytes()),
                                      reinterpret_cast<const uint8_t*>(p.bytes()) + p.nbytes());
    kernels::narrow(p.bytes(), p.dtype(), 0, masters_[i].data<float>(), p.numel(), {}, 0, 0);
    const size_t width = element_size(p.dtype());
    for (int64_t e = 0; e < p.numel(); ++e) {
      model_changed_ += std::memcmp(before.data() + size_t(e) * width, p.bytes() + size_t(e) * width, width) != 0;
    }
  }
}

int64_t MasterWeights::elements() const {
  int64_t n = 0;
  for (const Tensor& p : model_) n += p.numel();
  return n;
}

}  // namespace hg::optim
