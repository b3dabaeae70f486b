// Reductions over a dim viewed as (outer, D, inner): f32 accumulation in a fixed order, one
// rounding of each result. Backward broadcasts the gradient back (via ops/map.h).
#include "autograd/ops/reduce.h"

#include <cmath>
#include <limits>

#include "autograd/autocast.h"
#include "autograd/error.h"
#include "autograd/ops/map.h"
#include "autograd/rounding_scope.h"
#include "autograd/tape.h"

namespace hg {
namespace {

// Rounds f32 results into a new tensor of `dtype` with the active rounding.
Tensor store(const std::vector<float>& values, const Shape& shape, DType dtype) {
  Tensor out = Tensor::empty(shape, dtype);
  const uint64_t events = dtype == DType::f32 ? 0 : reserve_rounding_events(values.size());
  kernels::narrow(out.bytes(), dtype, 0, values.data(), out.numel(), current_rounding(),
                  current_rounding_seed(), events);
  return out;
}

struct Split {
  int64_t outer, d, inner;
};

Split split(const Shape& shape, int dim) {
  int64_t inner = 1;
  for (int i = dim + 1; i < shape.ndim(); ++i) inner *= shape[i];
  return {shape.outer(dim), shape[dim], inner};
}

// Sum of n f32 values in blocks of 256 (each summed left to right, then the block sums left
// to right): a fixed order whose error grows like n/256 + 256 instead of n.
float blocked_sum(const float* x, int64_t n, int64_t stride) {
  float total = 0.0f;
  for (int64_t b = 0; b < n; b += 256) {
    float block = 0.0f;
    for (int64_t i = b; i < std::min(n, b + 256); ++i) block += x[i * stride];
    total += block;
  }
  return total;
}

// y (shape) broadcast to `shape_out` in dtype: the backward of every reduction.
Tensor broadcast_to(const Tensor& y, const Shape& shape_out, DType dtype, float scale = 1.0f) {
  return detail::map<1>(shape_out, dtype, {y}, [scale](float* out, const std::array<const float*, 1>& in, int64_t n) {
    for (int64_t i = 0; i < n; ++i) out[i] = in[0][i] * scale;
  });
}

Tensor reduce_sum(const Tensor& x0, int dim, bool keepdim, bool average, const char* op) {
  const Tensor x = autocast_input(x0, autocast_dtype(CastPolicy::kFloat32, {x0}));
  const int axis = x.shape().axis(dim, op);
  const Split s = split(x.shape(), axis);
  const std::vector<float> values = x.to_vector();
  std::vector<float> result(size_t(s.outer * s.inner));
  const float scale = average ? 1.0f / float(s.d) : 1.0f;
#pragma omp parallel for schedule(static) if (s.outer * s.inner > 64 && values.size() > 65536)
  for (int64_t o = 0; o < s.outer; ++o) {
    for (int64_t i = 0; i < s.inner; ++i) {
      result[size_t(o * s.inner + i)] = blocked_sum(&values[size_t(o * s.d * s.inner + i)], s.d, s.inner) * scale;
    }
  }
  const Shape kept = x.shape().with(axis, 1);
  Tensor y = store(result, keepdim ? kept : x.shape().without(axis), x.dtype());
  return record(op, y, {x}, [x, kept, scale](const Tensor& dy) {
    accumulate_grad(x, broadcast_to(dy.reshape(kept), x.shape(), dy.dtype(), scale));
  });
}

}  // namespace

Tensor sum(const Tensor& x, int dim, bool keepdim) { return reduce_sum(x, dim, keepdim, false, "sum"); }
Tensor mean(const Tensor& x, int dim, bool keepdim) { return reduce_sum(x, dim, keepdim, true, "mean"); }

namespace {

Tensor reduce_all(const Tensor& x0, bool average, const char* op) {
  const Tensor x = autocast_input(x0, autocast_dtype(CastPolicy::kFloat32, {x0}));
  const std::vector<float> values = x.to_vector();
  const float scale = average ? 1.0f / float(std::max<size_t>(values.size(), 1)) : 1.0f;
  Tensor y = store({blocked_sum(values.data(), int64_t(values.size()), 1) * scale}, {}, x.dtype());
  return record(op, y, {x}, [x, scale](const Tensor& dy) {
    accumulate_grad(x, broadcast_to(dy, x.shape(), dy.dtype(), scale));
  });
}

}  // namespace

Tensor sum(const Tensor& x) { return reduce_all(x, false, "sum"); }
Tensor mean(const Tensor& x) { return reduce_all(x, true, "mean"); }

MaxResult max(const Tensor& x, int dim, bool keepdim) {
  const int axis = x.shape().axis(dim, "max");
  const Split s = split(x.shape(), axis);
  check(s.d > 0, "max: dim ", dim, " of shape ", x.shape().str(), " is empty");
  const std::vector<float> values = x.to_vector();
  std::vector<float> best(size_t(s.outer * s.inner));
  std::vector<int32_t> arg(best.size());
  for (int64_t o = 0; o < s.outer; ++o) {
    for (int64_t i = 0; i < s.inner; ++i) {
      const float* row = &values[size_t(o * s.d * s.inner + i)];
      int64_t k = 0;
      // NaN wins (torch.max propagates NaN); otherwise the first of equal maxima.
      for (int64_t j = 1; j < s.d && !std::isnan(row[k * s.inner]); ++j) {
        if (row[j * s.inner] > row[k * s.inner] || std::isnan(row[j * s.inner])) k = j;
      }
      best[size_t(o * s.inner + i)] = row[k * s.inner];
      arg[size_t(o * s.inner + i)] = int32_t(k);
    }
  }
  const Shape kept = x.shape().with(axis, 1);
  const Shape out_shape = keepdim ? kept : x.shape().without(axis);
  Tensor y = store(best, out_shape, x.dtype());  // exact: every value is an element of x
  Indices indices(arg, out_shape);
  y = record("max", y, {x}, [x, s, arg](const Tensor& dy) {
    // Scatter dy to the argmax positions; every other element gets 0.
    const std::vector<float> g = dy.to_vector();
    std::vector<float> dx(size_t(x.numel()), 0.0f);
    for (int64_t o = 0; o < s.outer; ++o) {
      for (int64_t i = 0; i < s.inner; ++i) {
        const size_t r = size_t(o * s.inner + i);
        dx[size_t((o * s.d + arg[r]) * s.inner + i)] = g[r];
      }
    }
    accumulate_grad(x, Tensor::from_vector(dx, x.shape(), dy.dtype()));
  });
  return {y, std::move(indices)};
}

Tensor sum_to(const Tensor& x, const Shape& shape) {
  if (x.shape() == shape) return x;
  const Shape check_shape = detail::broadcast_shapes(shape, x.shape(), "sum_to");
  check(check_shape == x.shape(), "sum_to: cannot sum shape ", x.shape().str(), " to ", shape.str());
  // Accumulate every element of x into the element of `shape` it was broadcast from, in
  // x's element order (fixed).
  const std::vector<float> values = x.to_vector();
  std::vector<float> acc(size_t(shape.numel()), 0.0f);
  const int nd = x.ndim();
  std::array<int64_t, Shape::kMaxDims> stride{};
  int64_t st = 1;
  for (int i = nd - 1; i >= 0; --i) {
    const int ii = shape.ndim() - nd + i;
    const int64_t d = ii >= 0 ? shape[ii] : 1;
    stride[size_t(i)] = d == 1 ? 0 : st;
    st *= d;
  }
  std::array<int64_t, Shape::kMaxDims> index{};
  for (size_t e = 0; e < values.size(); ++e) {
    int64_t offset = 0;
    for (int i = 0; i < nd; ++i) offset += index[size_t(i)] * stride[size_t(i)];
    acc[size_t(offset)] += values[e];
    for (int i = nd - 1; i >= 0 && ++index[size_t(i)] == x.shape()[i]; --i) index[size_t(i)] = 0;
  }
  Tensor y = store(acc, shape, x.dtype());
  return record("sum_to", y, {x}, [x](const Tensor& dy) {
    accumulate_grad(x, broadcast_to(dy, x.shape(), dy.dtype()));
  });
}

}  // namespace hg
