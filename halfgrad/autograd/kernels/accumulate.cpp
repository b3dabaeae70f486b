// accumulate.cpp: the f16-accumulating kernels of accumulate.h. One per-target core, a chain of
// f16 accumulators across the columns of C (vectors of columns, k sequential), serves the GEMM
// and both sums (a sum is a product with a vector of ones: 1 x t is exact). Not fast -- about 20
// vector operations per step of a chain -- only exact; gemm.h's packed kernel stays the f32 path.
#include "halfgrad/autograd/kernels/accumulate.h"

#include <algorithm>
#include <cstddef>
#include <vector>

#include "halfgrad/base/error.h"
#include "halfgrad/base/parallel.h"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "halfgrad/autograd/kernels/accumulate.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"
#include "halfgrad/precision/convert-inl.h"

HWY_BEFORE_NAMESPACE();
namespace hg::kernels::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// acc + t rounded once into f16, lane by lane (accumulate.h): TwoSum gives s + e = acc + t
// exactly; the exact sum rounded to odd in f32 is its truncation towards zero (s, or s's lower
// neighbour in magnitude when e has the opposite sign) with the last bit set if e != 0; then
// round to nearest even into f16 by precision/'s exact conversions. A non-finite s has a NaN e
// (inf - inf inside TwoSum), which `inexact` leaves out, so s is rounded as is.
template <class D>
HWY_INLINE hn::Vec<D> AddF16(D d, hn::Vec<D> acc, hn::Vec<D> t) {
  namespace hp = hg::precision::HWY_NAMESPACE;
  const hn::RebindToUnsigned<D> du;
  const auto s = hn::Add(acc, t);
  const auto t_part = hn::Sub(s, acc);
  const auto e = hn::Add(hn::Sub(acc, hn::Sub(s, t_part)), hn::Sub(t, t_part));
  const auto s_bits = hn::BitCast(du, s);
  const auto sticky = hn::IfThenElseZero(hn::RebindMask(du, hn::Gt(hn::Abs(e), hn::Zero(d))), hn::Set(du, 1u));
  const auto opposite = hn::ShiftRight<31>(hn::Xor(hn::BitCast(du, e), s_bits));  // 1: |acc + t| < |s|
  const auto odd = hn::Or(hn::Sub(s_bits, hn::And(opposite, sticky)), sticky);
  return hp::PromoteF16ToF32(d, hp::DemoteF32ToF16(d, hn::BitCast(d, odd)));
}

// Vectors of C advanced together (independent chains hide AddF16's latency): 8 with AVX-512's
// 32 registers, 4 otherwise.
#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX3
constexpr size_t kTile = 8;
#else
constexpr size_t kTile = 4;
#endif

// Columns [0, V * lanes) of row i of C, each column one chain; kBlock: 0 (kF16) or the block.
template <size_t V, size_t kBlock, class D>
HWY_INLINE void ChainTile(D d, float* HWY_RESTRICT c, const float* HWY_RESTRICT a, const float* HWY_RESTRICT b,
                          size_t ldb, size_t k, bool accumulate) {
  using Vec = hn::Vec<D>;
  const size_t L = hn::Lanes(d);
  Vec acc[V], carry[V];
  for (size_t v = 0; v < V; ++v) {
    const Vec start = accumulate ? hn::LoadU(d, c + v * L) : hn::Zero(d);
    carry[v] = start;
    acc[v] = kBlock != 0 ? hn::Zero(d) : AddF16(d, hn::Zero(d), start);  // RN16(C): exact for 0
  }
  for (size_t p = 0; p < k; ++p) {
    const Vec ap = hn::Set(d, a[p]);
    const float* HWY_RESTRICT bp = b + p * ldb;
    for (size_t v = 0; v < V; ++v) acc[v] = AddF16(d, acc[v], hn::Mul(ap, hn::LoadU(d, bp + v * L)));
    if (kBlock != 0 && (p + 1) % kBlock == 0) {
      for (size_t v = 0; v < V; ++v) {
        carry[v] = hn::Add(carry[v], acc[v]);
        acc[v] = hn::Zero(d);
      }
    }
  }
  const bool partial = kBlock != 0 && k % kBlock != 0;  // a last, shorter block still to carry
  for (size_t v = 0; v < V; ++v) {
    hn::StoreU(kBlock == 0 ? acc[v] : partial ? hn::Add(carry[v], acc[v]) : carry[v], d, c + v * L);
  }
}

template <size_t kBlock>
void GemmF16Rows(float* HWY_RESTRICT c, size_t ldc, const float* HWY_RESTRICT a, const float* HWY_RESTRICT b,
                 size_t ldb, size_t i0, size_t i1, size_t n, size_t k, bool accumulate) {
  const hn::ScalableTag<float> d;
  const size_t L = hn::Lanes(d);
  const size_t full = n / L * L, tail = n - full;
  std::vector<float> tail_b(tail ? k * L : 0, 0.0f);
  for (size_t p = 0; p < k && tail; ++p) std::copy_n(b + p * ldb + full, tail, tail_b.data() + p * L);
  HWY_ALIGN float tail_c[hn::MaxLanes(d)] = {};
  for (size_t i = i0; i < i1; ++i) {
    float* HWY_RESTRICT ci = c + i * ldc;
    const float* HWY_RESTRICT ai = a + i * k;
    size_t j = 0;
    for (; j + kTile * L <= n; j += kTile * L) ChainTile<kTile, kBlock>(d, ci + j, ai, b + j, ldb, k, accumulate);
    for (; j < full; j += L) ChainTile<1, kBlock>(d, ci + j, ai, b + j, ldb, k, accumulate);
    if (tail == 0) continue;
    std::copy_n(ci + full, tail, tail_c);
    ChainTile<1, kBlock>(d, tail_c, ai, tail_b.data(), L, k, accumulate);
    std::copy_n(tail_c, tail, ci + full);
  }
}

// Rows [i0, i1) of C (M,N) = A (M,K) B (K,N), row-major with strides k, ldb and ldc; block: 0
// (kF16) or kF16AccumulationBlock. The last n mod Lanes columns run as one whole vector over a
// zero-padded copy of B's tail columns.
void GemmF16RowsImpl(float* HWY_RESTRICT c, size_t ldc, const float* HWY_RESTRICT a, const float* HWY_RESTRICT b,
                     size_t ldb, size_t i0, size_t i1, size_t n, size_t k, size_t block, bool accumulate) {
  constexpr size_t kBlock = size_t(kF16AccumulationBlock);
  if (block == 0) return GemmF16Rows<0>(c, ldc, a, b, ldb, i0, i1, n, k, accumulate);
  GemmF16Rows<kBlock>(c, ldc, a, b, ldb, i0, i1, n, k, accumulate);
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
  std::vector<float> zeros;  // K = 0: the chains start and end at C (or 0); a and b may be null
  if (k == 0) {
    zeros.assign(size_t(n), 0.0f);
    a = b = zeros.data();
    ldb = n;
  }
  const size_t block = mode == Accumulation::kF16Blocked ? size_t(kF16AccumulationBlock) : 0;
  // Rows in fixed groups of 8, any thread: each element is one chain, so no bit depends on the
  // thread count.
  constexpr int64_t kRows = 8;
  const int64_t groups = (m + kRows - 1) / kRows;
  maybe_parallel(groups > 1 && use_team(2.0 * double(m) * double(n) * double(k), kParallelFlops), [&] {
#pragma omp for schedule(static)
    for (int64_t g = 0; g < groups; ++g) {
      HWY_DYNAMIC_DISPATCH(GemmF16RowsImpl)
      (c, size_t(ldc), a, b, size_t(ldb), size_t(g * kRows), size_t(std::min(m, (g + 1) * kRows)), size_t(n), size_t(k),
       block, accumulate);
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
