// Tensor storage, creation and element access. Ops (including the differentiable to() and
// reshape()) live in halfgrad/autograd/ops/.
#include "halfgrad/autograd/tensor.h"

#include <cstdio>
#include <cstring>

#include "halfgrad/autograd/allocator.h"
#include "halfgrad/autograd/kernels/cast.h"
#include "halfgrad/autograd/ops/shape_ops.h"
#include "halfgrad/autograd/sparse_rows.h"
#include "halfgrad/base/error.h"

namespace hg {

TensorImpl& Tensor::impl() const {
  check(impl_ != nullptr, "use of an undefined Tensor");
  return *impl_;
}

Tensor Tensor::empty(const Shape& shape, DType dtype) {
  auto impl = std::make_shared<TensorImpl>();
  impl->shape = shape;
  impl->dtype = dtype;
  impl->storage = allocate_storage(size_t(shape.numel()) * element_size(dtype));
  return Tensor(std::move(impl));
}

Tensor Tensor::zeros(const Shape& shape, DType dtype) {
  Tensor t = empty(shape, dtype);
  std::memset(t.bytes(), 0, t.nbytes());  // +0 is all-zero bits in every dtype
  return t;
}

Tensor Tensor::ones(const Shape& shape, DType dtype) { return full(shape, 1.0f, dtype); }

Tensor Tensor::full(const Shape& shape, float value, DType dtype) {
  return from_vector(std::vector<float>(size_t(shape.numel()), value), shape, dtype);
}

Tensor Tensor::arange(int64_t n, DType dtype) {
  std::vector<float> values(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) values[size_t(i)] = float(i);
  return from_vector(values, {n}, dtype);
}

Tensor Tensor::from_vector(const std::vector<float>& values, const Shape& shape, DType dtype) {
  check(int64_t(values.size()) == shape.numel(), "Tensor::from_vector: ", values.size(), " values for shape ", shape,
        " (", shape.numel(), " elements)");
  Tensor t = empty(shape, dtype);
  t.assign_nearest(values);  // creation is not an op: the rounding scope does not apply
  return t;
}

Tensor Tensor::randn(const Shape& shape, Generator& gen, DType dtype, float mean, float stddev) {
  std::vector<float> values(static_cast<size_t>(shape.numel()));
  gen.normal(values, mean, stddev);
  return from_vector(values, shape, dtype);
}

Tensor Tensor::rand(const Shape& shape, Generator& gen, DType dtype) { return uniform(shape, gen, 0.0f, 1.0f, dtype); }

Tensor Tensor::uniform(const Shape& shape, Generator& gen, float low, float high, DType dtype) {
  std::vector<float> values(static_cast<size_t>(shape.numel()));
  gen.uniform(values, low, high);
  return from_vector(values, shape, dtype);
}

std::span<float> Tensor::f32() const {
  check(dtype() == DType::f32, "Tensor::f32(): tensor '", name(), "'", " has dtype ", dtype_name(dtype()));
  return {data<float>(), size_t(numel())};
}

std::span<uint16_t> Tensor::u16() const {
  check(dtype() != DType::f32, "Tensor::u16(): tensor '", name(), "'", " has dtype f32");
  return {data<uint16_t>(), size_t(numel())};
}

std::vector<float> Tensor::to_vector() const {
  std::vector<float> values(static_cast<size_t>(numel()));
  read(values);
  return values;
}

namespace {

// Elements [first, first + n) must lie in t; `what` names the caller.
void check_range(const Tensor& t, int64_t first, size_t n, const char* what) {
  check(first >= 0 && first <= t.numel() && n <= size_t(t.numel() - first), what, ": elements [", first, ", ",
        first + int64_t(n), ") are outside tensor '", t.name(), "' of shape ", t.shape(), " (", t.numel(),
        " elements)");
}

}  // namespace

void Tensor::read(std::span<float> out, int64_t first) const {
  check_range(*this, first, out.size(), "Tensor::read");
  kernels::load_f32(out.data(), bytes(), dtype(), first, int64_t(out.size()));
}

bool Tensor::all_finite() const { return kernels::all_finite(bytes(), dtype(), numel()); }

void Tensor::assign_nearest(std::span<const float> values, int64_t first) const {
  check_range(*this, first, values.size(), "Tensor::assign_nearest");
  kernels::store_rounded(bytes(), dtype(), first, values.data(), int64_t(values.size()), {}, 0, 0);
}

void Tensor::assign_rounded(std::span<const float> values, const precision::RoundingOptions& rounding, uint64_t seed,
                            uint64_t first_event, int64_t first) const {
  check_range(*this, first, values.size(), "Tensor::assign_rounded");
  kernels::store_rounded(bytes(), dtype(), first, values.data(), int64_t(values.size()), rounding, seed,
                         first_event + uint64_t(first));
}

float Tensor::item() const {
  check(numel() == 1, "Tensor::item(): tensor of shape ", shape(), " has ", numel(), " elements, not 1");
  float value;
  read({&value, 1});
  return value;
}

float Tensor::at(std::initializer_list<int64_t> index) const {
  check(int(index.size()) == ndim(), "Tensor::at: ", index.size(), " indices for shape ", shape());
  int64_t flat = 0, dim = 0;
  for (int64_t i : index) {
    check(i >= 0 && i < shape()[int(dim)], "Tensor::at: index ", i, " out of range in dim ", dim, " of shape ",
          shape());
    flat = flat * shape()[int(dim++)] + i;
  }
  float value;
  read({&value, 1}, flat);
  return value;
}

Tensor Tensor::to(DType target) const { return cast(*this, target); }

Tensor Tensor::reshape(const Shape& new_shape) const { return hg::reshape(*this, new_shape); }

Tensor Tensor::detach() const {
  auto impl = std::make_shared<TensorImpl>();
  impl->shape = shape();
  impl->dtype = dtype();
  impl->storage = this->impl().storage;
  impl->name = name();
  return Tensor(std::move(impl));
}

Tensor Tensor::clone() const {
  Tensor copy = empty(shape(), dtype());
  std::memcpy(copy.bytes(), bytes(), nbytes());
  copy.impl().name = name();
  return copy;
}

Tensor& Tensor::set_requires_grad(bool value) {
  check(is_leaf() || value, "set_requires_grad(false) on a tensor produced by an op; use detach()");
  impl().requires_grad = value;
  return *this;
}

Tensor Tensor::grad() const {
  check(!impl().sparse_grad, "Tensor::grad(): tensor '", name(), "' of shape ", shape(),
        " has a row-sparse gradient (a sparse embedding's); read it with sparse_grad() or grad_values()");
  return Tensor(impl().grad);
}

void Tensor::set_grad(const Tensor& grad) {
  if (grad.defined()) {
    check(grad.shape() == shape() && grad.dtype() == dtype(), "set_grad: gradient ", grad.shape(), " ",
          dtype_name(grad.dtype()), " does not match tensor ", shape(), " ", dtype_name(dtype()));
  }
  impl().grad = grad.impl_ptr();
  impl().sparse_grad.reset();
}

void Tensor::set_sparse_grad(SparseRows grad) {
  const SparseRows& g = grad;
  check(ndim() == 2 && g.values.ndim() == 2 && g.values.size(0) == int64_t(g.rows.size()) &&
            g.values.size(1) == size(1) && g.values.dtype() == dtype(),
        "set_sparse_grad: values ", g.values.shape(), " ", dtype_name(g.values.dtype()), " for ", g.rows.size(),
        " rows do not match tensor '", name(), "' ", shape(), " ", dtype_name(dtype()));
  for (size_t i = 0; i < g.rows.size(); ++i) {
    check(g.rows[i] >= 0 && g.rows[i] < size(0) && (i == 0 || g.rows[i - 1] < g.rows[i]), "set_sparse_grad: row id ",
          g.rows[i], " at ", i, " is out of [0, ", size(0),
          ") or not above the previous one (ids must be sorted, unique)");
  }
  impl().sparse_grad = std::make_shared<SparseRows>(std::move(grad));
  impl().grad.reset();
}

Tensor Tensor::grad_values() const { return impl().sparse_grad ? impl().sparse_grad->values : Tensor(impl().grad); }

void Tensor::zero_grad() {
  impl().grad.reset();
  impl().sparse_grad.reset();
}

Tensor& Tensor::set_name(std::string name) {
  impl().name = std::move(name);
  return *this;
}

std::ostream& operator<<(std::ostream& os, const Tensor& t) {
  if (!t.defined()) return os << "Tensor(undefined)";
  os << "Tensor(";
  if (!t.name().empty()) os << "name=" << t.name() << ", ";
  os << "shape=" << t.shape() << ", dtype=" << dtype_name(t.dtype());
  if (t.requires_grad()) os << ", requires_grad";
  os << ")\n[";
  const std::vector<float> values = t.to_vector();
  const int64_t row = t.ndim() ? t.shape()[-1] : 1;
  constexpr size_t kShown = 64;
  for (size_t i = 0; i < values.size(); ++i) {
    if (i == kShown) {
      os << " ... (" << values.size() - kShown << " more)";
      break;
    }
    char buffer[32];
    std::snprintf(buffer, sizeof buffer, "%.6g", double(values[i]));
    os << (i == 0 ? "" : (row > 0 && i % size_t(row) == 0) ? ",\n " : ", ") << buffer;
  }
  return os << "]";
}

}  // namespace hg
