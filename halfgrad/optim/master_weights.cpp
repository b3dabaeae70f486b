// Master weight copies between the model's dtype and f32 (of every element, or of the rows of a
// row-sparse gradient).
#include "halfgrad/optim/master_weights.h"

#include "halfgrad/autograd/sparse_rows.h"

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
    if (const SparseRows* s = model_[i].sparse_grad()) {
      masters_[i].set_sparse_grad({s->rows, Tensor::from_vector(s->values.to_vector(), s->values.shape(), DType::f32)});
    } else {
      const Tensor g = model_[i].grad();
      masters_[i].set_grad(g.defined() ? Tensor::from_vector(g.to_vector(), g.shape(), DType::f32) : Tensor());
    }
    model_[i].zero_grad();
  }
}

void MasterWeights::copy_step_to_model() {
  for (size_t i = 0; i < model_.size(); ++i) {
    const Tensor& p = model_[i];
    if (const SparseRows* g = masters_[i].sparse_grad()) {
      write_rows(p, g->rows, read_rows(masters_[i], g->rows));
    } else {
      p.assign_nearest(masters_[i].f32());
    }
  }
}

void MasterWeights::copy_masters_to_model() {
  for (size_t i = 0; i < model_.size(); ++i) model_[i].assign_nearest(masters_[i].f32());
}

}  // namespace hg::optim
