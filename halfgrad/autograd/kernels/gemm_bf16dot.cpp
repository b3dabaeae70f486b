// gemm_bf16dot.cpp: the packing into VDPBF16PS's pair layout, the GotoBLAS loop nest over it, and
// two register-tile kernels that consume the same packed panels: the instruction (a function
// compiled for AVX512F + AVX512_BF16 by attribute, called only where the CPU has them) and its
// scalar emulation (dpbf16_fma per lane). Highway 1.0.3 has no AVX512_BF16 target, hence plain
// intrinsics beside the Highway dispatch. This file must not contract a * b + c into an FMA
// (CMakeLists.txt: -ffp-contract=off): dpbf16_fma's exact two-sum relies on separate roundings.
#include "halfgrad/autograd/kernels/gemm_bf16dot.h"

#include <algorithm>
#include <atomic>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "halfgrad/base/error.h"

#if defined(__x86_64__) || defined(__i386__)
#define HG_BF16DOT_X86 1  // the instruction exists only there; elsewhere only the emulation
#include <immintrin.h>
#else
#define HG_BF16DOT_X86 0
#endif

namespace hg::kernels {
namespace {

// The register tile: kMR rows x kNR columns of C, kNR = two vectors of 16 f32 lanes. 12 x 2
// accumulators + 2 B vectors + 1 broadcast A pair = 27 of AVX-512's 32 registers (the shape of
// gemm.cpp's AVX-512 tile). Per pair of k: 24 VDPBF16PS (48 FMAs' work) against 2 loads.
constexpr size_t kMR = 12;
constexpr size_t kNR = 32;
// Cache blocks in k (even, so a pair never straddles two blocks), rows of A and columns of B:
// a B micro-panel (kKC / 2 pairs x kNR dwords = 16 KiB) stays in L1 while A panels stream past;
// the same element counts as gemm.cpp's blocks at half the bytes.
constexpr size_t kKC = 256;
constexpr size_t kMC = 144;
constexpr size_t kNC = 4096;
static_assert(kKC % 2 == 0 && kMC % kMR == 0 && kNC % kNR == 0);

// An f32 input read as the instruction reads it: a subnormal (exponent field 0) as a zero of its
// sign. A bf16 input is first placed in the upper half of an f32 (the SDM's make_fp32: exact).
float daz(float x) {
  const uint32_t bits = std::bit_cast<uint32_t>(x);
  return (bits & 0x7F800000u) == 0 ? std::bit_cast<float>(bits & 0x80000000u) : x;
}
float daz_bf16(uint16_t x) { return daz(std::bit_cast<float>(uint32_t{x} << 16)); }

// A bf16 operand seen as lines (A: the rows of op(A); B: the columns of op(B)) of depth k:
// element (line w, depth p) at base[w * line_stride + p * depth_stride].
struct Source {
  const uint16_t* base;
  size_t line_stride, depth_stride;
};

Source make_source(const GemmOperand& x, bool lines_are_rows) {
  const bool depth_contiguous = lines_are_rows != x.transposed;
  const size_t ld = static_cast<size_t>(x.ld);
  return {static_cast<const uint16_t*>(x.data), depth_contiguous ? ld : 1, depth_contiguous ? 1 : ld};
}

// Packs lines [0, lines) x depth [p0, p0 + kc) of `s` into panels of W lines in the instruction's
// layout: dst[q * W * P + p * W + w] (P = ceil(kc / 2) pairs) is one dword holding element
// (q W + w, p0 + 2p) in its low 16 bits and (q W + w, p0 + 2p + 1) in its high 16 bits. Lines past
// `lines` and the odd member past an odd kc are +0 (in both operands: 0 x a NaN pad would be NaN).
// With SSE2 (every x86-64), whole groups move as vectors: 4 lines x 4 pairs transposed when each
// line is contiguous in depth (A as stored, B transposed: a pair is one dword already), 8 lines
// of two depths interleaved when lines are adjacent (A transposed, B as stored); the scalar loop
// does the rest. Both engines read what this writes, so the tests cover every branch.
template <size_t W>
void pack_pairs(uint32_t* dst, const Source& s, size_t line0, size_t lines, size_t p0, size_t kc) {
  const size_t pairs = (kc + 1) / 2, panels = (lines + W - 1) / W, whole_pairs = kc / 2;
  const auto at = [&](size_t line, size_t depth) -> uint32_t {
    return s.base[(line0 + line) * s.line_stride + (p0 + depth) * s.depth_stride];
  };
  for (size_t q = 0; q < panels; ++q, dst += W * pairs) {
    const size_t valid = std::min(W, lines - q * W);
    const uint16_t* first = s.base + (line0 + q * W) * s.line_stride + p0 * s.depth_stride;
    size_t p = 0;  // pairs [0, p) of lines [0, vector_lines) are packed by the vector code
    size_t vector_lines = 0;
#if defined(__SSE2__)
    if (s.depth_stride == 1) {
      vector_lines = valid / 4 * 4;
      for (; p + 4 <= whole_pairs; p += 4) {
        for (size_t w = 0; w < vector_lines; w += 4) {
          __m128i v[4];
          for (size_t t = 0; t < 4; ++t) {
            v[t] = _mm_loadu_si128(reinterpret_cast<const __m128i*>(first + (w + t) * s.line_stride + 2 * p));
          }
          const __m128i t0 = _mm_unpacklo_epi32(v[0], v[1]), t1 = _mm_unpacklo_epi32(v[2], v[3]);
          const __m128i t2 = _mm_unpackhi_epi32(v[0], v[1]), t3 = _mm_unpackhi_epi32(v[2], v[3]);
          const __m128i out[4] = {_mm_unpacklo_epi64(t0, t1), _mm_unpackhi_epi64(t0, t1), _mm_unpacklo_epi64(t2, t3),
                                  _mm_unpackhi_epi64(t2, t3)};
          for (size_t t = 0; t < 4; ++t) {
            _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + (p + t) * W + w), out[t]);
          }
        }
      }
    } else if (s.line_stride == 1) {
      vector_lines = valid / 8 * 8;
      for (; p < whole_pairs; ++p) {
        const uint16_t* even = first + 2 * p * s.depth_stride;
        const uint16_t* odd = even + s.depth_stride;
        for (size_t w = 0; w < vector_lines; w += 8) {
          const __m128i lo = _mm_loadu_si128(reinterpret_cast<const __m128i*>(even + w));
          const __m128i hi = _mm_loadu_si128(reinterpret_cast<const __m128i*>(odd + w));
          _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + p * W + w), _mm_unpacklo_epi16(lo, hi));
          _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + p * W + w + 4), _mm_unpackhi_epi16(lo, hi));
        }
      }
    }
#endif
    for (size_t pp = 0; pp < pairs; ++pp) {
      const bool odd = 2 * pp + 1 < kc;
      uint32_t* row = dst + pp * W;
      for (size_t w = pp < p ? vector_lines : 0; w < valid; ++w) {
        row[w] = at(q * W + w, 2 * pp) | (odd ? at(q * W + w, 2 * pp + 1) << 16 : 0u);
      }
      std::fill(row + valid, row + W, 0u);
    }
  }
}

// One register tile: c (rows x cols valid, row stride ldc) = start + the pairs of panels a
// (pairs x kMR dwords) and b (pairs x kNR dwords), acc(r, j) taking per pair p the instruction
// with src1 = b's dword (p, j), src2 = a's dword (p, r) (broadcast); start(r, j) = c(r, j) when
// load_c, else bias[j] when bias is not null (cols values), else 0. Nothing outside the valid rows
// and columns of C, or past the bias's cols values, is read or written. pairs >= 1.
using TileKernel = void (*)(size_t pairs, const uint32_t* a, const uint32_t* b, float* c, size_t ldc, size_t rows,
                            size_t cols, bool load_c, const float* bias);

#if HG_BF16DOT_X86
__attribute__((target("avx512f,avx512bf16"))) void tile_instruction(size_t pairs, const uint32_t* a, const uint32_t* b,
                                                                    float* c, size_t ldc, size_t rows, size_t cols,
                                                                    bool load_c, const float* bias) {
  const __mmask16 mask0 = cols >= 16 ? 0xFFFF : __mmask16((1u << cols) - 1);
  const __mmask16 mask1 = cols >= 32 ? 0xFFFF : cols > 16 ? __mmask16((1u << (cols - 16)) - 1) : 0;
  const bool from_bias = !load_c && bias != nullptr;
  const __m512 start0 = from_bias ? _mm512_maskz_loadu_ps(mask0, bias) : _mm512_setzero_ps();
  const __m512 start1 = from_bias ? _mm512_maskz_loadu_ps(mask1, bias + 16) : _mm512_setzero_ps();
  __m512 acc[kMR][2];
  for (size_t r = 0; r < kMR; ++r) {
    const bool load = load_c && r < rows;
    acc[r][0] = load ? _mm512_maskz_loadu_ps(mask0, c + r * ldc) : start0;
    acc[r][1] = load ? _mm512_maskz_loadu_ps(mask1, c + r * ldc + 16) : start1;
  }
  for (size_t p = 0; p < pairs; ++p) {
    const __m512i b0 = _mm512_loadu_si512(b + p * kNR), b1 = _mm512_loadu_si512(b + p * kNR + 16);
#pragma GCC unroll 12  // the 24 accumulators stay in registers only when unrolled
    for (size_t r = 0; r < kMR; ++r) {
      const __m512i pair = _mm512_set1_epi32(int(a[p * kMR + r]));
      // (__m512bh) reinterprets the bits (a vector cast), whichever element type the compiler's
      // header gives __m512bh (short in GCC 12, __bf16 in newer GCC and clang).
      acc[r][0] = _mm512_dpbf16_ps(acc[r][0], (__m512bh)b0, (__m512bh)pair);
      acc[r][1] = _mm512_dpbf16_ps(acc[r][1], (__m512bh)b1, (__m512bh)pair);
    }
  }
  for (size_t r = 0; r < rows; ++r) {
    _mm512_mask_storeu_ps(c + r * ldc, mask0, acc[r][0]);
    _mm512_mask_storeu_ps(c + r * ldc + 16, mask1, acc[r][1]);
  }
}
#endif

// One lane of one instruction: the odd (high) halves first, then the even (low) ones.
float dpbf16_lane(float acc, uint32_t src1, uint32_t src2) {
  acc = dpbf16_fma(acc, uint16_t(src1 >> 16), uint16_t(src2 >> 16));
  return dpbf16_fma(acc, uint16_t(src1), uint16_t(src2));
}

void tile_emulation(size_t pairs, const uint32_t* a, const uint32_t* b, float* c, size_t ldc, size_t rows, size_t cols,
                    bool load_c, const float* bias) {
  const bool from_bias = !load_c && bias != nullptr;
  float acc[kMR][kNR];
  for (size_t r = 0; r < kMR; ++r) {
    for (size_t j = 0; j < kNR; ++j) {
      acc[r][j] = j >= cols ? 0.0f : load_c && r < rows ? c[r * ldc + j] : from_bias ? bias[j] : 0.0f;
    }
  }
  for (size_t p = 0; p < pairs; ++p) {
    for (size_t r = 0; r < kMR; ++r) {
      for (size_t j = 0; j < kNR; ++j) acc[r][j] = dpbf16_lane(acc[r][j], b[p * kNR + j], a[p * kMR + r]);
    }
  }
  for (size_t r = 0; r < rows; ++r) std::copy_n(acc[r], cols, c + r * ldc);
}

// Packing buffers, one pair per thread, grown to the largest shape seen. A panel row of B is
// 128 bytes, so with the buffer 64-byte aligned every vector load stays within one cache line.
struct PairBuffers {
  std::vector<uint32_t> a, b;
};

uint32_t* reserve_aligned(std::vector<uint32_t>& buffer, size_t dwords) {
  buffer.resize(std::max(buffer.size(), dwords + 15));
  return reinterpret_cast<uint32_t*>((reinterpret_cast<uintptr_t>(buffer.data()) + 63) & ~uintptr_t{63});
}

// C(m,n) [+]= [bias +] A(m,k) B(k,n) on one thread, C(i,j) at c[i * ldc + j]: gemm.cpp's loop nest
// (for each (kKC, kNC) block of B, packed once, every (kMC, kKC) block of A), in pairs of k; the
// first depth block starts from the bias (n values) when there is one.
void gemm_serial(TileKernel tile, float* c, size_t ldc, const Source& a, const Source& b, size_t m, size_t n, size_t k,
                 bool accumulate, const float* bias) {
  if (k == 0) {
    if (!accumulate) {
      for (size_t i = 0; i < m; ++i) {
        if (bias == nullptr)
          std::fill_n(c + i * ldc, n, 0.0f);
        else
          std::copy_n(bias, n, c + i * ldc);
      }
    }
    return;
  }
  const auto balanced = [](size_t extent, size_t block, size_t multiple) {
    const size_t blocks = (extent + block - 1) / block;
    const size_t size = (extent + blocks - 1) / blocks;
    return (size + multiple - 1) / multiple * multiple;
  };
  const size_t kc_step = balanced(k, kKC, 2), mc_step = balanced(m, kMC, kMR), nc_step = balanced(n, kNC, kNR);
  thread_local PairBuffers buffers;
  const size_t pairs_step = kc_step / 2;
  uint32_t* packed_a = reserve_aligned(buffers.a, mc_step * pairs_step);
  uint32_t* packed_b = reserve_aligned(buffers.b, nc_step * pairs_step);
  for (size_t jc = 0; jc < n; jc += nc_step) {
    const size_t nc = std::min(nc_step, n - jc);
    for (size_t pc = 0; pc < k; pc += kc_step) {
      const size_t kc = std::min(kc_step, k - pc), pairs = (kc + 1) / 2;
      pack_pairs<kNR>(packed_b, b, jc, nc, pc, kc);
      for (size_t ic = 0; ic < m; ic += mc_step) {
        const size_t mc = std::min(mc_step, m - ic);
        pack_pairs<kMR>(packed_a, a, ic, mc, pc, kc);
        for (size_t jr = 0; jr < nc; jr += kNR) {
          for (size_t ir = 0; ir < mc; ir += kMR) {
            tile(pairs, packed_a + ir * pairs, packed_b + jr * pairs, c + (ic + ir) * ldc + jc + jr, ldc,
                 std::min(kMR, mc - ir), std::min(kNR, nc - jr), accumulate || pc > 0,
                 bias == nullptr ? nullptr : bias + jc + jr);
          }
        }
      }
    }
  }
}

// -1: no set_bf16_dot in force (the environment decides); else a Bf16Dot.
std::atomic<int> g_mode{-1};

}  // namespace

bool cpu_has_bf16_dot() {
#if HG_BF16DOT_X86
  static const bool has = [] {
    __builtin_cpu_init();  // safe to call again; needed when this runs before libgcc's constructor
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bf16");
  }();
  return has;
#else
  return false;
#endif
}

Bf16Dot bf16_dot_from_environment(const char* value) {
  if (value == nullptr || std::strcmp(value, "0") == 0) return Bf16Dot::kAuto;
  check(std::strcmp(value, "1") == 0, "HALFGRAD_EXACT_BF16 = '", value,
        "': expected 1 (the exact f32 path for bf16 GEMMs) or 0 (VDPBF16PS where the CPU has it)");
  return Bf16Dot::kExact;
}

Bf16Dot bf16_dot_mode(Bf16Dot requested) {
  const int mode = g_mode.load(std::memory_order_relaxed);
  if (mode >= 0) return static_cast<Bf16Dot>(mode);
  static const char* const variable = std::getenv("HALFGRAD_EXACT_BF16");
  static const Bf16Dot from_environment = bf16_dot_from_environment(variable);
  return variable != nullptr ? from_environment : requested;
}

void set_bf16_dot(Bf16Dot mode) { g_mode.store(static_cast<int>(mode), std::memory_order_relaxed); }

ScopedBf16Dot::ScopedBf16Dot(Bf16Dot mode) : saved_(g_mode.load(std::memory_order_relaxed)) { set_bf16_dot(mode); }
ScopedBf16Dot::~ScopedBf16Dot() { g_mode.store(saved_, std::memory_order_relaxed); }

float dpbf16_fma(float acc, uint16_t x, uint16_t y) {
  const float fx = daz_bf16(x), fy = daz_bf16(y), fa = daz(acc);
  // r: the exact fx fy + fa rounded once with gradual underflow. Tiny after rounding (rounded to
  // 24 bits with an unbounded exponent, below 2^-126) is the same as r subnormal, except where r
  // is +-2^-126 itself: exact values in [2^-126 - 2^-150, 2^-126 - 2^-151) round up to 2^-126 on
  // the subnormal grid but are tiny on the unbounded one. There the exact value x = s + e is
  // recovered by two-sum in double (the product is exact in double: 16 bits; s + e = x exactly)
  // and compared with T = 2^-126 - 2^-151 (at T itself the tie goes to the even 2^-126).
  const float r = std::fma(fx, fy, fa);
  if (!std::isfinite(r) || r == 0.0f) return r;
  const float magnitude = std::fabs(r);
  if (magnitude > 0x1p-126f) return r;
  if (magnitude < 0x1p-126f) return std::copysign(0.0f, r);
  const double product = double(fx) * double(fy), s = product + double(fa);
  const double bv = s - product, e = (product - (s - bv)) + (double(fa) - bv);
  const double sign = s < 0 ? -1.0 : 1.0;
  const double threshold = 0x1p-126 - 0x1p-151;  // |s| is within an ulp of 2^-126: s - T is exact
  return (sign * s - threshold) < -(sign * e) ? std::copysign(0.0f, r) : r;
}

void gemm_bf16dot_part(GemmEngine engine, float* c, int64_t ldc, const GemmOperand& a_op, const GemmOperand& b_op,
                       int64_t m_total, int64_t n_total, int64_t k, bool accumulate, const float* bias, int64_t part,
                       int64_t parts) {
  check(engine == GemmEngine::kBf16Dot || engine == GemmEngine::kBf16DotEmulated, "gemm_bf16dot: not a dot engine");
  check(a_op.dtype == DType::bf16 && b_op.dtype == DType::bf16, "gemm_bf16dot: operands are ", dtype_name(a_op.dtype),
        " and ", dtype_name(b_op.dtype), ", not bf16 and bf16");
  check(engine != GemmEngine::kBf16Dot || cpu_has_bf16_dot(),
        "gemm_bf16dot: this CPU has no AVX512_BF16 (grep avx512_bf16 /proc/cpuinfo)");
#if HG_BF16DOT_X86
  const TileKernel tile = engine == GemmEngine::kBf16Dot ? tile_instruction : tile_emulation;
#else
  const TileKernel tile = tile_emulation;  // kBf16Dot was refused above
#endif
  const size_t m = size_t(m_total), n = size_t(n_total);
  // The cut of gemm.cpp's GemmPartImpl, in this kernel's tiles.
  size_t m0 = 0, m1 = m, n0 = 0, n1 = n;
  const size_t m_tiles = (m + kMR - 1) / kMR, n_tiles = (n + kNR - 1) / kNR;
  const auto cut = [&](size_t tiles, size_t tile_size, size_t extent, size_t& lo, size_t& hi) {
    lo = std::min(extent, tiles * size_t(part) / size_t(parts) * tile_size);
    hi = std::min(extent, tiles * size_t(part + 1) / size_t(parts) * tile_size);
  };
  if (m_tiles >= n_tiles) {
    cut(m_tiles, kMR, m, m0, m1);
  } else {
    cut(n_tiles, kNR, n, n0, n1);
  }
  if (m0 >= m1 || n0 >= n1) return;
  Source a = make_source(a_op, /*lines_are_rows=*/true), b = make_source(b_op, /*lines_are_rows=*/false);
  a.base += m0 * a.line_stride;
  b.base += n0 * b.line_stride;
  gemm_serial(tile, c + m0 * size_t(ldc) + n0, size_t(ldc), a, b, m1 - m0, n1 - n0, size_t(k), accumulate,
              bias == nullptr ? nullptr : bias + n0);
}

}  // namespace hg::kernels
