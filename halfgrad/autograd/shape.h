// Shape: the sizes of a tensor's dimensions (0 to 4 of them), row-major. A shape of no
// dimensions is a scalar holding one element.
#pragma once

#include <array>
#include <cstdint>
#include <initializer_list>
#include <ostream>
#include <span>
#include <string>

namespace hg {

class Shape {
 public:
  static constexpr int kMaxDims = 4;

  Shape() = default;
  Shape(std::initializer_list<int64_t> dims);
  explicit Shape(std::span<const int64_t> dims);

  int ndim() const { return ndim_; }
  // Size of dimension `dim`; negative counts from the back (-1 is the last).
  int64_t operator[](int dim) const;
  int64_t numel() const;
  // Product of the sizes before `dim` (rows when dim is the last).
  int64_t outer(int dim) const;
  std::span<const int64_t> dims() const { return {dims_.data(), size_t(ndim_)}; }
  // Normalises a possibly negative dim to [0, ndim); throws naming `op` if out of range.
  int axis(int dim, const char* op) const;
  // A copy with dimension `dim` set to `size`, removed (size < 0), or kept as 1.
  Shape with(int dim, int64_t size) const;
  Shape without(int dim) const;

  std::string str() const;  // "(64, 32, 128)"
  bool operator==(const Shape& other) const;

 private:
  std::array<int64_t, kMaxDims> dims_{};
  int ndim_ = 0;
};

std::ostream& operator<<(std::ostream& os, const Shape& shape);

}  // namespace hg
