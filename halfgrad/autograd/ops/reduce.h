// Reductions. They accumulate in f32 in a fixed order (results do not depend on the thread
// count); sum and mean are autocast f32 ops. The output dtype is the input's (f32 under
// autocast).
#pragma once

#include "halfgrad/autograd/indices.h"
#include "halfgrad/autograd/tensor.h"

namespace hg {

Tensor sum(const Tensor& x);  // all elements -> shape ()
Tensor sum(const Tensor& x, int dim, bool keepdim = false);
Tensor mean(const Tensor& x);
Tensor mean(const Tensor& x, int dim, bool keepdim = false);

struct MaxResult {
  Tensor values;
  Indices indices;  // argmax; the first of equal maxima
};
// Maximum along `dim`. The gradient goes to the first maximal element only (torch.max(dim)
// routes it to the returned index).
MaxResult max(const Tensor& x, int dim, bool keepdim = false);

// Sums x down to `shape`, the inverse of broadcasting `shape` up to x's shape (used by the
// tape for every broadcast gradient).
Tensor sum_to(const Tensor& x, const Shape& shape);

}  // namespace hg
