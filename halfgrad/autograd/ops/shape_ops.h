// Ops that move or convert elements without arithmetic: cast (to), reshape, transpose,
// permute, cat, narrow. Backward moves the gradient back the same way.
#pragma once

#include <vector>

#include "halfgrad/autograd/tensor.h"

namespace hg {

// x rounded once to `dtype` (identity when equal). Backward casts the gradient back to x's
// dtype: an f32 weight cast to f16 under autocast receives an f32 gradient (torch's O1).
Tensor cast(const Tensor& x, DType dtype);
// Same elements, new shape (numel must match); shares storage.
Tensor reshape(const Tensor& x, const Shape& shape);
// Swaps the last two dims: (..., R, C) -> (..., C, R). A copy.
Tensor transpose(const Tensor& x);
// Reorders dims: out.shape[i] = x.shape[order[i]]. A copy.
Tensor permute(const Tensor& x, const std::vector<int>& order);
// Concatenates along `dim`; all other dims must match, dtypes promote.
Tensor cat(const std::vector<Tensor>& xs, int dim);
// Elements [start, start + length) of dimension `dim` (torch.narrow). A copy.
Tensor narrow(const Tensor& x, int dim, int64_t start, int64_t length);

}  // namespace hg
