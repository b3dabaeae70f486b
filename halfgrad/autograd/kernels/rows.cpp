// rows.cpp: the row kernels of rows.h. Per target: LaneSum (rows.h's fixed summation order),
// RowMax, and a loop over rows per kernel; then the dispatch wrappers. exp and Transform come from
// elementwise-inl.h, the scalar log of a row's sum from <cmath>. Not here: threads, dtypes.
//
// Contraction of a * b + c into FMA is off (-ffp-contract=off, see elementwise.cpp): every
// operation rounds as written, which is what makes the sums, layer_norm and softmax_backward
// bit-identical to the scalar twins.

#include "halfgrad/autograd/kernels/rows.h"

#include "halfgrad/autograd/kernels/elementwise.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <utility>
#include <vector>

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "halfgrad/autograd/kernels/rows.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"
#include "halfgrad/autograd/kernels/elementwise-inl.h"

#ifndef HG_AUTOGRAD_KERNELS_ROWS_ORDER_
#define HG_AUTOGRAD_KERNELS_ROWS_ORDER_
namespace hg::kernels::rows_detail {
inline constexpr size_t kSumLanes = 32;      // partial sums of the lane order (rows.h)
inline constexpr size_t kSumBlock = 4096;    // elements between restarts of the partials
inline constexpr size_t kColumnBlock = 256;  // rows per block of column_sums
}  // namespace hg::kernels::rows_detail
#endif

HWY_BEFORE_NAMESPACE();
namespace hg::kernels::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;
using namespace rows_detail;

constexpr size_t kMaxLanes = hn::MaxLanes(DF());
static_assert(kSumLanes % kMaxLanes == 0);
constexpr size_t kSumVectors = kSumLanes / kMaxLanes;

// term(x[i]...) for the `valid` elements at i (the first lanes), 0 in the other lanes; reads
// through zero-padded copies because Highway 1.0.3's MaskedLoad may read past the array.
template <class F, class... P, size_t... I>
HWY_INLINE VF PartialTerm(DF d, size_t valid, const F& term, std::index_sequence<I...>, const P*... x) {
  HWY_ALIGN float in[sizeof...(P)][kMaxLanes] = {};
  (std::copy_n(x, valid, in[I]), ...);
  return hn::IfThenElseZero(hn::FirstN(d, valid), term(hn::Load(d, in[I])...));
}

// rows.h's final combination of the 32 partials (t[k] += t[k + w] for w = 16, 8, ..., 1), the
// same additions in registers: while w spans whole vectors, vector k gains vector k + w / Lanes;
// then each vector's upper half is added to its lower half.
template <class D>
HWY_INLINE float PairwiseHalves(D d, hn::VFromD<D> v) {
#if HWY_TARGET == HWY_SCALAR  // one lane, and no UpperHalf
  (void)d;
  return hn::GetLane(v);
#else
  if constexpr (hn::MaxLanes(d) == 1) {
    return hn::GetLane(v);
  } else {
    const hn::Half<D> dh;
    return PairwiseHalves(dh, hn::Add(hn::LowerHalf(dh, v), hn::UpperHalf(dh, v)));
  }
#endif
}

HWY_INLINE float PairwiseTotal(VF (&total)[kSumVectors]) {
  for (size_t vectors = kSumVectors / 2; vectors > 0; vectors /= 2) {
    for (size_t k = 0; k < vectors; ++k) total[k] = hn::Add(total[k], total[k + vectors]);
  }
  return PairwiseHalves(DF(), total[0]);
}

// sum_{i < n} term(x[i]...) in lane order: kSumVectors vectors hold the 32 partial sums, lane k
// of vector v being partial v * Lanes + k, so that element i always lands in partial i mod 32.
template <class F, class... P>
HWY_INLINE float LaneSum(size_t n, const F& term, const P*... x) {
  const DF d;
  const size_t lanes = hn::Lanes(d);
  VF total[kSumVectors];
  for (VF& t : total) t = hn::Zero(d);
  for (size_t block = 0; block < n; block += kSumBlock) {
    const size_t end = std::min(n, block + kSumBlock);
    VF acc[kSumVectors];
    for (VF& a : acc) a = hn::Zero(d);
    size_t i = block;
    for (; i + kSumLanes <= end; i += kSumLanes) {
      for (size_t v = 0; v < kSumVectors; ++v) {
        acc[v] = hn::Add(acc[v], term(hn::LoadU(d, x + i + v * lanes)...));
      }
    }
    for (size_t v = 0; v < kSumVectors && i + v * lanes < end; ++v) {
      const size_t start = i + v * lanes, valid = std::min(lanes, end - start);
      const VF t = valid == lanes ? term(hn::LoadU(d, x + start)...)
                                  : PartialTerm(d, valid, term, std::index_sequence_for<P...>(), (x + start)...);
      acc[v] = hn::Add(acc[v], t);
    }
    for (size_t v = 0; v < kSumVectors; ++v) total[v] = hn::Add(total[v], acc[v]);
  }
  return PairwiseTotal(total);
}

// The largest non-NaN element of x (n >= 1), -inf if there is none. Exact, so any order works.
HWY_INLINE float RowMax(const float* x, size_t n) {
  const DF d;
  const size_t lanes = hn::Lanes(d);
  const VF neg_inf = hn::Set(d, -std::numeric_limits<float>::infinity());
  const auto clean = [&](VF v) { return hn::IfThenElse(hn::IsNaN(v), neg_inf, v); };
  VF m0 = neg_inf, m1 = neg_inf;
  size_t i = 0;
  for (; i + 2 * lanes <= n; i += 2 * lanes) {
    m0 = hn::Max(m0, clean(hn::LoadU(d, x + i)));
    m1 = hn::Max(m1, clean(hn::LoadU(d, x + i + lanes)));
  }
  float m = hn::GetLane(hn::MaxOfLanes(d, hn::Max(m0, m1)));
  for (; i < n; ++i) {
    if (x[i] > m) m = x[i];  // false for NaN
  }
  return m;
}

void SoftmaxForwardImpl(float* y, const float* x, size_t n, size_t c, float scale, const float* bias) {
  const DF d;
  const VF vs = hn::Set(d, scale);
  for (size_t r = 0; r < n; ++r, x += c, y += c) {
    if (c == 0) continue;
    // z = x scale + bias, each operation rounded, formed in y (or x itself when plain).
    const float* z = x;
    if (scale != 1.0f && bias) {
      Transform(
          y, c, [&](VF v, VF b) { return hn::Add(hn::Mul(v, vs), b); }, x, bias);
      z = y;
    } else if (scale != 1.0f) {
      Transform(
          y, c, [&](VF v) { return hn::Mul(v, vs); }, x);
      z = y;
    } else if (bias) {
      Transform(
          y, c, [&](VF v, VF b) { return hn::Add(v, b); }, x, bias);
      z = y;
    }
    const float m = RowMax(z, c);
    if (m == -std::numeric_limits<float>::infinity()) {  // all -inf (or NaN)
      const bool nan = std::any_of(z, z + c, [](float v) { return std::isnan(v); });
      std::fill_n(y, c, nan ? std::numeric_limits<float>::quiet_NaN() : 0.0f);
      continue;
    }
    const VF vm = hn::Set(d, m);
    Transform(
        y, c, [&](VF v) { return ExpF(d, hn::Sub(v, vm)); }, z);
    const float inv = 1.0f / LaneSum(
                                 c, [](VF e) { return e; }, static_cast<const float*>(y));
    const VF vinv = hn::Set(d, inv);
    Transform(
        y, c, [&](VF e) { return hn::Mul(e, vinv); }, static_cast<const float*>(y));
  }
}

void SoftmaxBackwardImpl(float* dx, const float* dy, const float* y, size_t n, size_t c, float scale) {
  const DF d;
  const VF vs = hn::Set(d, scale);
  for (size_t r = 0; r < n; ++r, dx += c, dy += c, y += c) {
    const VF dot = hn::Set(d, LaneSum(
                                  c, [](VF g, VF p) { return hn::Mul(g, p); }, dy, y));
    if (scale == 1.0f) {
      Transform(
          dx, c, [&](VF g, VF p) { return hn::Mul(p, hn::Sub(g, dot)); }, dy, y);
    } else {
      Transform(
          dx, c, [&](VF g, VF p) { return hn::Mul(hn::Mul(p, hn::Sub(g, dot)), vs); }, dy, y);
    }
  }
}

void LogSoftmaxForwardImpl(float* y, const float* x, size_t n, size_t c) {
  const DF d;
  for (size_t r = 0; r < n; ++r, x += c, y += c) {
    if (c == 0) continue;
    const VF vm = hn::Set(d, RowMax(x, c));
    const float total = LaneSum(
        c, [&](VF v) { return ExpF(d, hn::Sub(v, vm)); }, x);
    const VF shift = hn::Set(d, hn::GetLane(vm) + std::log(total));
    Transform(
        y, c, [&](VF v) { return hn::Sub(v, shift); }, x);
  }
}

void LogSoftmaxBackwardImpl(float* dx, const float* dy, const float* y, size_t n, size_t c) {
  const DF d;
  for (size_t r = 0; r < n; ++r, dx += c, dy += c, y += c) {
    const VF total = hn::Set(d, LaneSum(
                                    c, [](VF g) { return g; }, dy));
    Transform(
        dx, c, [&](VF g, VF p) { return hn::Sub(g, hn::Mul(ExpF(d, p), total)); }, dy, y);
  }
}

void LayerNormForwardImpl(float* y, float* mean, float* rstd, const float* x, const float* w, const float* b, size_t n,
                          size_t c, float eps) {
  const DF d;
  for (size_t r = 0; r < n; ++r, x += c, y += c) {
    const float mu = LaneSum(
                         c, [](VF v) { return v; }, x) /
                     float(c);
    const VF vmu = hn::Set(d, mu);
    const float var = LaneSum(
        c,
        [&](VF v) {
          const VF centered = hn::Sub(v, vmu);
          return hn::Mul(centered, centered);
        },
        x);
    const float rs = 1.0f / std::sqrt(var / float(c) + eps);
    mean[r] = mu;
    rstd[r] = rs;
    const VF vrs = hn::Set(d, rs);
    const auto xhat = [&](VF v) { return hn::Mul(hn::Sub(v, vmu), vrs); };
    if (w && b) {
      Transform(
          y, c, [&](VF v, VF g, VF o) { return hn::Add(hn::Mul(xhat(v), g), o); }, x, w, b);
    } else if (w) {
      Transform(
          y, c, [&](VF v, VF g) { return hn::Mul(xhat(v), g); }, x, w);
    } else if (b) {
      Transform(
          y, c, [&](VF v, VF o) { return hn::Add(xhat(v), o); }, x, b);
    } else {
      Transform(y, c, xhat, x);
    }
  }
}

// One row of layer_norm's backward with g = dy w (kWeight) or dy.
template <bool kWeight>
HWY_INLINE void LayerNormBackwardRow(float* dx, float* dw, float* db, const float* dy, const float* x, const float* w,
                                     float mu, float rs, size_t c) {
  const DF d;
  const VF vmu = hn::Set(d, mu), vrs = hn::Set(d, rs);
  const auto xhat = [&](VF v) { return hn::Mul(hn::Sub(v, vmu), vrs); };
  const auto sum_g = [&](const auto& term) {
    if constexpr (kWeight) {
      return LaneSum(
          c, [&](VF g, VF v, VF s) { return term(hn::Mul(g, s), v); }, dy, x, w);
    } else {
      return LaneSum(c, term, dy, x);
    }
  };
  const VF mean_g = hn::Set(d, sum_g([](VF g, VF) { return g; }) / float(c));
  const VF mean_gx = hn::Set(d, sum_g([&](VF g, VF v) { return hn::Mul(g, xhat(v)); }) / float(c));
  const auto dx_of = [&](VF g, VF v) { return hn::Mul(vrs, hn::Sub(hn::Sub(g, mean_g), hn::Mul(xhat(v), mean_gx))); };
  if (dx) {
    if constexpr (kWeight) {
      Transform(
          dx, c, [&](VF g, VF v, VF s) { return dx_of(hn::Mul(g, s), v); }, dy, x, w);
    } else {
      Transform(dx, c, dx_of, dy, x);
    }
  }
  if (dw) {
    Transform(
        dw, c, [&](VF acc, VF g, VF v) { return hn::Add(acc, hn::Mul(g, xhat(v))); }, static_cast<const float*>(dw), dy,
        x);
  }
  if (db)
    Transform(
        db, c, [](VF acc, VF g) { return hn::Add(acc, g); }, static_cast<const float*>(db), dy);
}

void LayerNormBackwardImpl(float* dx, float* dw, float* db, const float* dy, const float* x, const float* w,
                           const float* mean, const float* rstd, size_t n, size_t c) {
  for (size_t r = 0; r < n; ++r) {
    float* dx_row = dx ? dx + r * c : nullptr;
    if (w) {
      LayerNormBackwardRow<true>(dx_row, dw, db, dy + r * c, x + r * c, w, mean[r], rstd[r], c);
    } else {
      LayerNormBackwardRow<false>(dx_row, dw, db, dy + r * c, x + r * c, w, mean[r], rstd[r], c);
    }
  }
}

void RowSumsImpl(float* y, const float* x, size_t n, size_t c) {
  for (size_t r = 0; r < n; ++r)
    y[r] = LaneSum(
        c, [](VF v) { return v; }, x + r * c);
}

// Columns [j, j + kTile Lanes) of column_sums: kTile vectors of running sums down the rows.
template <size_t kTile>
HWY_INLINE void ColumnTile(float* y, const float* x, size_t n, size_t ld, size_t j) {
  const DF d;
  const size_t lanes = hn::Lanes(d);
  VF total[kTile];
  for (VF& t : total) t = hn::Zero(d);
  for (size_t block = 0; block < n; block += kColumnBlock) {
    VF acc[kTile];
    for (VF& a : acc) a = hn::Zero(d);
    for (size_t i = block; i < std::min(n, block + kColumnBlock); ++i) {
      for (size_t t = 0; t < kTile; ++t) acc[t] = hn::Add(acc[t], hn::LoadU(d, x + i * ld + j + t * lanes));
    }
    for (size_t t = 0; t < kTile; ++t) total[t] = hn::Add(total[t], acc[t]);
  }
  for (size_t t = 0; t < kTile; ++t) hn::StoreU(total[t], d, y + j + t * lanes);
}

// Per column: a block's rows summed in order, block sums added in order. Columns in tiles of 4, 2
// and 1 vectors, then the last columns (fewer than a vector) row by row in the same order.
void ColumnSumsImpl(float* y, const float* x, size_t n, size_t c, size_t ld) {
  const size_t lanes = hn::Lanes(DF());
  size_t j = 0;
  for (; j + 4 * lanes <= c; j += 4 * lanes) ColumnTile<4>(y, x, n, ld, j);
  if (j + 2 * lanes <= c) ColumnTile<2>(y, x, n, ld, j), j += 2 * lanes;
  if (j + lanes <= c) ColumnTile<1>(y, x, n, ld, j), j += lanes;
  // The last c - j < Lanes columns, walked row by row (each column's additions in the same order).
  HWY_ALIGN float total[kMaxLanes] = {}, acc[kMaxLanes];
  const size_t rest = c - j;
  if (rest == 0) return;
  for (size_t block = 0; block < n; block += kColumnBlock) {
    std::fill_n(acc, rest, 0.0f);
    for (size_t i = block; i < std::min(n, block + kColumnBlock); ++i) {
      for (size_t k = 0; k < rest; ++k) acc[k] += x[i * ld + j + k];
    }
    for (size_t k = 0; k < rest; ++k) total[k] += acc[k];
  }
  std::copy_n(total, rest, y + j);
}

}  // namespace hg::kernels::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace hg::kernels {

HWY_EXPORT(SoftmaxForwardImpl);
HWY_EXPORT(SoftmaxBackwardImpl);
HWY_EXPORT(LogSoftmaxForwardImpl);
HWY_EXPORT(LogSoftmaxBackwardImpl);
HWY_EXPORT(LayerNormForwardImpl);
HWY_EXPORT(LayerNormBackwardImpl);
HWY_EXPORT(RowSumsImpl);
HWY_EXPORT(ColumnSumsImpl);

namespace {
size_t count(int64_t n) { return n > 0 ? size_t(n) : 0; }

// Under f16 accumulation (accumulate.h) the forward statistics -- softmax's and log_softmax's sum
// of exponentials, layer norm's mean and variance -- are f16 chains; the rest of each row's math
// stays f32, scalar, as the SIMD kernels' order writes it (rows.h). Here, outside the per-target
// code: compiled once, with no fused multiply-adds.
float row_sum(const float* x, int64_t c, Accumulation mode) {
  float s = 0;
  kernels::row_sums_f16(&s, x, 1, c, mode);
  return s;
}

// The max of z for a softmax row, and whether z holds a NaN (the row is then all NaN).
std::pair<float, bool> row_max(const float* z, int64_t c) {
  float m = -std::numeric_limits<float>::infinity();
  for (int64_t j = 0; j < c; ++j) {
    if (std::isnan(z[j])) return {m, true};
    m = std::max(m, z[j]);
  }
  return {m, false};
}

// kernels::softmax_forward's rows (z = x scale + bias, e = exp(z - max), y = e / sum e) with
// the sum an f16 chain.
void softmax_rows_f16(float* y, const float* x, int64_t n, int64_t c, float scale, const float* bias,
                      Accumulation mode) {
  for (int64_t i = 0; i < n; ++i, x += c, y += c) {
    for (int64_t j = 0; j < c; ++j) {
      const float z = scale == 1.0f ? x[j] : x[j] * scale;
      y[j] = bias != nullptr ? z + bias[j] : z;
    }
    const auto [m, nan] = row_max(y, c);
    if (nan || m == -std::numeric_limits<float>::infinity()) {  // as the kernel: NaN row, or no key: zeros
      std::fill(y, y + c, nan ? std::numeric_limits<float>::quiet_NaN() : 0.0f);
      continue;
    }
    for (int64_t j = 0; j < c; ++j) y[j] -= m;
    kernels::exp(y, y, c);
    const float sum = row_sum(y, c, mode);
    for (int64_t j = 0; j < c; ++j) y[j] /= sum;
  }
}

// kernels::log_softmax_forward's rows (y = x - max - log(sum e^(x - max))) with the sum an f16
// chain; an all -inf row gives NaN, as torch.
void log_softmax_rows_f16(float* y, const float* x, int64_t n, int64_t c, Accumulation mode) {
  std::vector<float> e(static_cast<size_t>(c));
  for (int64_t i = 0; i < n; ++i, x += c, y += c) {
    const auto [m, nan] = row_max(x, c);
    if (nan || m == -std::numeric_limits<float>::infinity()) {
      std::fill(y, y + c, std::numeric_limits<float>::quiet_NaN());
      continue;
    }
    for (int64_t j = 0; j < c; ++j) y[j] = x[j] - m;
    kernels::exp(e.data(), y, c);
    const float log_sum = std::log(row_sum(e.data(), c, mode));
    for (int64_t j = 0; j < c; ++j) y[j] -= log_sum;
  }
}

// kernels::layer_norm_forward's rows with the mean (sum x / C) and the biased variance
// (sum (x - mean)^2 / C) f16 chains.
void layer_norm_rows_f16(float* y, float* mean, float* rstd, const float* x, const float* w, const float* b, int64_t n,
                         int64_t c, float eps, Accumulation mode) {
  std::vector<float> squares(static_cast<size_t>(c));
  for (int64_t i = 0; i < n; ++i, x += c, y += c) {
    mean[i] = row_sum(x, c, mode) / float(c);
    for (int64_t j = 0; j < c; ++j) {
      y[j] = x[j] - mean[i];
      squares[size_t(j)] = y[j] * y[j];
    }
    rstd[i] = 1.0f / std::sqrt(row_sum(squares.data(), c, mode) / float(c) + eps);
    for (int64_t j = 0; j < c; ++j) {
      const float scaled = y[j] * rstd[i];
      y[j] = (w != nullptr ? scaled * w[j] : scaled) + (b != nullptr ? b[j] : 0.0f);
    }
  }
}

}  // namespace

void softmax_forward(float* y, const float* x, int64_t n, int64_t c, float scale, const float* bias,
                     Accumulation accumulation) {
  if (accumulation != Accumulation::kF32) return softmax_rows_f16(y, x, n, c, scale, bias, accumulation);
  HWY_DYNAMIC_DISPATCH(SoftmaxForwardImpl)(y, x, count(n), count(c), scale, bias);
}
void softmax_backward(float* dx, const float* dy, const float* y, int64_t n, int64_t c, float scale) {
  HWY_DYNAMIC_DISPATCH(SoftmaxBackwardImpl)(dx, dy, y, count(n), count(c), scale);
}
void log_softmax_forward(float* y, const float* x, int64_t n, int64_t c, Accumulation accumulation) {
  if (accumulation != Accumulation::kF32) return log_softmax_rows_f16(y, x, n, c, accumulation);
  HWY_DYNAMIC_DISPATCH(LogSoftmaxForwardImpl)(y, x, count(n), count(c));
}
void log_softmax_backward(float* dx, const float* dy, const float* y, int64_t n, int64_t c) {
  HWY_DYNAMIC_DISPATCH(LogSoftmaxBackwardImpl)(dx, dy, y, count(n), count(c));
}
void layer_norm_forward(float* y, float* mean, float* rstd, const float* x, const float* w, const float* b, int64_t n,
                        int64_t c, float eps, Accumulation accumulation) {
  if (accumulation != Accumulation::kF32) return layer_norm_rows_f16(y, mean, rstd, x, w, b, n, c, eps, accumulation);
  HWY_DYNAMIC_DISPATCH(LayerNormForwardImpl)(y, mean, rstd, x, w, b, count(n), count(c), eps);
}
void layer_norm_backward(float* dx, float* dw, float* db, const float* dy, const float* x, const float* w,
                         const float* mean, const float* rstd, int64_t n, int64_t c) {
  HWY_DYNAMIC_DISPATCH(LayerNormBackwardImpl)(dx, dw, db, dy, x, w, mean, rstd, count(n), count(c));
}
void row_sums(float* y, const float* x, int64_t n, int64_t c, Accumulation accumulation) {
  if (accumulation != Accumulation::kF32) return row_sums_f16(y, x, n, c, accumulation);
  HWY_DYNAMIC_DISPATCH(RowSumsImpl)(y, x, count(n), count(c));
}
void column_sums(float* y, const float* x, int64_t n, int64_t c, int64_t ld) {
  HWY_DYNAMIC_DISPATCH(ColumnSumsImpl)(y, x, count(n), count(c), count(ld));
}

}  // namespace hg::kernels
#endif  // HWY_ONCE
