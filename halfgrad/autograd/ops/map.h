// The elementwise and row engines behind the pointwise and row ops (internal to halfgrad/autograd/ops):
// broadcasting; `map`, which computes an output chunk by chunk in f32: widen the inputs of a
// chunk (exact), run an f32 kernel on it, round the chunk once into the output's dtype with the
// active RoundingScope; and `for_rows`/`map_rows`, the same over blocks of whole rows. Chunks
// and row blocks are fixed by the shape alone and independent, so OpenMP may split them any way
// without changing a bit. f32 inputs and outputs are used in place (widening or narrowing f32
// is a copy).
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <memory>
#include <type_traits>
#include <vector>

#include "halfgrad/autograd/kernels/cast.h"
#include "halfgrad/autograd/rounding_scope.h"
#include "halfgrad/autograd/tensor.h"
#include "halfgrad/base/parallel.h"

namespace hg::detail {

inline constexpr int64_t kChunk = 2048;
// Elements per row block of for_rows (at least one row per block).
inline constexpr int64_t kRowBlockElements = 1 << 14;

// numpy broadcasting of two shapes; throws naming `op` and both shapes when incompatible.
Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op);

// dst[i] = element (start + i) of `in` (f32 values of shape `in_shape`) broadcast to
// `out_shape`, i < n.
void broadcast_chunk(float* dst, const float* in, const Shape& in_shape, const Shape& out_shape, int64_t start,
                     int64_t n);

// out = kernel(inputs...) over `shape`. kernel(float* y, const std::array<const float*, K>& x,
// int64_t n) sees each input already broadcast to `shape` and widened; y does not alias x. A
// kernel may take a fourth argument, the chunk's first element (for per-element state: dropout).
template <size_t K, class Kernel>
Tensor map(const Shape& shape, DType dtype, const std::array<Tensor, K>& inputs, Kernel kernel) {
  const ScopedRounder rounder(Tensor::empty(shape, dtype));
  const Tensor& out = rounder.out();
  const int64_t n = shape.numel();
  const int64_t chunks = (n + kChunk - 1) / kChunk;
  std::array<const float*, K> in_place{};  // f32 inputs of the output's shape, else null
  // Broadcast inputs (a bias, a mask of shape (B, T, 1)) are widened once, whole, and chunks
  // read them from f32: a chunk of a size-1 inner dim is thousands of runs of one element.
  std::array<std::vector<float>, K> widened;
  std::array<const float*, K> broadcast{};
  for (size_t i = 0; i < K; ++i) {
    const bool f32 = inputs[i].dtype() == DType::f32;
    if (inputs[i].shape() == shape) {
      if (f32) in_place[i] = inputs[i].template data<float>();
    } else if (f32) {
      broadcast[i] = inputs[i].template data<float>();
    } else {
      widened[i] = inputs[i].to_vector();
      broadcast[i] = widened[i].data();
    }
  }
  float* const out_f32 = dtype == DType::f32 ? out.data<float>() : nullptr;
  maybe_parallel(use_team(n, kParallelElements), [&] {
#pragma omp for schedule(static)
    for (int64_t c = 0; c < chunks; ++c) {
      const int64_t start = c * kChunk;
      const int64_t len = std::min(kChunk, n - start);
      alignas(64) float x[K == 0 ? 1 : K][kChunk];
      alignas(64) float y[kChunk];
      std::array<const float*, K> xs;
      for (size_t i = 0; i < K; ++i) {
        if (in_place[i]) {
          xs[i] = in_place[i] + start;
        } else {
          if (broadcast[i]) {
            broadcast_chunk(x[i], broadcast[i], inputs[i].shape(), shape, start, len);
          } else {
            kernels::load_f32(x[i], inputs[i].bytes(), inputs[i].dtype(), start, len);
          }
          xs[i] = x[i];
        }
      }
      float* const dst = out_f32 ? out_f32 + start : y;
      if constexpr (std::is_invocable_v<Kernel&, float*, const std::array<const float*, K>&, int64_t, int64_t>) {
        kernel(dst, xs, len, start);
      } else {
        kernel(dst, xs, len);
      }
      if (!out_f32) rounder.store({y, size_t(len)}, start);
    }
  });
  return out;
}

// A block of consecutive rows: block `index` holds rows [first, first + count).
struct RowBlock {
  int64_t index, first, count;
};

// Rows per block for rows of `width` elements: fixed by the width, so per-block partial results
// combined in block order do not depend on the thread count.
inline int64_t rows_per_block(int64_t width) {
  return std::max<int64_t>(1, kRowBlockElements / std::max<int64_t>(width, 1));
}
inline int64_t row_blocks(int64_t rows, int64_t width) {
  const int64_t per = rows_per_block(width);
  return (rows + per - 1) / per;
}

// body(const std::array<const float*, K>& x, RowBlock block, float* scratch) for every block of
// `rows` rows of `width` elements; x[i] points at the block's rows of input i widened to f32
// (no broadcasting: every input holds rows * width elements); scratch holds block.count * width
// floats private to the calling thread (allocated only if `scratch` is true). Blocks run in
// parallel when there is enough work.
template <size_t K, class Body>
void for_rows(const std::array<Tensor, K>& inputs, int64_t rows, int64_t width, bool scratch, Body body) {
  const int64_t per = rows_per_block(width);
  const int64_t blocks = row_blocks(rows, width);
  std::array<const float*, K> in_place{};
  for (size_t i = 0; i < K; ++i) {
    if (inputs[i].dtype() == DType::f32) in_place[i] = inputs[i].template data<float>();
  }
  maybe_parallel(blocks > 1 && use_team(rows * width, kParallelElements), [&] {
    size_t widened = 0;
    for (size_t i = 0; i < K; ++i) widened += in_place[i] ? 0 : 1;
    // Uninitialised (a std::vector would zero it: a memset per call of up to 128 KiB).
    const std::unique_ptr<float[]> buffer(new float[size_t(per * width) * (widened + (scratch ? 1 : 0))]);
#pragma omp for schedule(static)
    for (int64_t b = 0; b < blocks; ++b) {
      const RowBlock block{b, b * per, std::min(per, rows - b * per)};
      const int64_t start = block.first * width, len = block.count * width;
      std::array<const float*, K> xs;
      float* next = buffer.get();
      for (size_t i = 0; i < K; ++i) {
        if (in_place[i]) {
          xs[i] = in_place[i] + start;
        } else {
          kernels::load_f32(next, inputs[i].bytes(), inputs[i].dtype(), start, len);
          xs[i] = next;
          next += per * width;
        }
      }
      body(xs, block, scratch ? next : nullptr);
    }
  });
}

// Row-wise ops (softmax, layer_norm, ...): out (shape, dtype) from inputs of the same number of
// elements, viewed as rows of shape[-1]. kernel(float* y, const std::array<const float*, K>& x,
// RowBlock block) maps the block's widened rows to its f32 output rows, rounded once into `dtype`.
template <size_t K, class Kernel>
Tensor map_rows(const Shape& shape, DType dtype, const std::array<Tensor, K>& inputs, Kernel kernel) {
  const ScopedRounder rounder(Tensor::empty(shape, dtype));
  const Tensor& out = rounder.out();
  const int64_t width = shape.ndim() ? shape[-1] : 1;
  const int64_t rows = width ? shape.numel() / width : 0;
  float* const out_f32 = dtype == DType::f32 ? out.data<float>() : nullptr;
  for_rows<K>(inputs, rows, width, out_f32 == nullptr,
              [&](const std::array<const float*, K>& xs, RowBlock block, float* scratch) {
                const int64_t start = block.first * width;
                float* y = out_f32 ? out_f32 + start : scratch;
                kernel(y, xs, block);
                if (!out_f32) rounder.store({y, size_t(block.count * width)}, start);
              });
  return out;
}

}  // namespace hg::detail
