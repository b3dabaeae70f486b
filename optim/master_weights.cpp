// Master weight copies between the model's dtype and f32 (of every element, or of the rows of a
// row-sparse gradient).
#include "optim/master_weights.h"

#include <cstring>

#include "autograd/kernels/cast.h"
#include "autograd/sparse_rows.h"

namespace hg::optim {

MasterWeights::MasterWeights(std::vector<Tensor> model_params) : model_(std::move(model_params)) {
  for (const Tensor& p : model_) {
    Tensor master = Tensor::from_vector(p.to_vector(), p.shape(), DType::f32);
    master.set_requires_grad(true).set_name(p.name());
    masters_.push_back(master);
  }
}

void MasterWeights::copy_grads_to_masters() {
  sparse_rows_.assign(model_.size(), std::nullopt);
  for (size_t i = 0; i < model_.size(); ++i) {
    if (const SparseRows* s = model_[i].sparse_grad()) {
      masters_[i].set_sparse_grad({s->rows, Tensor::from_vector(s->values.to_vector(), s->values.shape(), DType::f32)});
      sparse_rows_[i] = s->rows;
    } else {
      const Tensor g = model_[i].grad();
      masters_[i].set_grad(g.defined() ? Tensor::from_vector(g.to_vector(), g.shape(), DType::f32) : Tensor());
    }
    model_[i].zero_grad();
  }
}

namespace {

// Rounds elements [offset, offset + n) of the master into the model parameter; returns how many
// of them changed (compared as bit patterns).
int64_t copy_elements(const Tensor& p, const Tensor& master, int64_t offset, int64_t n) {
  const size_t size = element_size(p.dtype());
  std::byte* begin = p.bytes() + size_t(offset) * size;
  const std::vector<std::byte> before(begin, begin + size_t(n) * size);
  kernels::store_rounded(p.bytes(), p.dtype(), offset, master.data<float>() + offset, n, {}, 0, 0);
  int64_t changed = 0;
  auto count_changed = [&](auto word) {
    using Word = decltype(word);
    const auto* old_bits = reinterpret_cast<const Word*>(before.data());
    const auto* new_bits = reinterpret_cast<const Word*>(begin);
    for (int64_t e = 0; e < n; ++e) changed += old_bits[e] != new_bits[e];
  };
  if (size == 2) {
    count_changed(uint16_t{});
  } else {
    count_changed(uint32_t{});
  }
  return changed;
}

}  // namespace

void MasterWeights::copy_step_to_model() {
  model_changed_ = 0;
  for (size_t i = 0; i < model_.size(); ++i) {
    const Tensor& p = model_[i];
    if (i < sparse_rows_.size() && sparse_rows_[i]) {
      const int64_t c = p.size(1);
      for (const int64_t row : *sparse_rows_[i]) model_changed_ += copy_elements(p, masters_[i], row * c, c);
    } else {
      model_changed_ += copy_elements(p, masters_[i], 0, p.numel());
    }
  }
}

void MasterWeights::copy_masters_to_model() {
  model_changed_ = 0;
  for (size_t i = 0; i < model_.size(); ++i) {
    model_changed_ += copy_elements(model_[i], masters_[i], 0, model_[i].numel());
  }
}

int64_t MasterWeights::elements() const {
  int64_t n = 0;
  for (const Tensor& p : model_) n += p.numel();
  return n;
}

}  // namespace hg::optim
