// Shape bookkeeping; every size is validated here once so ops can trust it.
#include "halfgrad/autograd/shape.h"

#include "halfgrad/base/error.h"

namespace hg {

Shape::Shape(std::initializer_list<int64_t> dims) : Shape(std::span<const int64_t>(dims.begin(), dims.size())) {}

Shape::Shape(std::span<const int64_t> dims) {
  check(dims.size() <= size_t(kMaxDims), "Shape: at most ", kMaxDims, " dimensions, got ", dims.size());
  for (int64_t d : dims) {
    check(d >= 0, "Shape: negative size ", d);
    dims_[ndim_++] = d;
  }
}

int Shape::axis(int dim, const char* op) const {
  const int normalised = dim < 0 ? dim + ndim_ : dim;
  // *this, not str(): check() streams its parts only on failure, and this runs on every shape[i].
  check(normalised >= 0 && normalised < ndim_, op, ": dim ", dim, " out of range for shape ", *this);
  return normalised;
}

int64_t Shape::operator[](int dim) const { return dims_[size_t(axis(dim, "Shape[]"))]; }

int64_t Shape::numel() const {
  int64_t n = 1;
  for (int i = 0; i < ndim_; ++i) n *= dims_[size_t(i)];
  return n;
}

int64_t Shape::outer(int dim) const {
  int64_t n = 1;
  for (int i = 0; i < axis(dim, "Shape::outer"); ++i) n *= dims_[size_t(i)];
  return n;
}

Shape Shape::with(int dim, int64_t size) const {
  Shape copy = *this;
  copy.dims_[size_t(axis(dim, "Shape::with"))] = size;
  return copy;
}

Shape Shape::without(int dim) const {
  const int removed = axis(dim, "Shape::without");
  Shape copy;
  for (int i = 0; i < ndim_; ++i) {
    if (i != removed) copy.dims_[size_t(copy.ndim_++)] = dims_[size_t(i)];
  }
  return copy;
}

std::string Shape::str() const {
  std::string out = "(";
  for (int i = 0; i < ndim_; ++i) out += (i ? ", " : "") + std::to_string(dims_[size_t(i)]);
  return out + (ndim_ == 1 ? ",)" : ")");
}

bool Shape::operator==(const Shape& other) const {
  if (ndim_ != other.ndim_) return false;
  for (int i = 0; i < ndim_; ++i) {
    if (dims_[size_t(i)] != other.dims_[size_t(i)]) return false;
  }
  return true;
}

std::ostream& operator<<(std::ostream& os, const Shape& shape) { return os << shape.str(); }

}  // namespace hg
