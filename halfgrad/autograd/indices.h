// Indices: integer data for the ops that index or mask (token ids, class labels, padding
// masks). Kept apart from Tensor, which holds only floating-point values that flow gradients.
#pragma once

#include <cstdint>
#include <vector>

#include "halfgrad/autograd/shape.h"

namespace hg {

struct Indices {
  std::vector<int32_t> values;
  Shape shape;

  Indices() = default;
  Indices(std::vector<int32_t> v, Shape s);
  int64_t numel() const { return int64_t(values.size()); }
  int32_t operator[](int64_t i) const { return values[size_t(i)]; }
};

}  // namespace hg
