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
  std::vector<std::byte> before;
  for (size_t i = 0; i < model_.size(); ++i) {
    const Tensor& p = model_[i];
    before.assign(p.bytes(), p.bytes() + p.nbytes());
    kernels::narrow(p.bytes(), p.dtype(), 0, masters_[i].data<float>(), p.numel(), {}, 0, 0);
    auto count_changed = [&](auto word) {  // compare element bit patterns
      using Word = decltype(word);
      const auto* old_bits = reinterpret_cast<const Word*>(before.data());
      const Word* new_bits = p.data<Word>();
      for (int64_t e = 0; e < p.numel(); ++e) model_changed_ += old_bits[e] != new_bits[e];
    };
    if (element_size(p.dtype()) == 2) {
      count_changed(uint16_t{});
    } else {
      count_changed(uint32_t{});
    }
  }
}

int64_t MasterWeights::elements() const {
  int64_t n = 0;
  for (const Tensor& p : model_) n += p.numel();
  return n;
}

}  // namespace hg::optim
