// Tensor: a shared handle to a contiguous, row-major array of f32, f16 or bf16 elements stored
// at their real width (an f16 element is 2 bytes: the bit pattern of an hg::half), 64-byte
// aligned. Copies of a Tensor share the same data, like torch.Tensor; reshape() is a view that
// shares storage, every other op makes a new tensor. Tensors that require gradients get a
// `.grad()` of the same shape and dtype after backward (see tape.h), or, from a sparse
// embedding, a row-sparse `.sparse_grad()` (sparse_rows.h).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <ostream>
#include <span>
#include <string>
#include <vector>

#include "halfgrad/autograd/dtype.h"
#include "halfgrad/autograd/generator.h"
#include "halfgrad/precision/rounding.h"
#include "halfgrad/autograd/shape.h"

namespace hg {

class Tensor;
struct SparseRows;
// Called with a tensor's complete gradient during backward; may return a replacement
// (an undefined Tensor keeps the gradient as it is).
using GradHook = std::function<Tensor(const Tensor& grad)>;

struct TensorImpl {
  Shape shape;
  DType dtype = DType::f32;
  std::shared_ptr<std::byte> storage;  // 64-byte aligned, shared by reshape views
  bool requires_grad = false;
  bool retains_grad = false;  // keep the gradient of a non-leaf (torch's retain_grad)
  std::shared_ptr<TensorImpl> grad;
  std::shared_ptr<SparseRows> sparse_grad;  // a row-sparse gradient, held instead of `grad`
  std::string name;
  std::vector<GradHook> hooks;
  // The tape node that produced this tensor (-1: a leaf) and the tape generation it belongs
  // to, so a backward through a graph that was already freed is detected.
  int64_t node = -1;
  uint64_t generation = 0;
};

class Tensor {
 public:
  Tensor() = default;  // undefined: no shape, no data
  explicit Tensor(std::shared_ptr<TensorImpl> impl) : impl_(std::move(impl)) {}

  // Creation. Values given as floats are rounded once (nearest even) to the dtype.
  static Tensor empty(const Shape& shape, DType dtype = DType::f32);
  static Tensor zeros(const Shape& shape, DType dtype = DType::f32);
  static Tensor ones(const Shape& shape, DType dtype = DType::f32);
  static Tensor full(const Shape& shape, float value, DType dtype = DType::f32);
  static Tensor arange(int64_t n, DType dtype = DType::f32);  // 0, 1, ..., n-1 in a 1-D tensor
  static Tensor from_vector(const std::vector<float>& values, const Shape& shape, DType dtype = DType::f32);
  static Tensor randn(const Shape& shape, Generator& gen, DType dtype = DType::f32, float mean = 0, float stddev = 1);
  static Tensor rand(const Shape& shape, Generator& gen, DType dtype = DType::f32);  // U[0, 1)
  static Tensor uniform(const Shape& shape, Generator& gen, float low, float high, DType dtype = DType::f32);

  bool defined() const { return impl_ != nullptr; }
  const Shape& shape() const { return impl().shape; }
  int ndim() const { return shape().ndim(); }
  int64_t size(int dim) const { return shape()[dim]; }
  int64_t numel() const { return shape().numel(); }
  DType dtype() const { return impl().dtype; }
  size_t nbytes() const { return size_t(numel()) * element_size(dtype()); }

  // Raw element storage: float for f32, uint16_t bit patterns for f16 and bf16.
  template <class T>
  T* data() const {
    return reinterpret_cast<T*>(impl().storage.get());
  }
  std::byte* bytes() const { return impl().storage.get(); }
  std::span<float> f32() const;     // throws unless dtype is f32
  std::span<uint16_t> u16() const;  // throws unless dtype is f16 or bf16

  // Element values widened to f32 (exact): all of them, or elements [first, first + out.size()).
  std::vector<float> to_vector() const;
  void read(std::span<float> out, int64_t first = 0) const;
  // Elements [first, first + values.size()) = values rounded once to round-to-nearest-even (an
  // exact copy in f32), whatever RoundingScope is active: the write for values that are not an
  // op's result -- creation, loaded weights, optimizer steps, gradient unscaling and clipping
  // (as torch's copy_ and in-place multiplies round). An op's result is rounded under the
  // active scope instead: ScopedRounder (rounding_scope.h). Both run the SIMD conversion kernels
  // over the whole span.
  void assign_nearest(std::span<const float> values, int64_t first = 0) const;
  // The same write under `rounding`: with stochastic rounding element first + i draws the event
  // first_event + first + i from `seed`, so the bits do not depend on how a tensor is split into
  // writes (an optimizer's --update-rounding stochastic: halfgrad/optim/optimizer.h).
  void assign_rounded(std::span<const float> values, const precision::RoundingOptions& rounding, uint64_t seed,
                      uint64_t first_event, int64_t first = 0) const;
  float item() const;  // the single element of a one-element tensor
  // True when no element is inf or NaN, judged on the stored bits without widening (one pass).
  bool all_finite() const;
  float at(std::initializer_list<int64_t> index) const;

  // Differentiable conversions and views (recorded on the tape like any op).
  Tensor to(DType dtype) const;
  Tensor reshape(const Shape& shape) const;  // shares storage; -1 is not inferred
  // A tensor sharing storage that is not part of any graph.
  Tensor detach() const;
  // A deep copy (not recorded).
  Tensor clone() const;

  // Autograd.
  bool requires_grad() const { return impl().requires_grad; }
  Tensor& set_requires_grad(bool value = true);
  bool is_leaf() const { return impl().node < 0; }
  // The dense gradient (undefined if none). Throws if the gradient is row-sparse, so code that
  // expects (V, C) elements cannot misread the (R, C) values of one.
  Tensor grad() const;
  void set_grad(const Tensor& grad);
  // The row-sparse gradient, or null (a dense one, or none).
  const SparseRows* sparse_grad() const { return impl().sparse_grad.get(); }
  void set_sparse_grad(SparseRows grad);  // replaces any gradient; checked against the shape
  bool has_grad() const { return impl().grad || impl().sparse_grad; }
  // The stored gradient elements, for elementwise readers (unscaling, norms, clipping): the
  // dense gradient, a row-sparse gradient's (R, C) values, or undefined. Writes go to the gradient.
  Tensor grad_values() const;
  void zero_grad();  // drops the gradient, dense or sparse (torch's zero_grad(set_to_none=True))
  void retain_grad() { impl().retains_grad = true; }
  void register_hook(GradHook hook) { impl().hooks.push_back(std::move(hook)); }
  const std::string& name() const { return impl().name; }
  Tensor& set_name(std::string name);

  TensorImpl& impl() const;
  const std::shared_ptr<TensorImpl>& impl_ptr() const { return impl_; }
  bool same(const Tensor& other) const { return impl_ == other.impl_; }

 private:
  std::shared_ptr<TensorImpl> impl_;
};

// "Tensor(shape=(2, 3), dtype=f16)" followed by the values (long tensors abbreviated).
std::ostream& operator<<(std::ostream& os, const Tensor& t);

}  // namespace hg
