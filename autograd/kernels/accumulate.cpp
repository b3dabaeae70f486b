// accumulate.cpp: the f16-accumulating kernels of accumulate.h. One per-target core, a chain of
// f16 accumulators across the columns of C (vectors of columns, k sequential), serves the GEMM
// and both sums (a sum is a product with a vector of ones: 1 x t is exact). Not fast -- about 20
// vector operations per step of a chain -- only exact; gemm.h's packed kernel stays the f32 path.
#include "autograd/kernels/accumulate.h"

#include <algorithm>
#include <cstddef>
#include <vector>

#include "base/error.h"
#include "base/parallel.h"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "autograd/kernels/accumulate.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"
#include "precision/convert-inl.h"

HWY_BEFORE_NAMESPACE();
namespace hg::kernels::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// acc + t rounded once into f16, lane by lane (accumulate.h: TwoSum, round to odd in f32, then
// round to nearest even into f16 with precision/'s exact conversions).
template <class D>
HWY_INLINE hn::Vec<D> AddF16(D d, hn::Vec<D> acc, hn::Vec<D> t) {
  namespace hp = hg::precision::HWY_NAMESPACE;
  const hn::RebindToUnsigned<D> du;
  const auto s = hn::Add(acc, t);
  const auto t_part = hn::Sub(s, acc);
  const auto e = hn::Add(hn::Sub(acc, hn::Sub(s, t_part)), hn::Sub(t, t_part));  // s + e = acc + t
  const auto s_bits = hn::BitCast(du, s);
  const auto inexact = hn::RebindMask(du, hn::And(hn::Ne(e, hn::Zero(d)), hn::IsFinite(s)));
  const auto even = hn::Eq(hn::And(s_bits, hn::Set(du, 1u)), hn::Zero(du));
  // The neighbour towards e: one up in magnitude when e has s's sign, else one down (s != 0
  // here: an f32 sum that rounds to zero is exact).
  const auto away = hn::Eq(hn::ShiftRight<31>(hn::Xor(hn::BitCast(du, e), s_bits)), hn::Zero(du));
  const auto neighbour = hn::Add(s_bits, hn::IfThenElse(away, hn::Set(du, 1u), hn::Set(du, ~0u)));
  const auto odd = hn::BitCast(d, hn::IfThenElse(hn::And(inexact, even), neighbour, s_bits));
  return hp::PromoteF16ToF32(d, hp::DemoteF32ToF16(d, odd));
}

constexpr size_t kTile = 4;  // vectors of C, independent chains advanced together

// Columns [j0, j0 + vectors * lanes) of row i of C, vectors <= kTile, each column one chain.
template <class D>
HWY_INLINE void ChainTile(D d, size_t vectors, float* HWY_RESTRICT c, const float* HWY_RESTRICT a,
                          const float* HWY_RESTRICT b, size_t ldb, size_t k, size_t block, bool accumulate) {
  using V = hn::Vec<D>;
  const size_t L = hn::Lanes(d);
  V acc[kTile], carry[kTile];
  for (size_t v = 0; v < vectors; ++v) {
    const V start = accumulate ? hn::LoadU(d, c + v * L) : hn::Zero(d);
    carry[v] = start;
    acc[v] = block != 0 ? hn::Zero(d) : AddF16(d, hn::Zero(d), start);  // RN16(C): exact for 0
  }
  for (size_t p = 0; p < k; ++p) {
    const V ap = hn::Set(d, a[p]);
    const float* HWY_RESTRICT bp = b + p * ldb;
    for (size_t v = 0; v < vectors; ++v) acc[v] = AddF16(d, acc[v], hn::Mul(ap, hn::LoadU(d, bp + v * L)));
    if (block != 0 && (p + 1) % block == 0) {
      for (size_t v = 0; v < vectors; ++v) {
        carry[v] = hn::Add(carry[v], acc[v]);
        acc[v] = hn::Zero(d);
      }
    }
  }
  const bool partial = block != 0 && k % block != 0;  // a last, shorter block still to carry
  for (size_t v = 0; v < vectors; ++v) {
    hn::StoreU(block == 0 ? acc[v] : partial ? hn::Add(carry[v], acc[v]) : carry[v], d, c + v * L);
  }
}

// Rows [i0, i1) of C (M,N) = A (M,K) B (K,N), row-major with strides k, ldb and ldc. The last
// n mod Lanes columns run as one whole vector over a zero-padded copy of B's tail columns.
void GemmF16RowsImpl(float* HWY_RESTRICT c, size_t ldc, const float* HWY_RESTRICT a, const float* HWY_RESTRICT b,
                     size_t ldb, size_t i0, size_t i1, size_t n, size_t k, size_t block, bool accumulate) {
  const hn::ScalableTag<float> d;
  const size_t L = hn::Lanes(d);
  const size_t full = n / L * L, tail = n - full;
  std::vector<float> tail_b(tail ? k * L : 0, 0.0f);
  for (size_t p = 0; p < k && tail; ++p) std::copy_n(b + p * ldb + full, tail, tail_b.data() + p * L);
  HWY_ALIGN float tail_c[hn::MaxLanes(d)] = {};
  for (size_t i = i0; i < i1; ++i) {
    float* HWY_RESTRICT ci = c + i * ldc;
    size_t j = 0;
    for (; j + kTile * L <= n; j += kTile * L) ChainTile(d, kTile, ci + j, a + i * k, b + j, ldb, k, block, accumulate);
    for (; j < full; j += L) ChainTile(d, 1, ci + j, a + i * k, b + j, ldb, k, block, accumulate);
    if (tail == 0) continue;
    std::copy_n(ci + full, tail, tail_c);
    ChainTile(d, 1, tail_c, a + i * k, tail_b.data(), L, k, block, accumulate);
    std::copy_n(tail_c, tail, ci + full);
  }
}

}  // namespace hg::kernels::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace hg::kernels {

HWY_EXPORT(GemmF16RowsImpl);

void gemm_f16(float* c, int64_t ldc, const float* a, const float* b, int64_t ldb, int64_t m, int64_t n, int64_t k,
              Accumulation mode, bool accumulate) {
  check(mode == Accumulation::kF16 || mode == Accumulation::kF16Blocked,
        "gemm_f16: the accumulation must be f16 or f16-blocked");
  check(m >= 0 && n >= 0 && k >= 0 && ldc >= n && ldb >= n, "gemm_f16: bad sizes m = ", m, ", n = ", n, ", k = ", k,
        ", ldb = ", ldb, ", ldc = ", ldc);
  if (m == 0 || n == 0) return;
  const size_t block = mode == Accumulation::kF16Blocked ? size_t(kF16AccumulationBlock) : 0;
  // Rows in fixed groups of 8, any thread: each element is one chain, so no bit depends on the
  // thread count.
  constexpr int64_t kRows = 8;
  const int64_t groups = (m + kRows - 1) / kRows;
  maybe_parallel(groups > 1 && use_team(2.0 * double(m) * double(n) * double(k), kParallelFlops), [&] {
#pragma omp for schedule(static)
    for (int64_t g = 0; g < groups; ++g) {
      HWY_DYNAMIC_DISPATCH(GemmF16RowsImpl)(c, size_t(ldc), a, b, size_t(ldb), size_t(g * kRows),
                                            size_t(std::min(m, (g + 1) * kRows)), size_t(n), size_t(k), block,
                                            accumulate);
    }
  });
}

void row_sums_f16(float* y, const float* x, int64_t n, int64_t c, Accumulation mode) {
  const std::vector<float> ones(size_t(std::max<int64_t>(c, 0)), 1.0f);
  gemm_f16(y, 1, x, ones.data(), 1, n, 1, c, mode, false);  // (N,C) x (C,1)
}

void column_sums_f16(float* y, const float* x, int64_t n, int64_t c, int64_t ld, Accumulation mode) {
  const std::vector<float> ones(size_t(std::max<int64_t>(n, 0)), 1.0f);
  gemm_f16(y, c, ones.data(), x, ld, 1, c, n, mode, false);  // (1,N) x (N,C)
}

}  // namespace hg::kernels
#endif  // HWY_ONCE
