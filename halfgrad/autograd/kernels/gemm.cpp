// gemm.cpp: the packed, cache-blocked GEMM of gemm.h (GotoBLAS/BLIS loop nest, Highway
// micro-kernels per target, OpenMP over blocks of C). f16/bf16 inputs are widened to f32 while
// packing, so the micro-kernel only ever sees f32. Not here: rounding C to a narrow dtype (the
// caller's job), alpha/beta scaling other than beta = 0 or 1, and splitting K across threads
// (that would make results depend on the thread count).
#include "halfgrad/autograd/kernels/gemm.h"

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdlib>
#include <new>
#include <utility>
#include <vector>

#include "halfgrad/autograd/kernels/cast.h"
#include "halfgrad/autograd/kernels/gemm_bf16dot.h"
#include "halfgrad/base/error.h"
#include "halfgrad/base/parallel.h"

// Packing buffers live outside the per-target code (this file is compiled once per target).
#ifndef HG_KERNELS_GEMM_BUFFERS_
#define HG_KERNELS_GEMM_BUFFERS_
namespace hg::kernels::gemm_detail {

// A 64-byte aligned f32 buffer that only grows, one per thread and operand: once a thread has
// seen its largest shape, packing allocates nothing.
class PackBuffer {
 public:
  PackBuffer() = default;
  PackBuffer(const PackBuffer&) = delete;
  PackBuffer& operator=(const PackBuffer&) = delete;
  ~PackBuffer() { std::free(data_); }

  float* reserve(size_t floats) {
    if (floats > capacity_) {
      const size_t bytes = (floats * sizeof(float) + 63) / 64 * 64;
      float* grown = static_cast<float*>(std::aligned_alloc(64, bytes));
      if (grown == nullptr) throw std::bad_alloc();
      std::free(data_);
      data_ = grown;
      capacity_ = bytes / sizeof(float);
    }
    return data_;
  }

 private:
  float* data_ = nullptr;
  size_t capacity_ = 0;
};

struct PackBuffers {
  PackBuffer a, b;
};

inline PackBuffers& thread_pack_buffers() {
  thread_local PackBuffers buffers;
  return buffers;
}

}  // namespace hg::kernels::gemm_detail
#endif  // HG_KERNELS_GEMM_BUFFERS_

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "halfgrad/autograd/kernels/gemm.cpp"
#include "hwy/cache_control.h"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"
#include "halfgrad/precision/convert-inl.h"

HWY_BEFORE_NAMESPACE();
namespace hg::kernels::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

using DF = hn::ScalableTag<float>;
constexpr size_t kL = hn::MaxLanes(DF());  // f32 lanes of a vector

// The register tile: kMR rows x kNR = kNV vectors of C accumulate in registers. With 16 vector
// registers (AVX2, SSE4): 6 x 2 accumulators + 2 B vectors + 1 A broadcast = 15, per k 12 FMAs
// against 8 loads (AVX2: 6x16, SSE4: 6x8, BLIS's Haswell shape). AVX-512 has 32: 12 x 2 + 3 = 27
// (12x32). The scalar target reuses 6x2.
constexpr size_t kNV = 2;
#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX3
constexpr size_t kMR = 12;
#else
constexpr size_t kMR = 6;
#endif
constexpr size_t kNR = kNV * kL;

// Cache blocks (Goto's names). A B micro-panel (kKC, kNR) stays in L1 while A micro-panels stream
// past it (AVX2: 16 KiB of Zen3's 32 KiB); an A block (kMC, kKC) sits in L2 (144 KiB of 512 KiB);
// a B block (kKC, kNC) in L3. Fixed, so the blocking never depends on the thread count.
constexpr size_t kKC = 256;
constexpr size_t kMC = 144;
constexpr size_t kNC = 4096;
static_assert(kMC % kMR == 0 && kNC % kNR == 0);

// Packing stores whole vectors past a panel's last row (see PackBlockT); buffers carry this slack.
constexpr size_t kPackSlack = 16;

// ---------------------------------------------------------------------------------------------
// The one place where stored elements become f32: Lanes(df) elements of dtype kT from
// base[index...], widened exactly by the project's conversion helpers (halfgrad/precision/convert-inl.h:
// F16C on AVX2/AVX3, the exact integer decode elsewhere -- Highway 1.0.3's own f16 PromoteTo
// turns inf/NaN into finite numbers on SSE4/SCALAR).
template <DType kT, class D>
HWY_INLINE hn::Vec<D> LoadWiden(D df, const void* HWY_RESTRICT base, size_t index) {
  if constexpr (kT == DType::f32) {
    return hn::LoadU(df, static_cast<const float*>(base) + index);
  } else {
    namespace hp = hg::precision::HWY_NAMESPACE;
    const hn::Rebind<uint16_t, D> du16;
    const auto bits = hn::LoadU(du16, static_cast<const uint16_t*>(base) + index);
    if constexpr (kT == DType::bf16) return hp::PromoteBF16ToF32(df, bits);
    return hp::PromoteF16ToF32(df, bits);
  }
}

template <DType kT>
HWY_INLINE float WidenOne(const void* HWY_RESTRICT base, size_t index) {
  return hn::GetLane(LoadWiden<kT>(hn::CappedTag<float, 1>(), base, index));
}

// ---------------------------------------------------------------------------------------------
// Packing. An operand is seen as lines (A: rows i, B: columns j) of depth k:
// element (line w, depth p) at base[origin + w * line_stride + p * depth_stride], one stride 1.
struct Source {
  const void* base;
  DType dtype;
  size_t origin;
  size_t line_stride;
  size_t depth_stride;
};

// In-register transpose of a T x T block, T = Lanes(d) in {1, 4, 8}: v[t] holds line t on input,
// depth t on output. 4x4 transposes within each 128-bit block, then (T = 8) swap the halves.
#if HWY_TARGET == HWY_SCALAR
template <class D>
HWY_INLINE void Transpose(D, hn::Vec<D>*) {}  // 1 x 1
#else
template <class D>
HWY_INLINE void Transpose(D d, hn::Vec<D>* HWY_RESTRICT v) {
  constexpr size_t T = hn::MaxLanes(d);
  static_assert(T == 4 || T == 8);
  const hn::Repartition<double, D> dd;
  hn::Vec<D> q[T];
  for (size_t h = 0; h < T; h += 4) {
    const auto t0 = hn::BitCast(dd, hn::InterleaveLower(d, v[h + 0], v[h + 1]));
    const auto t1 = hn::BitCast(dd, hn::InterleaveLower(d, v[h + 2], v[h + 3]));
    const auto t2 = hn::BitCast(dd, hn::InterleaveUpper(d, v[h + 0], v[h + 1]));
    const auto t3 = hn::BitCast(dd, hn::InterleaveUpper(d, v[h + 2], v[h + 3]));
    q[h + 0] = hn::BitCast(d, hn::InterleaveLower(dd, t0, t1));
    q[h + 1] = hn::BitCast(d, hn::InterleaveUpper(dd, t0, t1));
    q[h + 2] = hn::BitCast(d, hn::InterleaveLower(dd, t2, t3));
    q[h + 3] = hn::BitCast(d, hn::InterleaveUpper(dd, t2, t3));
  }
  if constexpr (T == 4) {
    for (size_t t = 0; t < 4; ++t) v[t] = q[t];
  } else {
    for (size_t t = 0; t < 4; ++t) {
      v[t] = hn::ConcatLowerLower(d, q[t + 4], q[t]);
      v[t + 4] = hn::ConcatUpperUpper(d, q[t + 4], q[t]);
    }
  }
}
#endif

// Packs `lines` lines x depth [0, kc) of `s` from `origin` into consecutive panels of W lines,
// dst[q * W * kc + p * W + w] = element (q * W + w, p), widened to f32. The last panel's lines
// past `lines` are zeros: they pad the register tile and never reach C. Whole-vector stores may
// write up to kPackSlack floats past a panel row into the next row, which is written afterwards,
// or past the last panel into the buffer's slack.
template <DType kT, size_t W>
void PackBlockT(float* HWY_RESTRICT dst, const Source& s, size_t origin, size_t lines, size_t kc) {
  const hn::CappedTag<float, 8> d;
  constexpr size_t T = hn::MaxLanes(d);
  constexpr size_t G = (W + T - 1) / T;  // vectors (groups of T lines) per panel row
  static_assert(G * T - W <= kPackSlack);
  const size_t panels = (lines + W - 1) / W;
  if (s.depth_stride == 1) {
    // Each line is contiguous in depth (A as stored, B transposed): T x T blocks are loaded
    // along the lines and transposed, panel by panel.
    for (size_t q = 0; q < panels; ++q, dst += W * kc, origin += W * s.line_stride) {
      const size_t valid = std::min(W, lines - q * W);
      size_t p = 0;
      for (; p + T <= kc; p += T) {
        hn::Vec<decltype(d)> block[G][T];
        for (size_t g = 0; g < G; ++g) {
          for (size_t t = 0; t < T; ++t) {
            const size_t w = g * T + t;
            block[g][t] = w < valid ? LoadWiden<kT>(d, s.base, origin + w * s.line_stride + p) : hn::Zero(d);
          }
          Transpose(d, block[g]);
        }
        for (size_t t = 0; t < T; ++t) {
          for (size_t g = 0; g < G; ++g) hn::StoreU(block[g][t], d, dst + (p + t) * W + g * T);
        }
      }
      for (; p < kc; ++p) {
        for (size_t w = 0; w < W; ++w) {
          dst[p * W + w] = w < valid ? WidenOne<kT>(s.base, origin + w * s.line_stride + p) : 0.0f;
        }
      }
    }
    return;
  }
  // Lines adjacent in memory (A transposed, B as stored): each stored row is read once, left to
  // right across the panels (per panel it would be a short piece of many rows, which thrashes
  // L1 when the rows are 4 KiB apart). Panels whose vector reads stay inside the block take the
  // fast path, except in the last row, where a store past a panel would land in the next panel.
  const size_t fast = lines >= G * T ? (lines - G * T) / W + 1 : 0;
  for (size_t p = 0; p < kc; ++p) {
    const size_t row = origin + p * s.depth_stride;
    size_t q = 0;
    if (p + 1 < kc || W % T == 0) {
      for (; q < fast; ++q) {
        for (size_t g = 0; g < G; ++g) {
          hn::StoreU(LoadWiden<kT>(d, s.base, row + q * W + g * T), d, dst + q * W * kc + p * W + g * T);
        }
      }
    }
    for (; q < panels; ++q) {
      for (size_t w = 0; w < W; ++w) {
        const size_t line = q * W + w;
        dst[q * W * kc + p * W + w] = line < lines ? WidenOne<kT>(s.base, row + line) : 0.0f;
      }
    }
  }
}

// Copies `lines` lines x depth [0, kc) of `s` (depth contiguous: A as stored) from `origin`,
// widened to f32, line w at dst[w * step + p]: the layout the micro-kernel reads A in place from,
// without PackBlockT's transposes (a load, a widening and a store per vector). For f16/bf16 A and
// for f32 rows 4 KiB apart (see AMode). step: a multiple of the f32 lanes, dst aligned.
template <DType kT>
void WidenLinesT(float* HWY_RESTRICT dst, size_t step, const Source& s, size_t origin, size_t lines, size_t kc) {
  const DF d;
  for (size_t w = 0; w < lines; ++w, dst += step, origin += s.line_stride) {
    size_t p = 0;
    for (; p + kL <= kc; p += kL) hn::Store(LoadWiden<kT>(d, s.base, origin + p), d, dst + p);
    for (; p < kc; ++p) dst[p] = WidenOne<kT>(s.base, origin + p);
  }
}

void WidenLines(float* HWY_RESTRICT dst, size_t step, const Source& s, size_t origin, size_t lines, size_t kc) {
  switch (s.dtype) {
    case DType::f32:
      return WidenLinesT<DType::f32>(dst, step, s, origin, lines, kc);
    case DType::f16:
      return WidenLinesT<DType::f16>(dst, step, s, origin, lines, kc);
    case DType::bf16:
      return WidenLinesT<DType::bf16>(dst, step, s, origin, lines, kc);
  }
}

template <size_t W>
void PackBlock(float* HWY_RESTRICT dst, const Source& s, size_t origin, size_t lines, size_t kc) {
  switch (s.dtype) {
    case DType::f32:
      return PackBlockT<DType::f32, W>(dst, s, origin, lines, kc);
    case DType::f16:
      return PackBlockT<DType::f16, W>(dst, s, origin, lines, kc);
    case DType::bf16:
      return PackBlockT<DType::bf16, W>(dst, s, origin, lines, kc);
  }
}

// ---------------------------------------------------------------------------------------------
// Where a register tile's chains start: at 0, at C's old value, or at the bias (one value per
// column, the same in every row).
enum class Start { kZero, kC, kBias };

// Micro-kernel. a: element (row r, depth p) at a[p * a_step + r] (a packed panel, a_step = kMR),
// or at a[r * a_step + p] when kRowsApart (A in rows, see AMode); rows
// [0, kRows) are read. b: packed (kc, kNR), columns [0, kVecs * kL) used -> c: (kRows, kVecs * kL),
// row stride ldc; c = start + a b, start = 0, c or bias[j] (bias: kVecs * kL values) by kStart,
// each element one sequential fused chain over p; kc >= 1. kStart is a template parameter (not a
// branch) so that GCC keeps the accumulators in registers from start to end.
template <Start kStart, size_t kRows, size_t kVecs, bool kRowsApart>
HWY_NOINLINE void MicroKernel(size_t kc, const float* HWY_RESTRICT a, size_t a_step, const float* HWY_RESTRICT b,
                              float* HWY_RESTRICT c, size_t ldc, const float* HWY_RESTRICT bias) {
  const DF d;
  hn::Vec<DF> acc[kRows][kVecs];
  for (size_t r = 0; r < kRows; ++r) {
    if constexpr (kStart != Start::kC) {  // C is only written, at the end: start fetching its lines now
      hwy::Prefetch(c + r * ldc);
      hwy::Prefetch(c + r * ldc + kVecs * kL - 1);
    }
    for (size_t v = 0; v < kVecs; ++v) {
      if constexpr (kStart == Start::kC) acc[r][v] = hn::LoadU(d, c + r * ldc + v * kL);
      if constexpr (kStart == Start::kBias) acc[r][v] = hn::LoadU(d, bias + v * kL);
      if constexpr (kStart == Start::kZero) acc[r][v] = hn::Zero(d);
    }
  }
  size_t p = 0;
  do {
    hn::Vec<DF> bv[kVecs];
    for (size_t v = 0; v < kVecs; ++v) bv[v] = hn::Load(d, b + p * kNR + v * kL);
    for (size_t r = 0; r < kRows; ++r) {
      const auto av = hn::Set(d, kRowsApart ? a[r * a_step + p] : a[p * a_step + r]);
      for (size_t v = 0; v < kVecs; ++v) acc[r][v] = hn::MulAdd(av, bv[v], acc[r][v]);
    }
  } while (++p < kc);
  for (size_t r = 0; r < kRows; ++r) {
    for (size_t v = 0; v < kVecs; ++v) hn::StoreU(acc[r][v], d, c + r * ldc + v * kL);
  }
}

using TileKernel = void (*)(size_t, const float*, size_t, const float*, float*, size_t, const float*);
using KernelsByRows = std::array<TileKernel, kMR>;

template <Start kStart, size_t kVecs, bool kRowsApart, size_t... kRowsMinus1>
constexpr KernelsByRows KernelsForWidth(std::index_sequence<kRowsMinus1...>) {
  return {&MicroKernel<kStart, kRowsMinus1 + 1, kVecs, kRowsApart>...};
}

template <Start kStart, bool kRowsApart>
constexpr std::array<KernelsByRows, kNV> KernelsByWidth() {
  static_assert(kNV == 2);
  return {KernelsForWidth<kStart, 1, kRowsApart>(std::make_index_sequence<kMR>()),
          KernelsForWidth<kStart, 2, kRowsApart>(std::make_index_sequence<kMR>())};
}

template <bool kRowsApart>
constexpr std::array<std::array<KernelsByRows, kNV>, 3> KernelsByStart() {
  return {KernelsByWidth<Start::kZero, kRowsApart>(), KernelsByWidth<Start::kC, kRowsApart>(),
          KernelsByWidth<Start::kBias, kRowsApart>()};
}

// kKernels[rows_apart][start][vectors - 1][rows - 1]: edge tiles use the smallest kernel that
// covers them.
constexpr std::array<std::array<std::array<KernelsByRows, kNV>, 3>, 2> kKernels = {
    {KernelsByStart<false>(), KernelsByStart<true>()}};

// Where the micro-kernel reads an A micro-panel: a packed panel, or A itself (see MicroKernel).
struct APanel {
  const float* data;
  size_t step;
  bool rows_apart;
};

// One register tile of C at c: rows x cols valid (<= kMR x kNR); element (r, j) at c[r * ldc + j],
// or at c[j * ldc + r] when C is stored transposed. Columns that end inside a vector, and
// transposed tiles, go through a local tile so that nothing outside C is read or written; a bias
// start is then written into the local tile and the tile's kernel starts from it as from C. The
// bias holds one value per column of C: bias[j] for tile column j, or bias[r] for tile row r when
// C is stored transposed (its rows are C's columns).
void Tile(size_t kc, const APanel& a, const float* HWY_RESTRICT b, float* HWY_RESTRICT c, size_t ldc, bool c_transposed,
          size_t rows, size_t cols, Start start, const float* HWY_RESTRICT bias) {
  const size_t vecs = (cols + kL - 1) / kL;
  if (!c_transposed && cols % kL == 0) {
    return kKernels[a.rows_apart][size_t(start)][vecs - 1][rows - 1](kc, a.data, a.step, b, c, ldc, bias);
  }
  const Start local_start = start == Start::kZero ? Start::kZero : Start::kC;
  const TileKernel kernel = kKernels[a.rows_apart][size_t(local_start)][vecs - 1][rows - 1];
  HWY_ALIGN float tile[kMR * kNR];
  if (start == Start::kBias) {
    for (size_t r = 0; r < rows; ++r) {
      for (size_t j = 0; j < cols; ++j) tile[r * kNR + j] = bias[c_transposed ? r : j];
    }
  }
  if (c_transposed) {
    if (start == Start::kC) {
      for (size_t j = 0; j < cols; ++j) {
        for (size_t r = 0; r < rows; ++r) tile[r * kNR + j] = c[j * ldc + r];
      }
    }
    kernel(kc, a.data, a.step, b, tile, kNR, nullptr);
    for (size_t j = 0; j < cols; ++j) {
      for (size_t r = 0; r < rows; ++r) c[j * ldc + r] = tile[r * kNR + j];
    }
    return;
  }
  if (start == Start::kC) {
    for (size_t r = 0; r < rows; ++r) std::copy_n(c + r * ldc, cols, tile + r * kNR);
  }
  kernel(kc, a.data, a.step, b, tile, kNR, nullptr);
  for (size_t r = 0; r < rows; ++r) std::copy_n(tile + r * kNR, cols, c + r * ldc);
}

// ---------------------------------------------------------------------------------------------
// How the micro-kernel reads A. Packing A into transposed panels costs about as much as the
// multiply when N is small (at K = 128, N = 128 each A element meets only four B micro-panels),
// while the broadcasts read a micro-panel of kMR rows of kc floats (at most 12 KiB) from L1 as fast
// when the rows lie apart. So A whose rows are contiguous in depth keeps that layout:
// - kInPlace: f32 rows are read where they are stored;
// - kLines: f16/bf16 rows, and f32 rows a multiple of 4 KiB apart (kMR of them would share L1
//   sets), are widened to f32 into a buffer of rows (WidenLines), rows a short stride apart;
// - kPanels: A read along its columns (A^T) is packed: in place it ran at about 0.7x.
// The micro-kernel's chains are the same either way (BENCHMARKS.md, "The non-GEMM half and A read
// in place").
enum class AMode { kInPlace, kLines, kPanels };

AMode ChooseAMode(const Source& a) {
  if (a.depth_stride != 1) return AMode::kPanels;
  const bool aliased = (a.line_stride * sizeof(float)) % 4096 == 0;
  return a.dtype == DType::f32 && !aliased ? AMode::kInPlace : AMode::kLines;
}

// C(m,n) [+]= A(m,k) B(k,n) on one thread, C(i,j) at c[i * ldc + j] (c[j * ldc + i] if
// c_transposed): the GotoBLAS loop nest. For each (kKC, kNC) block of B, packed once, every
// (kMC, kKC) block of A is packed or widened (unless read in place, see AMode) and multiplied
// panel by panel. Block sizes are balanced (e.g. k = 300 -> 2 x 150) but depend only on the shape.
// With a bias (not with accumulate), the first depth block's chains start from it: bias[j] for
// C(i,j), or bias[i] when c_transposed (the product computed is C^T, whose rows are the caller's
// columns).
void GemmSerial(float* HWY_RESTRICT c, size_t ldc, bool c_transposed, const Source& a, const Source& b, size_t m,
                size_t n, size_t k, bool accumulate, const float* HWY_RESTRICT bias) {
  const size_t row_stride = c_transposed ? 1 : ldc, col_stride = c_transposed ? ldc : 1;
  if (k == 0) {
    if (!accumulate) {
      for (size_t i = 0; i < m; ++i) {
        for (size_t j = 0; j < n; ++j) {
          c[i * row_stride + j * col_stride] = bias == nullptr ? 0.0f : bias[c_transposed ? i : j];
        }
      }
    }
    return;
  }
  const auto balanced = [](size_t extent, size_t block, size_t multiple) {
    const size_t blocks = (extent + block - 1) / block;
    const size_t size = (extent + blocks - 1) / blocks;
    return (size + multiple - 1) / multiple * multiple;
  };
  const size_t kc_step = balanced(k, kKC, 1);
  const size_t mc_step = balanced(m, kMC, kMR);
  const size_t nc_step = balanced(n, kNC, kNR);

  gemm_detail::PackBuffers& buffers = gemm_detail::thread_pack_buffers();
  const AMode a_mode = ChooseAMode(a);
  const size_t a_lines_step = (kc_step + kL - 1) / kL * kL;  // <= kKC floats: never 4 KiB
  float* HWY_RESTRICT packed_a = a_mode == AMode::kInPlace ? nullptr
                                 : a_mode == AMode::kLines ? buffers.a.reserve(mc_step * a_lines_step)
                                                           : buffers.a.reserve(mc_step * kc_step + kPackSlack);
  float* HWY_RESTRICT packed_b = buffers.b.reserve(nc_step * kc_step + kPackSlack);

  for (size_t jc = 0; jc < n; jc += nc_step) {
    const size_t nc = std::min(nc_step, n - jc);
    for (size_t pc = 0; pc < k; pc += kc_step) {
      const size_t kc = std::min(kc_step, k - pc);
      const Start start = accumulate || pc > 0 ? Start::kC : bias != nullptr ? Start::kBias : Start::kZero;
      PackBlock<kNR>(packed_b, b, b.origin + jc * b.line_stride + pc * b.depth_stride, nc, kc);
      for (size_t ic = 0; ic < m; ic += mc_step) {
        const size_t mc = std::min(mc_step, m - ic);
        const size_t a_block = a.origin + ic * a.line_stride + pc * a.depth_stride;
        if (a_mode == AMode::kLines) WidenLines(packed_a, a_lines_step, a, a_block, mc, kc);
        if (a_mode == AMode::kPanels) PackBlock<kMR>(packed_a, a, a_block, mc, kc);
        for (size_t jr = 0; jr < nc; jr += kNR) {
          for (size_t ir = 0; ir < mc; ir += kMR) {
            const APanel panel =
                a_mode == AMode::kInPlace
                    ? APanel{static_cast<const float*>(a.base) + a_block + ir * a.line_stride, a.line_stride, true}
                : a_mode == AMode::kLines ? APanel{packed_a + ir * a_lines_step, a_lines_step, true}
                                          : APanel{packed_a + ir * kc, kMR, false};
            Tile(kc, panel, packed_b + jr * kc, c + (ic + ir) * row_stride + (jc + jr) * col_stride, ldc, c_transposed,
                 std::min(kMR, mc - ir), std::min(kNR, nc - jr), start,
                 start == Start::kBias ? bias + (c_transposed ? ic + ir : jc + jr) : nullptr);
          }
        }
      }
    }
  }
}

Source MakeSource(const GemmOperand& x, bool lines_are_rows) {
  // A's lines are the rows of op(A); B's lines are the columns of op(B). A line runs along the
  // stored rows (stride 1 in depth) unless op transposes that.
  const bool depth_contiguous = lines_are_rows != x.transposed;
  const size_t ld = static_cast<size_t>(x.ld);
  return Source{x.data, x.dtype, 0, depth_contiguous ? ld : 1, depth_contiguous ? 1 : ld};
}

// Part `part` of `parts` of C(m,n) [+]= op(A)(m,k) op(B)(k,n): the longer side of C, counted in
// register tiles, is cut into `parts` nearly equal runs. Parts share no element of C, and each
// element's sum is the same whichever part computes it. bias: null or n_total values (gemm.h).
void GemmPartImpl(float* HWY_RESTRICT c, int64_t ldc, const GemmOperand& a_op, const GemmOperand& b_op, int64_t m_total,
                  int64_t n_total, int64_t k, bool accumulate, const float* HWY_RESTRICT bias, int64_t part,
                  int64_t parts) {
  Source a = MakeSource(a_op, /*lines_are_rows=*/true);
  Source b = MakeSource(b_op, /*lines_are_rows=*/false);
  size_t m = static_cast<size_t>(m_total), n = static_cast<size_t>(n_total);
  // With n <= kMR columns (a classifier head's logits) most lanes of the B vectors would be
  // padding. C^T = op(B)^T op(A)^T has the same sums, bit for bit (a * b = b * a, also fused),
  // and fills the vectors along m instead, so that is what gets computed and stored transposed.
  const bool swap = n <= kMR && m > n;
  if (swap) {
    std::swap(a, b);
    std::swap(m, n);
  }
  size_t m0 = 0, m1 = m, n0 = 0, n1 = n;
  const size_t m_tiles = (m + kMR - 1) / kMR, n_tiles = (n + kNR - 1) / kNR;
  const auto cut = [&](size_t tiles, size_t tile, size_t extent, size_t& lo, size_t& hi) {
    lo = std::min(extent, tiles * static_cast<size_t>(part) / static_cast<size_t>(parts) * tile);
    hi = std::min(extent, tiles * static_cast<size_t>(part + 1) / static_cast<size_t>(parts) * tile);
  };
  if (m_tiles >= n_tiles) {
    cut(m_tiles, kMR, m, m0, m1);
  } else {
    cut(n_tiles, kNR, n, n0, n1);
  }
  if (m0 >= m1 || n0 >= n1) return;
  a.origin += m0 * a.line_stride;
  b.origin += n0 * b.line_stride;
  const size_t c_ld = static_cast<size_t>(ldc);
  if (bias != nullptr) bias += swap ? m0 : n0;  // the caller's columns are m after the swap
  GemmSerial(c + (swap ? n0 * c_ld + m0 : m0 * c_ld + n0), c_ld, swap, a, b, m1 - m0, n1 - n0, static_cast<size_t>(k),
             accumulate, bias);
}

}  // namespace hg::kernels::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace hg::kernels {

HWY_EXPORT(GemmPartImpl);

namespace {

// op(x): (rows, cols) widened to f32, row-major with row stride `cols`.
std::vector<float> widen_op(const GemmOperand& x, int64_t rows, int64_t cols) {
  std::vector<float> out(size_t(rows * cols));
  if (out.empty()) return out;  // never read: x.data may be null
  if (!x.transposed) {
    for (int64_t r = 0; r < rows; ++r) load_f32(&out[size_t(r * cols)], x.data, x.dtype, r * x.ld, cols);
    return out;
  }
  std::vector<float> line(static_cast<size_t>(rows));  // a stored row: a column of op(x)
  for (int64_t col = 0; col < cols; ++col) {
    load_f32(line.data(), x.data, x.dtype, col * x.ld, rows);
    for (int64_t r = 0; r < rows; ++r) out[size_t(r * cols + col)] = line[size_t(r)];
  }
  return out;
}

void check_operand(const GemmOperand& x, const char* name, int64_t rows, int64_t cols) {
  const int64_t width = x.transposed ? rows : cols;  // of the stored matrix
  // An empty operand is never read: its data may be null.
  check(x.data != nullptr || rows * cols == 0, "gemm: ", name, ".data is null");
  check(x.ld >= width, "gemm: ", name, ".ld = ", x.ld, " is less than the stored width ", width);
}

// batch x [op(A): (M,K), op(B): (K,N) -> C: (M,N), ldc]
void gemm_product(float* c, int64_t ldc, int64_t c_batch_stride, const GemmOperand& a, const GemmOperand& b,
                  int64_t batch, int64_t m, int64_t n, int64_t k, const GemmOptions& options) {
  check(m >= 0, "gemm: m = ", m, " is negative");
  check(n >= 0, "gemm: n = ", n, " is negative");
  check(k >= 0, "gemm: k = ", k, " is negative");
  check(batch >= 0, "gemm: batch = ", batch, " is negative");
  if (m == 0 || n == 0 || batch == 0) return;
  check(ldc >= n, "gemm: ldc = ", ldc, " is less than n = ", n);
  check_operand(a, "a", m, k);
  check_operand(b, "b", k, n);
  check(options.bias == nullptr || !options.accumulate,
        "gemm: options.bias and options.accumulate together (C = bias + A B or C += A B, not both)");
  const GemmEngine engine =
      choose_gemm_engine(a.dtype, b.dtype, options.accumulation, bf16_dot_mode(options.bf16_dot), cpu_has_bf16_dot());
  if (engine == GemmEngine::kF16Chains) {  // f16 chains (accumulate.h), matrix by matrix
    for (int64_t i = 0; i < batch; ++i) {
      const std::vector<float> wa = widen_op(a.member(i), m, k), wb = widen_op(b.member(i), k, n);
      float* ci = c + i * c_batch_stride;
      // A bias enters as the C the chains start from (kF16: RN16(bias), kF16Blocked: the carry).
      if (options.bias != nullptr) {
        for (int64_t r = 0; r < m; ++r) std::copy_n(options.bias, n, ci + r * ldc);
      }
      gemm_f16(ci, ldc, wa.data(), wb.data(), n, m, n, k, options.accumulation,
               options.accumulate || options.bias != nullptr);
    }
    return;
  }

  // Tasks: (matrix, part) pairs. Whole matrices per thread when they divide evenly or are many
  // (attention's B*H products); otherwise every matrix is also cut into `threads` parts.
  const double flops = 2.0 * double(m) * double(n) * double(k) * double(batch);
  const int64_t team = team_size(flops, kParallelFlops);
  const int64_t parts = (batch % team == 0 || batch >= 4 * team) ? 1 : team;
  const int64_t tasks = batch * parts;
  const auto run = [&](int64_t t) {
    const int64_t i = t / parts;
    if (engine != GemmEngine::kPacked) {  // VDPBF16PS's order (gemm_bf16dot.h)
      return gemm_bf16dot_part(engine, c + i * c_batch_stride, ldc, a.member(i), b.member(i), m, n, k,
                               options.accumulate, options.bias, t % parts, parts);
    }
    HWY_DYNAMIC_DISPATCH(GemmPartImpl)
    (c + i * c_batch_stride, ldc, a.member(i), b.member(i), m, n, k, options.accumulate, options.bias, t % parts,
     parts);
  };
  if (team == 1) {  // no OpenMP region at all: even an inactive one costs a team setup
    for (int64_t t = 0; t < tasks; ++t) run(t);
    return;
  }
#pragma omp parallel for num_threads(team) schedule(static)
  for (int64_t t = 0; t < tasks; ++t) run(t);
}

// The output-scale epilogue (GemmOptions::output_scale) on one row of C.
void scale_output_row(float* row, int64_t n, float scale, const float* bias) {
  for (int64_t j = 0; j < n; ++j) row[j] *= scale;
  if (bias == nullptr) return;
  for (int64_t j = 0; j < n; ++j) row[j] += bias[j];
}

}  // namespace

GemmEngine choose_gemm_engine(DType a, DType b, Accumulation accumulation, Bf16Dot mode, bool cpu_has_bf16_dot) {
  if (accumulation != Accumulation::kF32) return GemmEngine::kF16Chains;
  if (a != DType::bf16 || b != DType::bf16) return GemmEngine::kPacked;
  switch (mode) {
    case Bf16Dot::kAuto:
      return cpu_has_bf16_dot ? GemmEngine::kBf16Dot : GemmEngine::kPacked;
    case Bf16Dot::kExact:
      return GemmEngine::kPacked;
    case Bf16Dot::kEmulated:
      return GemmEngine::kBf16DotEmulated;
  }
  return GemmEngine::kPacked;
}

// batch x [op(A): (M,K), op(B): (K,N) -> C: (M,N), ldc], then the output-scale epilogue.
void gemm(float* c, int64_t ldc, const GemmOperand& a, const GemmOperand& b, int64_t m, int64_t n, int64_t k,
          GemmOptions options) {
  const int64_t batch = options.batch, c_batch_stride = options.c_batch_stride;
  check(!options.output_scale || (!options.accumulate && options.bias == nullptr),
        "gemm: options.output_scale with accumulate or bias (C = s A B [+ output_bias] starts from 0)");
  const std::optional<float> scale = std::exchange(options.output_scale, std::nullopt);
  gemm_product(c, ldc, c_batch_stride, a, b, batch, m, n, k, options);
  if (!scale || m <= 0 || n <= 0 || batch <= 0) return;
  const int64_t rows = batch * m;  // row t: row t % m of matrix t / m
  const auto row = [&](int64_t t) {
    scale_output_row(c + (t / m) * c_batch_stride + (t % m) * ldc, n, *scale, options.output_bias);
  };
  const int64_t team = team_size(double(rows) * double(n), kParallelElements);
  if (team == 1) {
    for (int64_t t = 0; t < rows; ++t) row(t);
    return;
  }
#pragma omp parallel for num_threads(team) schedule(static)
  for (int64_t t = 0; t < rows; ++t) row(t);
}

}  // namespace hg::kernels
#endif  // HWY_ONCE
