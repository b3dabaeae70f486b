// Per-target building blocks of the elementwise and row kernels (elementwise.cpp, rows.cpp): the
// vector loop Transform, exp with an optional low-order argument, erf and the normal CDF and
// density (Highway 1.0.3 has no erf), the logistic sigmoid, and Highway's Log and Tanh wrapped
// to give IEEE results at the edges (0, inf, NaN). No threading or dtypes here. The measured
// accuracy of each function is stated in elementwise.h, where the kernels built on them are.
//
// Polynomial coefficients are weighted minimax fits (Lawson's iteratively reweighted least
// squares on 200-300 Chebyshev nodes, mpmath at 30 digits, weight 1/f for a relative fit) rounded
// to f32; each polynomial names the function, the interval and the fit error before rounding.

#if defined(HG_AUTOGRAD_KERNELS_ELEMENTWISE_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef HG_AUTOGRAD_KERNELS_ELEMENTWISE_INL_H_
#undef HG_AUTOGRAD_KERNELS_ELEMENTWISE_INL_H_
#else
#define HG_AUTOGRAD_KERNELS_ELEMENTWISE_INL_H_
#endif

#include <algorithm>
#include <cstddef>
#include <iterator>
#include <limits>
#include <utility>

#include "hwy/contrib/math/math-inl.h"
#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace hg::kernels::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

using DF = hn::ScalableTag<float>;
using VF = hn::Vec<DF>;

template <class F, class... P, size_t... I>
HWY_INLINE void TransformTail(DF d, float* y, size_t rest, const F& f, std::index_sequence<I...>, const P*... x) {
  HWY_ALIGN float in[sizeof...(P)][hn::MaxLanes(d)] = {};
  (std::copy_n(x, rest, in[I]), ...);
  HWY_ALIGN float out[hn::MaxLanes(d)];
  hn::Store(f(hn::Load(d, in[I])...), d, out);
  std::copy_n(out, rest, y);
}

// y[i] = f(x[i]...) for i < n, a vector at a time; y may be one of the x. The tail goes through
// zero-padded copies: Highway 1.0.3's MaskedLoad reads the whole vector on SSE4, past the end.
template <class F, class... P>
HWY_INLINE void Transform(float* y, size_t n, const F& f, const P*... x) {
  const DF d;
  const size_t lanes = hn::Lanes(d);
  size_t i = 0;
  for (; i + lanes <= n; i += lanes) hn::StoreU(f(hn::LoadU(d, x + i)...), d, y + i);
  if (i < n) TransformTail(d, y + i, n - i, f, std::index_sequence_for<P...>(), (x + i)...);
}

// Horner's scheme, highest coefficient last: c[0] + x (c[1] + x (c[2] + ...)).
template <class D, size_t kN>
HWY_INLINE hn::Vec<D> Polynomial(D d, hn::Vec<D> x, const float (&c)[kN]) {
  hn::Vec<D> p = hn::Set(d, c[kN - 1]);
  for (size_t i = kN - 1; i-- > 0;) p = hn::MulAdd(p, x, hn::Set(d, c[i]));
  return p;
}

// exp(hi + lo), lo a correction far below ulp(hi) (0 for a plain exp). Cody-Waite reduction
// hi = k ln2 + r (ln2 split so that k ln2_hi is exact for |k| <= 2^8), e^r = 1 + r + r^2 P(r) on
// |r| <= ln2/2, then 2^k applied in two exact steps so that a subnormal result is rounded once.
// Overflow gives inf, underflow 0 (the argument is clamped to [-104, 89], beyond which the
// result is 0 or inf in f32 anyway), NaN stays NaN. 1.01 ulp at worst (elementwise.h).
template <bool kWithLo, class D>
HWY_INLINE hn::Vec<D> ExpCore(D d, hn::Vec<D> hi, hn::Vec<D> lo) {
  const hn::RebindToSigned<D> di;
  // (e^r - 1 - r) / r^2 on [-0.3476, 0.3476]: 0.052 ulp relative to e^r.
  static constexpr float kP[] = {0.4999999403953552f, 0.1666651964187622f, 0.04166840761899948f, 0.008368914015591145f,
                                 0.001381418784148991f};
  const auto x = hn::Min(hn::Max(hi, hn::Set(d, -104.0f)), hn::Set(d, 89.0f));
  const auto k = hn::Round(hn::Mul(x, hn::Set(d, 1.44269502163f)));  // round(x / ln2)
  auto r = hn::NegMulAdd(k, hn::Set(d, 0.693145751953125f), x);      // ln2_hi: exact
  r = hn::NegMulAdd(k, hn::Set(d, 1.42860677e-6f), r);               // ln2_lo
  if constexpr (kWithLo) r = hn::Add(r, lo);
  const auto y = hn::Add(hn::Set(d, 1.0f), hn::MulAdd(hn::Mul(r, r), Polynomial(d, r, kP), r));
  const auto ki = hn::ConvertTo(di, k);                         // in [-150, 128]
  const auto k1 = hn::ShiftRight<1>(ki), k2 = hn::Sub(ki, k1);  // each in [-75, 64]
  const auto bias = hn::Set(di, 127);
  const auto scale1 = hn::BitCast(d, hn::ShiftLeft<23>(hn::Add(k1, bias)));
  const auto scale2 = hn::BitCast(d, hn::ShiftLeft<23>(hn::Add(k2, bias)));
  return hn::IfThenElse(hn::IsNaN(hi), hi, hn::Mul(hn::Mul(y, scale1), scale2));
}

template <class D>
HWY_INLINE hn::Vec<D> ExpF(D d, hn::Vec<D> x) {
  return ExpCore<false>(d, x, hn::Zero(d));
}

// log(x): Highway's Log, with log(+-0) = -inf, log(+inf) = +inf, log(x < 0) = NaN, NaN kept.
template <class D>
HWY_INLINE hn::Vec<D> LogF(D d, hn::Vec<D> x) {
  const auto inf = hn::Set(d, std::numeric_limits<float>::infinity());
  auto y = hn::Log(d, x);
  y = hn::IfThenElse(hn::Eq(x, hn::Zero(d)), hn::Neg(inf), y);
  y = hn::IfThenElse(hn::Eq(x, inf), inf, y);
  y = hn::IfThenElse(hn::Lt(x, hn::Zero(d)), hn::Set(d, std::numeric_limits<float>::quiet_NaN()), y);
  return hn::IfThenElse(hn::IsNaN(x), x, y);
}

// tanh(x): Highway's Tanh (via expm1; +-1 beyond |x| = 18.7, -0 kept), NaN kept.
template <class D>
HWY_INLINE hn::Vec<D> TanhF(D d, hn::Vec<D> x) {
  return hn::IfThenElse(hn::IsNaN(x), x, hn::Tanh(d, x));
}

// e^(-k s^2), k = 1 or 1/2 (kHalf), with s^2 taken exactly: s = z + (s - z), z holding 12
// significant bits, so z^2 is exact and s^2 - z^2 = (s - z)(s + z) is small and goes into exp's
// low-order argument. (Rounding s^2 to one f32 would cost up to s^2 2^-24 relative: 80 ulp at
// s = 9.) |s| is clamped to 15, beyond which the result is 0.
template <bool kHalf, class D>
HWY_INLINE hn::Vec<D> ExpMinusSquare(D d, hn::Vec<D> s) {
  const hn::RebindToUnsigned<D> du;
  s = hn::Min(hn::Abs(s), hn::Set(d, 15.0f));
  const auto z = hn::BitCast(d, hn::And(hn::BitCast(du, s), hn::Set(du, 0xFFFFF000u)));
  auto z2 = hn::Mul(z, z);                            // exact
  auto rest = hn::Mul(hn::Sub(s, z), hn::Add(s, z));  // s^2 - z^2, |rest| < 2^-10 s^2
  if constexpr (kHalf) {
    z2 = hn::Mul(z2, hn::Set(d, 0.5f));
    rest = hn::Mul(rest, hn::Set(d, 0.5f));
  }
  return ExpCore<true>(d, hn::Neg(z2), hn::Neg(rest));
}

// ---------------------------------------------------------------------------------------------
// erf and the normal CDF. Two pieces, split at |u| = kErfSplit:
//   |u| <  kErfSplit: erf(u) = u + u P(u^2), no cancellation;
//   |u| >= kErfSplit: erfc(t) / 2 = e^(-t^2) G(t), t = |u|, G(t) = erfc(t) e^(t^2) / 2 smooth
//                     (about 1 / (2 sqrt(pi) t)); then erf(u) = sign(u) (1 - 2 e^(-t^2) G(t)),
//                     and Phi(x) = e^(-x^2/2) G(t) for x < 0, t = |x| / sqrt 2.
// Computing the tail as a product (never as 1 - erf) keeps the normal CDF's left tail accurate
// to a few ulp down to the subnormals, where 1 + erf(u) would lose every digit; and the normal
// density phi(x) = e^(-x^2/2) / sqrt(2 pi) shares the exponential.
inline constexpr float kErfSplit = 0.921875f;
inline constexpr float kErfTailEnd = 10.0625f;  // erfc(t) / 2 < 2^-150 beyond: rounds to 0

// u + u P(u^2) = erf(u) for |u| < kErfSplit. P(s) = erf(sqrt s) / sqrt s - 1 on [0, 0.85],
// relative to erf: 0.26 ulp.
template <class D>
HWY_INLINE hn::Vec<D> ErfSmall(D d, hn::Vec<D> u) {
  static constexpr float kP[] = {0.12837915122509003f,   -0.37612494826316833f, 0.1128181591629982f,
                                 -0.026766614988446236f, 0.004993179347366095f, -0.000599085062276572f};
  return hn::MulAdd(Polynomial(d, hn::Mul(u, u), kP), u, u);
}

// G(t) = erfc(t) e^(t^2) / 2 for t in [kErfSplit, kErfTailEnd] (t is clamped to the end): on
// [0.921875, 2.5) a polynomial in v = t - 1.75, on [2.5, 10.0625] w H(w) with w = 1/t and H a
// polynomial in w - 0.25 (G is about w / (2 sqrt pi), so H is nearly constant and neither piece
// cancels). Degree 9 on each: 0.13 and 0.0002 ulp relative. t = s for erf and s / sqrt 2 for the
// normal CDF (kNormal), s = |x| >= 0; v and w are formed from s directly (for erf, t - 1.75 is
// exact), so t itself is never rounded.
template <bool kNormal, class D>
HWY_INLINE hn::Vec<D> ScaledHalfErfc(D d, hn::Vec<D> s) {
  static constexpr float kNear[] = {0.14248612523078918f,   -0.06548817455768585f,    0.02788173221051693f,
                                    -0.0111298318952322f,   0.0042032175697386265f,   -0.0015117924194782972f,
                                    0.0005149182979948819f, -0.00016787269851192832f, 6.316715007415041e-05f,
                                    -2.142171433661133e-05f};
  static constexpr float kFar[] = {0.2739989161491394f,  -0.059723466634750366f, -0.08389309048652649f,
                                   0.10975659638643265f, -0.014045844785869122f, -0.13640321791172028f,
                                   0.20591914653778076f, -0.04700992628931999f,  -0.37540334463119507f,
                                   0.6636476516723633f};
  constexpr size_t kN = std::size(kNear);
  static_assert(std::size(kFar) == kN);
  // t / s and s / t; for the normal CDF t / s = 1/sqrt 2 is carried as a sum of two floats and
  // s / t = sqrt 2 corrected by its relative rounding error (either alone, rounded to f32, would
  // move t by 1.7e-8 relative: 0.3 ulp of G).
  constexpr float kScale = kNormal ? 0.7071067690849304f : 1.0f, kScaleLo = 1.2101617485882343e-08f;
  constexpr float kInvScale = kNormal ? 1.4142135381698608f : 1.0f, kInvScaleError = 1.7114e-08f;
  s = hn::Min(s, hn::Set(d, kErfTailEnd * kInvScale));
  const auto near = hn::Lt(s, hn::Set(d, 2.5f * kInvScale));
  auto v_near = hn::MulAdd(s, hn::Set(d, kScale), hn::Set(d, -1.75f));  // t - 1.75
  auto w = hn::Div(hn::Set(d, kInvScale), s);                           // 1 / t
  if constexpr (kNormal) {
    v_near = hn::MulAdd(s, hn::Set(d, kScaleLo), v_near);
    w = hn::MulAdd(w, hn::Set(d, kInvScaleError), w);
  }
  const auto v = hn::IfThenElse(near, v_near, hn::Sub(w, hn::Set(d, 0.25f)));
  auto p = hn::IfThenElse(near, hn::Set(d, kNear[kN - 1]), hn::Set(d, kFar[kN - 1]));
  for (size_t k = kN - 1; k-- > 0;)
    p = hn::MulAdd(p, v, hn::IfThenElse(near, hn::Set(d, kNear[k]), hn::Set(d, kFar[k])));
  return hn::IfThenElse(near, p, hn::Mul(w, p));
}

// erf(x), odd, +-1 beyond |x| = 3.92, NaN kept.
template <class D>
HWY_INLINE hn::Vec<D> ErfF(D d, hn::Vec<D> x) {
  const auto t = hn::Abs(x);
  const auto half_erfc = hn::Mul(ExpMinusSquare<false>(d, t), ScaledHalfErfc<false>(d, t));
  const auto tail = hn::NegMulAdd(hn::Set(d, 2.0f), half_erfc, hn::Set(d, 1.0f));  // exact 2x
  const auto y = hn::IfThenElse(hn::Lt(t, hn::Set(d, kErfSplit)), ErfSmall(d, x), hn::CopySignToAbs(tail, x));
  return hn::IfThenElse(hn::IsNaN(x), x, y);
}

// Phi(x) = (1 + erf(x / sqrt 2)) / 2, the standard normal CDF, and (kDensity) the density
// phi(x) = e^(-x^2/2) / sqrt(2 pi) into *density; NaN kept. Both the exponential and G are
// computed from x itself; u = x / sqrt 2 is rounded only to pick the piece.
template <bool kDensity, class D>
HWY_INLINE hn::Vec<D> NormalCdfF(D d, hn::Vec<D> x, hn::Vec<D>* density = nullptr) {
  const auto half = hn::Set(d, 0.5f);
  const auto u = hn::Mul(x, hn::Set(d, 0.7071067811865476f));
  const auto t = hn::Abs(u);
  const auto small = hn::MulAdd(half, ErfSmall(d, u), half);              // 0.5 erf exact: fused or not
  const auto gauss = ExpMinusSquare<true>(d, x);                          // e^(-x^2/2)
  const auto tail = hn::Mul(gauss, ScaledHalfErfc<true>(d, hn::Abs(x)));  // Phi(-|x|)
  const auto large = hn::IfThenElse(hn::Lt(x, hn::Zero(d)), tail, hn::Sub(hn::Set(d, 1.0f), tail));
  const auto y = hn::IfThenElse(hn::Lt(t, hn::Set(d, kErfSplit)), small, large);
  if constexpr (kDensity) *density = hn::Mul(hn::Set(d, 0.3989422804014327f), gauss);
  return hn::IfThenElse(hn::IsNaN(x), x, y);
}

// sigmoid(v) = 1 / (1 + e^-v) from e = e^-|v| <= 1, so neither side cancels or overflows.
// Returns sigmoid(v) and, in *complement, sigmoid(-v) = 1 - sigmoid(v).
template <class D>
HWY_INLINE hn::Vec<D> SigmoidF(D d, hn::Vec<D> v, hn::Vec<D>* complement) {
  const auto one = hn::Set(d, 1.0f);
  const auto e = ExpF(d, hn::Neg(hn::Abs(v)));
  const auto inv = hn::Div(one, hn::Add(one, e));
  const auto small = hn::Mul(e, inv);  // sigmoid(-|v|)
  const auto negative = hn::Lt(v, hn::Zero(d));
  *complement = hn::IfThenElse(negative, inv, small);
  return hn::IfThenElse(negative, small, inv);
}

}  // namespace hg::kernels::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#endif  // HG_AUTOGRAD_KERNELS_ELEMENTWISE_INL_H_
