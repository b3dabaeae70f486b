// The elementwise engine behind every pointwise op (internal to autograd/ops): broadcasting,
// and `map`, which computes an output chunk by chunk in f32: widen the inputs of a chunk
// (exact), run an f32 kernel on it, round the chunk once into the output's dtype with the
// active RoundingScope. Chunks are fixed-size and independent, so OpenMP may split them any
// way without changing a bit.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "autograd/kernels/cast.h"
#include "autograd/rounding_scope.h"
#include "autograd/tensor.h"

namespace hg::detail {

inline constexpr int64_t kChunk = 2048;

// numpy broadcasting of two shapes; throws naming `op` and both shapes when incompatible.
Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op);

// dst[i] = element (start + i) of `in` broadcast to `out_shape`, widened to f32, i < n.
void widen_broadcast(float* dst, const Tensor& in, const Shape& out_shape, int64_t start, int64_t n);

// out = kernel(inputs...) over `shape`. kernel(float* y, const std::array<const float*, K>& x,
// int64_t n) sees each input already broadcast to `shape` and widened.
template <size_t K, class Kernel>
Tensor map(const Shape& shape, DType dtype, const std::array<Tensor, K>& inputs, Kernel kernel) {
  Tensor out = Tensor::empty(shape, dtype);
  const int64_t n = shape.numel();
  const int64_t chunks = (n + kChunk - 1) / kChunk;
  const precision::RoundingOptions rounding = current_rounding();
  const uint64_t seed = current_rounding_seed();
  const uint64_t events = dtype == DType::f32 ? 0 : reserve_rounding_events(uint64_t(n));
#pragma omp parallel for schedule(static) if (chunks > 8)
  for (int64_t c = 0; c < chunks; ++c) {
    const int64_t start = c * kChunk;
    const int64_t len = std::min(kChunk, n - start);
    alignas(64) float x[K == 0 ? 1 : K][kChunk];
    alignas(64) float y[kChunk];
    std::array<const float*, K> xs;
    for (size_t i = 0; i < K; ++i) {
      widen_broadcast(x[i], inputs[i], shape, start, len);
      xs[i] = x[i];
    }
    kernel(y, xs, len);
    kernels::narrow(out.bytes(), dtype, start, y, len, rounding, seed, events + uint64_t(start));
  }
  return out;
}

// Row-wise ops (softmax, layer_norm, ...): every input holds `rows` rows of `width` elements
// (no broadcasting). kernel(float* y, const std::array<const float*, K>& x, int64_t row) maps
// one widened row to one f32 output row of `out_width` elements, rounded once into `dtype`.
template <size_t K, class Kernel>
Tensor map_rows(const Shape& shape, DType dtype, int64_t width, const std::array<Tensor, K>& inputs,
                Kernel kernel) {
  Tensor out = Tensor::empty(shape, dtype);
  const int64_t out_width = shape.ndim() ? shape[-1] : 1;
  const int64_t rows = out_width ? shape.numel() / out_width : 0;
  const precision::RoundingOptions rounding = current_rounding();
  const uint64_t seed = current_rounding_seed();
  const uint64_t events = dtype == DType::f32 ? 0 : reserve_rounding_events(uint64_t(shape.numel()));
#pragma omp parallel if (rows * width > 65536)
  {
    std::vector<float> x(K * size_t(width));
    std::vector<float> y(static_cast<size_t>(out_width));
#pragma omp for schedule(static)
    for (int64_t r = 0; r < rows; ++r) {
      std::array<const float*, K> xs;
      for (size_t i = 0; i < K; ++i) {
        kernels::widen(&x[i * size_t(width)], inputs[i].bytes(), inputs[i].dtype(), r * width, width);
        xs[i] = &x[i * size_t(width)];
      }
      kernel(y.data(), xs, r);
      kernels::narrow(out.bytes(), dtype, r * out_width, y.data(), out_width, rounding, seed,
                      events + uint64_t(r * out_width));
    }
  }
  return out;
}

}  // namespace hg::detail
