// The span kernels behind convert.h: per-target loops around convert-inl.h's EncodeCore and
// DecodeCore (one loop serves encode and round_to), then, once, the dispatch wrappers that check
// sizes, split long spans into fixed chunks for OpenMP and merge per-chunk NumericsStats in chunk
// order. Default options without stats take the shortcuts of DemoteF32To: F16C for f16 on
// AVX2/AVX3, a 10-operation sequence for bf16.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

#include "halfgrad/base/error.h"
#include "halfgrad/base/parallel.h"
#include "halfgrad/precision/convert.h"
#include "halfgrad/precision/numerics_stats.h"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "halfgrad/precision/convert.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"
#include "halfgrad/precision/convert-inl.h"

#ifndef HALFGRAD_PRECISION_CONVERT_ARGS_
#define HALFGRAD_PRECISION_CONVERT_ARGS_
namespace hg::precision::detail {
// One chunk's call into a per-target kernel.
struct KernelArgs {
  RoundingOptions rounding;
  StochasticKey key;     // from ConvertOptions::seed
  uint64_t first_index;  // stochastic index of the chunk's first element
  NumericsStats* stats;  // the chunk's partial (underflow/subnormal/overflow added here), or null
};
}  // namespace hg::precision::detail
#endif

HWY_BEFORE_NAMESPACE();
namespace hg::precision::HWY_NAMESPACE {

// Calls body(in, out, index, valid) for each vector's worth of elements: in place for full
// vectors, and through zero-padded copies for the tail (valid < Lanes), because Highway 1.0.3's
// MaskedLoad loads the whole vector on SSE4 (and for 8/16-bit lanes on AVX2): it could read past
// the span into an unmapped page, and on SSE4 it even requires alignment.
template <class DF, class TIn, class TOut, class Body>
HWY_INLINE void ForEachVector(DF df, const TIn* in, TOut* out, size_t n, const Body& body) {
  const size_t lanes = hn::Lanes(df);
  size_t i = 0;
  for (; i + lanes <= n; i += lanes) body(in + i, out + i, i, lanes);
  if (i == n) return;
  HWY_ALIGN TIn in_tail[hn::MaxLanes(df)] = {};
  HWY_ALIGN TOut out_tail[hn::MaxLanes(df)];
  std::copy_n(in + i, n - i, in_tail);
  body(in_tail, out_tail, i, n - i);
  std::copy_n(out_tail, n - i, out + i);
}

// src (n) -> dst (n): F's bits (TOut = uint8_t/uint16_t) or, for round_to (TOut = float, dst may
// equal src), the f32 values of those bits.
template <FloatFormat F, bool kStochastic, bool kStats, class TOut>
void EncodeSpan(const float* src, TOut* dst, size_t n, const detail::KernelArgs& args) {
  const hn::ScalableTag<float> df;
  const hn::RebindToUnsigned<decltype(df)> du;
  if constexpr (kFastNearestEven<F> && !kStochastic && !kStats) {
    const RoundingOptions& r = args.rounding;
    if (r.mode == Rounding::kNearestEven && !r.saturate && !r.flush_subnormals) {
      ForEachVector(df, src, dst, n, [&](const float* in, TOut* out, size_t, size_t) {
        const auto narrow = DemoteF32To<F>(df, hn::LoadU(df, in));
        if constexpr (std::is_same_v<TOut, float>) {
          hn::StoreU(PromoteToF32<F>(df, narrow), df, out);
        } else {
          hn::StoreU(narrow, hn::Rebind<TOut, decltype(df)>(), out);
        }
      });
      return;
    }
  }

  const detail::EncodePlan plan = detail::encode_plan(F, args.rounding);
  size_t underflow = 0, subnormal = 0, overflow = 0;
  ForEachVector(df, src, dst, n, [&](const float* in, TOut* out, size_t index, size_t valid) {
    const auto bits = hn::BitCast(du, hn::LoadU(df, in));
    auto random = hn::Zero(du);
    if constexpr (kStochastic) random = StochasticBitsVec(du, args.key, args.first_index + index);
    const auto encoded = EncodeCore<F, kStochastic>(du, bits, random, plan);
    if constexpr (kStats) {
      // Padding lanes of the tail are zeros and would count nowhere, but mask them anyway.
      const auto lanes = hn::FirstN(du, valid);
      const auto zero = hn::Zero(du);
      const auto result = hn::And(encoded.bits, hn::Set(du, F.sign_mask() - 1));
      const auto input = hn::And(bits, hn::Set(du, 0x7FFFFFFFu));
      const auto became_zero = hn::And(hn::Eq(result, zero), hn::Ne(input, zero));
      const auto became_subnormal = hn::And(hn::Ne(result, zero), hn::Lt(result, hn::Set(du, 1u << F.mantissa_bits)));
      underflow += hn::CountTrue(du, hn::And(became_zero, lanes));
      subnormal += hn::CountTrue(du, hn::And(became_subnormal, lanes));
      overflow += hn::CountTrue(du, hn::And(encoded.overflow, lanes));
    }
    if constexpr (std::is_same_v<TOut, float>) {
      hn::StoreU(DecodeCore<F>(du, encoded.bits), df, out);
    } else {
      const hn::Rebind<TOut, decltype(df)> dn;
      hn::StoreU(NarrowBits(dn, encoded.bits), dn, out);
    }
  });
  if constexpr (kStats) {
    args.stats->underflow += underflow;
    args.stats->subnormal += subnormal;
    args.stats->overflow += overflow;
  }
}

template <FloatFormat F, class TOut>
void EncodeAnyMode(const float* src, TOut* dst, size_t n, const detail::KernelArgs& args) {
  const bool stochastic = args.rounding.mode == Rounding::kStochastic;
  if (args.stats != nullptr) {
    stochastic ? EncodeSpan<F, true, true>(src, dst, n, args) : EncodeSpan<F, false, true>(src, dst, n, args);
  } else {
    stochastic ? EncodeSpan<F, true, false>(src, dst, n, args) : EncodeSpan<F, false, false>(src, dst, n, args);
  }
}

template <FloatFormat F, class TIn>
void DecodeSpan(const TIn* src, float* dst, size_t n) {
  const hn::ScalableTag<float> df;
  const hn::Rebind<TIn, decltype(df)> dn;
  ForEachVector(df, src, dst, n, [&](const TIn* in, float* out, size_t, size_t) {
    hn::StoreU(PromoteToF32<F>(df, hn::LoadU(dn, in)), df, out);
  });
}

// The exported entry points; the wrappers below have checked that `format` fits the storage.
void EncodeU16(FloatFormat format, const float* src, uint16_t* dst, size_t n, const detail::KernelArgs& args) {
  format == kBinary16 ? EncodeAnyMode<kBinary16>(src, dst, n, args) : EncodeAnyMode<kBFloat16>(src, dst, n, args);
}
void EncodeU8(FloatFormat format, const float* src, uint8_t* dst, size_t n, const detail::KernelArgs& args) {
  format == kE4M3 ? EncodeAnyMode<kE4M3>(src, dst, n, args) : EncodeAnyMode<kE5M2>(src, dst, n, args);
}
void RoundTo(FloatFormat format, float* values, size_t n, const detail::KernelArgs& args) {
  if (format == kBinary16) return EncodeAnyMode<kBinary16>(values, values, n, args);
  if (format == kBFloat16) return EncodeAnyMode<kBFloat16>(values, values, n, args);
  if (format == kE4M3) return EncodeAnyMode<kE4M3>(values, values, n, args);
  EncodeAnyMode<kE5M2>(values, values, n, args);
}
void DecodeU16(FloatFormat format, const uint16_t* src, float* dst, size_t n) {
  format == kBinary16 ? DecodeSpan<kBinary16>(src, dst, n) : DecodeSpan<kBFloat16>(src, dst, n);
}
void DecodeU8(FloatFormat format, const uint8_t* src, float* dst, size_t n) {
  format == kE4M3 ? DecodeSpan<kE4M3>(src, dst, n) : DecodeSpan<kE5M2>(src, dst, n);
}

// NOLINTNEXTLINE(google-readability-namespace-comments)
}  // namespace hg::precision::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace hg::precision {

HWY_EXPORT(EncodeU16);
HWY_EXPORT(EncodeU8);
HWY_EXPORT(RoundTo);
HWY_EXPORT(DecodeU16);
HWY_EXPORT(DecodeU8);

namespace {

// Chunks: at least kMinChunk elements (so each is worth a thread), at most kMaxChunks of them
// (bounding the per-chunk stats), a multiple of 64 so only the last chunk has a vector tail. The
// chunking depends on n alone, never on the thread count, so per-chunk stats merge identically.
constexpr size_t kMinChunk = size_t{1} << 14;
constexpr size_t kMaxChunks = 256;
static_assert(size_t(kParallelConvertElements) >= 4 * kMinChunk, "a span that opens a team has four chunks or more");

// Runs kernel(begin, end, stats) over [0, n) chunk by chunk, in parallel for long spans; with
// `stats`, each chunk fills its own partial, merged in chunk order afterwards.
template <class Kernel>
void for_chunks(size_t n, NumericsStats* stats, const Kernel& kernel) {
  const size_t chunk = std::max(kMinChunk, ((n + kMaxChunks - 1) / kMaxChunks + 63) / 64 * 64);
  const ptrdiff_t count = ptrdiff_t((n + chunk - 1) / chunk);
  std::vector<NumericsStats> partial(stats != nullptr ? size_t(count) : 0);
  const auto run = [&](ptrdiff_t c) {
    const size_t begin = size_t(c) * chunk;
    kernel(begin, std::min(n, begin + chunk), stats != nullptr ? &partial[size_t(c)] : nullptr);
  };
  // No OpenMP region at all on the calling thread's path: the autograd ops narrow every
  // 2048-element chunk through here (see halfgrad/base/parallel.h for the cost of a region).
  if (use_team(n, kParallelConvertElements)) {
#pragma omp parallel for schedule(static)
    for (ptrdiff_t c = 0; c < count; ++c) run(c);
  } else {
    for (ptrdiff_t c = 0; c < count; ++c) run(c);
  }
  if (stats != nullptr) {
    for (const NumericsStats& p : partial) stats->merge(p);
  }
}

void check_sizes(const char* op, size_t src, size_t dst) {
  check(src == dst, "hg::precision::", op, ": src has ", src, " elements but dst has ", dst);
}

// uint16_t holds f16/bf16 bits, uint8_t holds e4m3/e5m2 bits; round_to takes all four.
void check_format(const char* op, FloatFormat f, int storage_bits) {
  const bool ok = storage_bits == 16  ? f == kBinary16 || f == kBFloat16
                  : storage_bits == 8 ? f == kE4M3 || f == kE5M2
                                      : f == kBinary16 || f == kBFloat16 || f == kE4M3 || f == kE5M2;
  if (ok) return;  // not check(): its message parts, a std::string among them, would be built on every call
  fail("hg::precision::", op, ": format ", format_name(f), " (", f.exponent_bits, " exponent, ", f.mantissa_bits,
       " mantissa bits) is not supported",
       storage_bits != 0 ? " with uint" + std::to_string(storage_bits) + "_t storage" : std::string());
}

template <class Fn>
void encode_chunks(const char* op, std::span<const float> src, const ConvertOptions& options, const Fn& fn) {
  check(options.rounding.random_bits == 0, "hg::precision::", op,
        ": rounding.random_bits is for one value; a span draws stochastic_bits(seed, offset + i), set "
        "ConvertOptions::seed");
  const StochasticKey key = stochastic_key(options.seed);
  for_chunks(src.size(), options.stats, [&](size_t begin, size_t end, NumericsStats* stats) {
    if (stats != nullptr) stats->input.add(src.subspan(begin, end - begin));  // before round_to overwrites it
    fn(begin, end, detail::KernelArgs{options.rounding, key, options.offset + begin, stats});
  });
}

}  // namespace

void encode(FloatFormat format, std::span<const float> src, std::span<uint16_t> dst, const ConvertOptions& options) {
  check_sizes("encode", src.size(), dst.size());
  check_format("encode", format, 16);
  encode_chunks("encode", src, options, [&](size_t begin, size_t end, const detail::KernelArgs& args) {
    HWY_DYNAMIC_DISPATCH(EncodeU16)(format, src.data() + begin, dst.data() + begin, end - begin, args);
  });
}

void encode(FloatFormat format, std::span<const float> src, std::span<uint8_t> dst, const ConvertOptions& options) {
  check_sizes("encode", src.size(), dst.size());
  check_format("encode", format, 8);
  encode_chunks("encode", src, options, [&](size_t begin, size_t end, const detail::KernelArgs& args) {
    HWY_DYNAMIC_DISPATCH(EncodeU8)(format, src.data() + begin, dst.data() + begin, end - begin, args);
  });
}

void round_to(FloatFormat format, std::span<float> values, const ConvertOptions& options) {
  check_format("round_to", format, 0);
  encode_chunks("round_to", values, options, [&](size_t begin, size_t end, const detail::KernelArgs& args) {
    HWY_DYNAMIC_DISPATCH(RoundTo)(format, values.data() + begin, end - begin, args);
  });
}

void decode(FloatFormat format, std::span<const uint16_t> src, std::span<float> dst) {
  check_sizes("decode", src.size(), dst.size());
  check_format("decode", format, 16);
  for_chunks(src.size(), nullptr, [&](size_t begin, size_t end, NumericsStats*) {
    HWY_DYNAMIC_DISPATCH(DecodeU16)(format, src.data() + begin, dst.data() + begin, end - begin);
  });
}

void decode(FloatFormat format, std::span<const uint8_t> src, std::span<float> dst) {
  check_sizes("decode", src.size(), dst.size());
  check_format("decode", format, 8);
  for_chunks(src.size(), nullptr, [&](size_t begin, size_t end, NumericsStats*) {
    HWY_DYNAMIC_DISPATCH(DecodeU8)(format, src.data() + begin, dst.data() + begin, end - begin);
  });
}

}  // namespace hg::precision
#endif  // HWY_ONCE
