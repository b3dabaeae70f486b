// Broadcasting for ops/map.h: shapes, and a broadcast input's chunk by runs of the innermost
// dimension.
#include "halfgrad/autograd/ops/map.h"

#include <algorithm>

#include "halfgrad/base/error.h"

namespace hg::detail {

Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op) {
  const int ndim = std::max(a.ndim(), b.ndim());
  std::array<int64_t, Shape::kMaxDims> dims{};
  for (int i = 0; i < ndim; ++i) {
    const int ia = a.ndim() - ndim + i, ib = b.ndim() - ndim + i;
    const int64_t da = ia >= 0 ? a[ia] : 1, db = ib >= 0 ? b[ib] : 1;
    check(da == db || da == 1 || db == 1, op, ": shapes ", a, " and ", b, " do not broadcast (dim ", i - ndim, ": ", da,
          " vs ", db, ")");
    dims[size_t(i)] = da == 1 ? db : da;
  }
  return Shape(std::span<const int64_t>(dims.data(), size_t(ndim)));
}

void broadcast_chunk(float* dst, const float* in, const Shape& in_shape, const Shape& out_shape, int64_t start,
                     int64_t n) {
  if (in_shape.numel() == 1) {
    std::fill(dst, dst + n, in[0]);
    return;
  }
  // Strides of `in` in the output's index space (0 along broadcast dims).
  const int nd = out_shape.ndim();
  std::array<int64_t, Shape::kMaxDims> stride{}, size{};
  int64_t s = 1;
  for (int i = nd - 1; i >= 0; --i) {
    const int ii = in_shape.ndim() - nd + i;
    const int64_t d = ii >= 0 ? in_shape[ii] : 1;
    size[size_t(i)] = out_shape[i];
    stride[size_t(i)] = d == 1 ? 0 : s;
    s *= d;
  }
  // Walk output elements [start, start + n) as runs along the last dim.
  std::array<int64_t, Shape::kMaxDims> index{};
  int64_t rest = start;
  for (int i = nd - 1; i >= 0; --i) {
    index[size_t(i)] = rest % size[size_t(i)];
    rest /= size[size_t(i)];
  }
  const int64_t inner = size[size_t(nd - 1)];
  int64_t done = 0;
  while (done < n) {
    int64_t offset = 0;
    for (int i = 0; i < nd; ++i) offset += index[size_t(i)] * stride[size_t(i)];
    const int64_t run = std::min(inner - index[size_t(nd - 1)], n - done);
    if (stride[size_t(nd - 1)] != 0) {
      std::copy_n(in + offset, run, dst + done);
    } else {
      std::fill(dst + done, dst + done + run, in[offset]);
    }
    done += run;
    index[size_t(nd - 1)] += run;
    for (int i = nd - 1; i > 0 && index[size_t(i)] == size[size_t(i)]; --i) {
      index[size_t(i)] = 0;
      ++index[size_t(i - 1)];
    }
  }
}

}  // namespace hg::detail
