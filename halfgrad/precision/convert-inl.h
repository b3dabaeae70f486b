// Per-target Highway helpers for f32 <-> narrow float formats in registers (the encode and decode
// cores behind convert.h, and the promote/demote helpers that GEMM packing and elementwise kernels
// use), each equal to the scalar encode<F>/decode<F> bit for bit; why not Highway's own
// conversions: docs/performance.md. Include it from a file compiled per target, after
// hwy/foreach_target.h and hwy/highway.h, and call inside HWY_NAMESPACE:
//   auto x = hp::PromoteF16ToF32(df, hn::LoadU(du16, src));  // f16 bits -> f32 (hp = hg::precision::HWY_NAMESPACE)
//   hn::StoreU(hp::DemoteF32ToBF16(df, x), du16, dst);       // f32 -> bf16 bits, nearest even

// ------------------------------ Target-independent part (ordinary include guard)
#ifndef HALFGRAD_PRECISION_CONVERT_INL_SHARED_H_
#define HALFGRAD_PRECISION_CONVERT_INL_SHARED_H_

#include <cstdint>
#include <type_traits>

#include "halfgrad/precision/float_format.h"
#include "halfgrad/precision/rounding.h"
#include "halfgrad/precision/stochastic.h"

namespace hg::precision::detail {

// RoundingOptions resolved, once per call, into the lane constants of EncodeCore.
struct EncodePlan {
  // Non-stochastic rounding: a magnitude is incremented iff the discarded fraction f (as 32 bits,
  // MSB = one half) satisfies f > limit - (q & nearest_even), q being the truncated encoding.
  // Nearest-even: limit 2^31 (above half, or half with q odd); nearest-away: 2^31 - 1 (half or
  // more; the fraction's top bit is exact even where its low bits are clamped away); toward zero: 2^32 - 1 (never);
  // away from zero: 0 (any nonzero fraction). Stored XOR 0x80000000, the bias that turns the
  // unsigned comparison into the signed one SIMD units have.
  uint32_t limit_positive, limit_negative;
  uint32_t nearest_even;  // 1 for kNearestEven, else 0
  // The magnitude of a finite value whose rounded magnitude exceeds F's max, and of an inf input.
  uint32_t overflow_positive, overflow_negative, inf_magnitude;
  uint32_t flush_below;  // magnitudes below this become zero: 2^M with flush_subnormals, else 0
};

constexpr EncodePlan encode_plan(FloatFormat f, const RoundingOptions& options) {
  constexpr uint32_t kNever = 0xFFFFFFFFu ^ 0x80000000u, kInexact = 0u ^ 0x80000000u;
  EncodePlan plan{};
  plan.limit_positive = plan.limit_negative = kNever;
  switch (options.mode) {
    case Rounding::kNearestEven:
      plan.limit_positive = plan.limit_negative = 0x80000000u ^ 0x80000000u;
      plan.nearest_even = 1;
      break;
    case Rounding::kNearestAway:  // at or above one half: f > 2^31 - 1
      plan.limit_positive = plan.limit_negative = 0x7FFFFFFFu ^ 0x80000000u;
      break;
    case Rounding::kTowardZero:
      break;
    case Rounding::kUp:
      plan.limit_positive = kInexact;
      break;
    case Rounding::kDown:
      plan.limit_negative = kInexact;
      break;
    case Rounding::kStochastic:
      break;  // decided per lane from the random bits instead
  }
  // IEEE 754 7.4: nearest and stochastic overflow to inf; a directed mode pointing toward zero
  // for this sign stops at the largest finite value (as encode<F>).
  const uint32_t to_inf = f.has_inf() ? f.inf_bits() : f.nan_bits();
  const bool positive_to_inf = options.mode != Rounding::kTowardZero && options.mode != Rounding::kDown;
  const bool negative_to_inf = options.mode != Rounding::kTowardZero && options.mode != Rounding::kUp;
  plan.overflow_positive = positive_to_inf && !options.saturate ? to_inf : f.max_finite_bits();
  plan.overflow_negative = negative_to_inf && !options.saturate ? to_inf : f.max_finite_bits();
  plan.inf_magnitude = options.saturate && (options.saturate_inf || !f.has_inf()) ? f.max_finite_bits()
                       : f.has_inf()                                              ? f.inf_bits()
                                                                                  : f.nan_bits();
  plan.flush_below = options.flush_subnormals ? 1u << f.mantissa_bits : 0u;
  return plan;
}

template <FloatFormat F>
inline constexpr EncodePlan kNearestEvenPlan = encode_plan(F, RoundingOptions{});

}  // namespace hg::precision::detail

#endif  // HALFGRAD_PRECISION_CONVERT_INL_SHARED_H_

// ------------------------------ Per-target part (include guard toggled per target)
#if defined(HALFGRAD_PRECISION_CONVERT_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef HALFGRAD_PRECISION_CONVERT_INL_H_
#undef HALFGRAD_PRECISION_CONVERT_INL_H_
#else
#define HALFGRAD_PRECISION_CONVERT_INL_H_
#endif

#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace hg::precision::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// F16C (vcvtps2ph with imm 8 = RNE, vcvtph2ps) is exactly encode/decode<kBinary16> with default
// options, including subnormals, inf and NaN payloads; Highway uses it for f16 Promote/DemoteTo
// on AVX2 and AVX3 only.
#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX2 && !defined(HWY_DISABLE_F16C)
inline constexpr bool kNativeF16 = true;
#else
inline constexpr bool kNativeF16 = false;
#endif

template <class D>
using MaskOf = decltype(hn::FirstN(D(), 0));

// The result of EncodeCore: F's bit pattern in the low bits of each u32 lane, and the finite
// lanes whose rounded magnitude exceeded F's largest finite value (IEEE overflow, for stats).
template <class DU>
struct Encoded {
  hn::VFromD<DU> bits;
  MaskOf<DU> overflow;
};

// |x| (f32 bit patterns in u32 lanes, sign cleared) cut to F: `truncated` is the encoding of |x|
// rounded toward zero (exponent field and mantissa), `fraction` the discarded bits (the top 32 of
// them, MSB = one half). The significand is shifted so that F's last kept bit is bit 0 (further
// right for F's subnormals), as encode<F> does.
template <class DU>
struct Truncated {
  hn::VFromD<DU> truncated, fraction;
};

template <FloatFormat F, bool kStochastic, class DU>
HWY_INLINE Truncated<DU> TruncateCore(DU du, hn::VFromD<DU> abs) {
  using VU = hn::VFromD<DU>;
  const hn::RebindToSigned<DU> di;
  constexpr int M = F.mantissa_bits;
  constexpr int kShift = 23 - M;  // f32 mantissa bits below F's last one, for F's normals
  if constexpr (F.exponent_bits == 8) {
    // f32's exponent range: every f32 value, subnormals included, keeps its scale, so the
    // encoding is f32's top bits and the discarded bits are exact for every mode.
    return {hn::ShiftRight<kShift>(abs), hn::ShiftLeft<32 - kShift>(abs)};
  } else {
    const VU one = hn::Set(du, 1);
    const VU field = hn::ShiftRight<23>(abs);    // 255 for inf/NaN: replaced at the end
    const VU field_scale = hn::Max(field, one);  // f32 subnormals: field 0, scale of field 1
    const VU significand = hn::Or(hn::And(abs, hn::Set(du, 0x7FFFFFu)), hn::ShiftLeft<23>(hn::Min(field, one)));
    // How far below F's smallest normal the value lies: extra shift that makes F's subnormals.
    const VU below = hn::BitCast(
        du, hn::Max(hn::Sub(hn::Set(di, 128 - F.exponent_bias), hn::BitCast(di, field_scale)), hn::Zero(di)));
    const VU shift = hn::Add(below, hn::Set(du, kShift));
    VU q, fraction;
    if constexpr (kStochastic) {
      // The exact top 32 bits of the fraction (encode<F>'s fraction >> 32): the random bits
      // are added to them, so shifts up to 32 + 24 matter; counts stay below 32 for SSE4/SCALAR.
      const VU shift_left = hn::Min(shift, hn::Set(du, 32));
      q = significand >> hn::Min(shift, hn::Set(du, 31));
      fraction =
          (significand << hn::Sub(hn::Set(du, 32), shift_left)) >> hn::Min(hn::Sub(shift, shift_left), hn::Set(du, 24));
    } else {
      // Directed and nearest rounding only ask "zero, below, at or above one half": beyond a
      // shift of 25 the fraction is nonzero-and-below-half iff the significand is nonzero, and
      // significand << 7 says exactly that, so one clamp serves both shifts.
      const VU clamped = hn::Min(shift, hn::Set(du, 25));
      q = significand >> clamped;
      fraction = significand << hn::Sub(hn::Set(du, 32), clamped);
    }
    // (exponent field - 1) << M + q: a carry out of the mantissa bumps the exponent, and a
    // subnormal q of 2^M becomes the smallest normal by itself (as in encode<F>).
    const VU field_minus_one = hn::Add(hn::Add(field_scale, below), hn::Set(du, uint32_t(F.exponent_bias - 128)));
    return {hn::Add(hn::ShiftLeft<M>(field_minus_one), q), fraction};
  }
}

// The rounded magnitude (F's encoding, finite inputs) -> the result: overflow to `plan`'s
// overflow value, flushing below `plan.flush_below`, inf and NaN inputs, and the sign. A NaN keeps
// the top bits of its payload and is quieted (as F16C does); e4m3 has a single NaN.
template <FloatFormat F, class DU>
HWY_INLINE Encoded<DU> FinishEncode(DU du, hn::VFromD<DU> abs, hn::VFromD<DU> sign32, MaskOf<DU> negative,
                                    hn::VFromD<DU> magnitude, const detail::EncodePlan& plan) {
  using VU = hn::VFromD<DU>;
  const hn::RebindToSigned<DU> di;
  const auto finite = hn::RebindMask(du, hn::Lt(hn::BitCast(di, abs), hn::Set(di, 0x7F800000)));
  const auto over = hn::RebindMask(du, hn::Gt(hn::BitCast(di, magnitude), hn::Set(di, int32_t(F.max_finite_bits()))));
  VU result = hn::IfThenElse(
      over, hn::IfThenElse(negative, hn::Set(du, plan.overflow_negative), hn::Set(du, plan.overflow_positive)),
      magnitude);
  result = hn::IfThenZeroElse(
      hn::RebindMask(du, hn::Lt(hn::BitCast(di, magnitude), hn::Set(di, int32_t(plan.flush_below)))), result);
  VU nan = hn::Set(du, F.nan_bits());
  if constexpr (F.has_inf()) {
    nan = hn::Or(nan, hn::ShiftRight<23 - F.mantissa_bits>(hn::And(abs, hn::Set(du, 0x7FFFFFu))));
  }
  const auto is_nan = hn::RebindMask(du, hn::Gt(hn::BitCast(di, abs), hn::Set(di, 0x7F800000)));
  result = hn::IfThenElse(finite, result, hn::IfThenElse(is_nan, nan, hn::Set(du, plan.inf_magnitude)));
  return {hn::Or(result, hn::ShiftRight<32 - F.storage_bits()>(sign32)), hn::And(over, finite)};
}

// f32 (bit patterns in u32 lanes) -> F, rounded as `plan` says; with kStochastic, lane j rounds
// away from zero iff frac32 + random[j] >= 2^32 (rounding.h). The same algorithm as encode<F>
// (TruncateCore, then the rounding decision on the discarded bits, then FinishEncode).
// Integer-only, so it is exact on every target.
template <FloatFormat F, bool kStochastic, class DU>
HWY_INLINE Encoded<DU> EncodeCore(DU du, hn::VFromD<DU> bits, hn::VFromD<DU> random, const detail::EncodePlan& plan) {
  static_assert(F.exponent_bits <= 8 && F.mantissa_bits < 23, "F must be narrower than f32");
  using VU = hn::VFromD<DU>;
  const hn::RebindToSigned<DU> di;
  const VU abs = hn::And(bits, hn::Set(du, 0x7FFFFFFFu));
  const VU sign32 = hn::Xor(bits, abs);
  const auto negative = hn::RebindMask(du, hn::Lt(hn::BitCast(di, bits), hn::Zero(di)));
  const Truncated<DU> cut = TruncateCore<F, kStochastic>(du, abs);

  MaskOf<DU> away;
  if constexpr (kStochastic) {
    away = hn::Gt(cut.fraction, hn::Not(random));  // unsigned: fraction + random >= 2^32
  } else {
    const VU limit =
        hn::Sub(hn::IfThenElse(negative, hn::Set(du, plan.limit_negative), hn::Set(du, plan.limit_positive)),
                hn::And(cut.truncated, hn::Set(du, plan.nearest_even)));
    const VU biased_fraction = hn::Xor(cut.fraction, hn::Set(du, 0x80000000u));
    away = hn::RebindMask(du, hn::Gt(hn::BitCast(di, biased_fraction), hn::BitCast(di, limit)));
  }
  const VU magnitude = hn::Sub(cut.truncated, hn::VecFromMask(du, away));  // mask lanes are -1
  return FinishEncode<F>(du, abs, sign32, negative, magnitude, plan);
}

// F's bit patterns (low bits of u32 lanes, nothing above them) -> their exact f32 values, as
// decode<F>: NaNs are quieted with sign and payload kept.
template <FloatFormat F, class DU>
HWY_INLINE hn::VFromD<hn::RebindToFloat<DU>> DecodeCore(DU du, hn::VFromD<DU> bits) {
  using VU = hn::VFromD<DU>;
  const hn::RebindToFloat<DU> df;
  const hn::RebindToSigned<DU> di;
  constexpr int kShift = 23 - F.mantissa_bits;
  const VU quiet = hn::Set(du, 0x00400000u);
  const VU magnitude = hn::And(bits, hn::Set(du, F.sign_mask() - 1));
  const VU sign32 = hn::ShiftLeft<32 - F.storage_bits()>(hn::Xor(bits, magnitude));
  if constexpr (F.exponent_bits == 8) {  // bf16: f32's top half; only NaNs need their quiet bit
    const auto is_nan = hn::RebindMask(du, hn::Gt(hn::BitCast(di, magnitude), hn::Set(di, int32_t(F.inf_bits()))));
    return hn::BitCast(df, hn::Or(hn::ShiftLeft<16>(bits), hn::IfThenElseZero(is_nan, quiet)));
  } else {
    // F's fields placed under f32's read as 2^(bias - 127) times the value, so one exact multiply
    // rescales normals and subnormals alike (an F subnormal is an f32 subnormal here).
    const auto scaled =
        hn::Mul(hn::BitCast(df, hn::ShiftLeft<kShift>(magnitude)), hn::Set(df, exp2_float(127 - F.exponent_bias)));
    VU special;  // the f32 bits of inf/NaN lanes
    MaskOf<DU> is_special;
    if constexpr (F.has_inf()) {
      is_special = hn::RebindMask(du, hn::Gt(hn::BitCast(di, magnitude), hn::Set(di, int32_t(F.inf_bits() - 1))));
      const auto is_nan = hn::RebindMask(du, hn::Gt(hn::BitCast(di, magnitude), hn::Set(di, int32_t(F.inf_bits()))));
      special =
          hn::Or(hn::Or(hn::ShiftLeft<kShift>(magnitude), hn::Set(du, 0x7F800000u)), hn::IfThenElseZero(is_nan, quiet));
    } else {  // e4m3: S.1111.111 is the NaN, the rest of the top binade is finite
      is_special = hn::Eq(magnitude, hn::Set(du, F.nan_bits()));
      special = hn::Set(du, 0x7FC00000u);
    }
    return hn::BitCast(df, hn::Or(hn::IfThenElse(is_special, special, hn::BitCast(du, scaled)), sign32));
  }
}

// u32 lanes holding values below 2^16 (2^8) -> u16 (u8) lanes of a Rebind'ed tag.
template <class DN, class VU>
HWY_INLINE hn::VFromD<DN> NarrowBits(DN dn, VU v) {
  const hn::RebindToSigned<hn::DFromV<VU>> di;
  return hn::DemoteTo(dn, hn::BitCast(di, v));  // saturating, a no-op for such values
}

// bf16 with default options in a third of EncodeCore's operations: adding 0x7FFF plus the kept
// LSB to the f32 bits rounds the top half to nearest-even, the carry running into the exponent
// (up to inf) by itself and never into the sign; only NaNs, which the addition could turn into
// anything, are patched (quieted, top payload bits kept). Equal to EncodeCore<kBFloat16> with
// kNearestEvenPlan for all 2^32 inputs ([exhaustive] tests).
template <class DU>
HWY_INLINE hn::VFromD<DU> EncodeBF16NearestEven(DU du, hn::VFromD<DU> bits) {
  const hn::RebindToSigned<DU> di;
  const auto kept_lsb = hn::And(hn::ShiftRight<16>(bits), hn::Set(du, 1));
  const auto rounded = hn::ShiftRight<16>(hn::Add(hn::Add(bits, hn::Set(du, 0x7FFFu)), kept_lsb));
  const auto abs = hn::And(bits, hn::Set(du, 0x7FFFFFFFu));
  const auto is_nan = hn::RebindMask(du, hn::Gt(hn::BitCast(di, abs), hn::Set(di, 0x7F800000)));
  return hn::IfThenElse(is_nan, hn::Or(hn::ShiftRight<16>(bits), hn::Set(du, kBFloat16.nan_bits())), rounded);
}

// Formats whose default-options encode has a shortcut: f16 through F16C, bf16 as above.
template <FloatFormat F>
inline constexpr bool kFastNearestEven = (F == kBinary16 && kNativeF16) || F == kBFloat16;

// f32 -> F's bits with round-to-nearest-even and default options, as narrow lanes
// (Rebind<uint16_t or uint8_t, DF>): F16C for f16 on AVX2/AVX3, EncodeBF16NearestEven for bf16,
// EncodeCore otherwise.
template <FloatFormat F, class DF>
HWY_INLINE auto DemoteF32To([[maybe_unused]] DF df, hn::VFromD<DF> v) {
  using TN = std::conditional_t<F.storage_bits() <= 8, uint8_t, uint16_t>;
  const hn::Rebind<TN, DF> dn;
  const hn::RebindToUnsigned<DF> du;
  if constexpr (F == kBinary16 && kNativeF16) {
    return hn::BitCast(dn, hn::DemoteTo(hn::Rebind<hwy::float16_t, DF>(), v));
  } else if constexpr (F == kBFloat16) {
    return NarrowBits(dn, EncodeBF16NearestEven(du, hn::BitCast(du, v)));
  } else {
    const auto bits = hn::BitCast(du, v);
    return NarrowBits(dn, EncodeCore<F, false>(du, bits, bits, detail::kNearestEvenPlan<F>).bits);
  }
}

// F's bits in narrow lanes (Rebind<uint16_t or uint8_t, DF>) -> the exact f32 values.
template <FloatFormat F, class DF, class VN>
HWY_INLINE hn::VFromD<DF> PromoteToF32(DF df, VN bits) {
  if constexpr (F == kBinary16 && kNativeF16) {
    return hn::PromoteTo(df, hn::BitCast(hn::Rebind<hwy::float16_t, DF>(), bits));
  } else {
    const hn::RebindToUnsigned<DF> du;
    return DecodeCore<F>(du, hn::PromoteTo(du, bits));
  }
}

// The f16/bf16 helpers by name. DF: a float tag, full or partial (Half<>, CappedTag<>);
// the bits travel in u16 lanes of hn::Rebind<uint16_t, DF>, i.e. half the vector width.
// f16 bits -> f32, exactly (decode<kBinary16>): one vcvtph2ps on AVX2/AVX3.
template <class DF>
HWY_INLINE hn::VFromD<DF> PromoteF16ToF32(DF df, hn::VFromD<hn::Rebind<uint16_t, DF>> bits) {
  return PromoteToF32<kBinary16>(df, bits);
}
// bf16 bits -> f32, exactly (decode<kBFloat16>): a shift, plus the quiet bit for NaNs.
template <class DF>
HWY_INLINE hn::VFromD<DF> PromoteBF16ToF32(DF df, hn::VFromD<hn::Rebind<uint16_t, DF>> bits) {
  return PromoteToF32<kBFloat16>(df, bits);
}
// f32 -> f16 bits, round to nearest even, overflow to inf: one vcvtps2ph on AVX2/AVX3.
template <class DF>
HWY_INLINE hn::VFromD<hn::Rebind<uint16_t, DF>> DemoteF32ToF16(DF df, hn::VFromD<DF> v) {
  return DemoteF32To<kBinary16>(df, v);
}
// f32 -> bf16 bits, round to nearest even (unlike Highway 1.0.3's truncating DemoteTo): ~10 ops.
template <class DF>
HWY_INLINE hn::VFromD<hn::Rebind<uint16_t, DF>> DemoteF32ToBF16(DF df, hn::VFromD<DF> v) {
  return DemoteF32To<kBFloat16>(df, v);
}

// Lane-wise lowbias32 (stochastic.h).
template <class V>
HWY_INLINE V Lowbias32(V x) {
  const hn::DFromV<V> du;
  x = hn::Xor(x, hn::ShiftRight<16>(x));
  x = hn::Mul(x, hn::Set(du, 0x7FEB352Du));
  x = hn::Xor(x, hn::ShiftRight<15>(x));
  x = hn::Mul(x, hn::Set(du, 0x846CA68Bu));
  return hn::Xor(x, hn::ShiftRight<16>(x));
}

// Lane j = stochastic_bits(key, first + j), the scalar definition lane by lane (a lane whose
// low index word wrapped past 2^32 carries into the high word).
template <class DU>
HWY_INLINE hn::VFromD<DU> StochasticBitsVec(DU du, StochasticKey key, uint64_t first) {
  const auto lo_first = hn::Set(du, uint32_t(first));
  const auto lo = hn::Add(hn::Iota(du, 0), lo_first);
  const auto hi = hn::Sub(hn::Set(du, uint32_t(first >> 32)), hn::VecFromMask(du, hn::Lt(lo, lo_first)));
  const auto x = Lowbias32(hn::Xor(lo, hn::Set(du, key.lo)));
  return Lowbias32(hn::Xor(hn::Xor(x, hn::Mul(hi, hn::Set(du, 0x9E3779B9u))), hn::Set(du, key.hi)));
}

// NOLINTNEXTLINE(google-readability-namespace-comments)
}  // namespace hg::precision::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#endif  // HALFGRAD_PRECISION_CONVERT_INL_H_
