// Per-target building blocks of the elementwise and row kernels (elementwise.cpp, rows.cpp): the
// vector loop Transform, exp with an optional low-order argument, erf and the normal CDF
// (Highway 1.0.3 has no erf), the logistic sigmoid, and Highway's Log and Tanh wrapped to give
// IEEE results at the edges (0, inf, NaN). No threading or dtypes here. The measured accuracy of
// each function is stated in elementwise.h, where the kernels built on them are declared.
//
// Polynomial coefficients are minimax fits (Lawson's algorithm on 400-800 Chebyshev
// nodes, mpmath at 30 digits) rounded to f32; the fitted functions and intervals are named at
// each polynomial, with the fit error before rounding.

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
HWY_INLINE void TransformTail(DF d, float* y, size_t rest, const F& f, std::index_sequence<I...>,
                              const P*... x) {
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
// result is 0 or inf in f32 anyway), NaN stays NaN. <= 1 ulp (measured, elementwise.h).
template <bool kWithLo, class D>
HWY_INLINE hn::Vec<D> ExpCore(D d, hn::Vec<D> hi, hn::Vec<D> lo) {
  const hn::RebindToSigned<D> di;
  // (e^r - 1 - r) / r^2 on [-0.3476, 0.3476]: 0.052 ulp relative to e^r.
  static constexpr float kP[] = {0.4999999403953552f, 0.1666651964187622f, 0.04166840761899948f,
                                 0.008368914015591145f, 0.001381418784148991f};
  const auto x = hn::Min(hn::Max(hi, hn::Set(d, -104.0f)), hn::Set(d, 89.0f));
  const auto k = hn::Round(hn::Mul(x, hn::Set(d, 1.44269502163f)));        // round(x / ln2)
  auto r = hn::NegMulAdd(k, hn::Set(d, 0.693145751953125f), x);            // ln2_hi: exact
  r = hn::NegMulAdd(k, hn::Set(d, 1.42860677e-6f), r);                     // ln2_lo
  if constexpr (kWithLo) r = hn::Add(r, lo);
  const auto y = hn::Add(hn::Set(d, 1.0f), hn::MulAdd(hn::Mul(r, r), Polynomial(d, r, kP), r));
  const auto ki = hn::ConvertTo(di, k);                                    // in [-150, 128]
  const auto k1 = hn::ShiftRight<1>(ki), k2 = hn::Sub(ki, k1);             // each in [-75, 64]
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

// e^(c + q - k s^2), k = 1 or 1/2 (kHalf), for an exact c (a constant), a small q and s^2
// taken exactly: s = z + (s - z) with z holding 12 significant bits, so z^2 is exact and
// s^2 - z^2 = (s - z)(s + z) is small. The exponent is carried as an f32 pair through two
// TwoSums into exp's low-order argument, so that its only roundings are q's and the small
// terms'. (Rounding the exponent to one f32 would cost up to |exponent| 2^-24 relative: 50 ulp
// at s = 10.) |s| is clamped to 15, beyond which every result here is 0.
template <bool kHalf, class D>
HWY_INLINE hn::Vec<D> ExpOfSum(D d, hn::Vec<D> c, hn::Vec<D> q, hn::Vec<D> s) {
  const hn::RebindToUnsigned<D> du;
  // hi + lo = a + b exactly (Knuth's TwoSum, 6 operations, no condition on the magnitudes).
  const auto two_sum = [](hn::Vec<D> a, hn::Vec<D> b, hn::Vec<D>* lo) {
    const auto hi = hn::Add(a, b);
    const auto bb = hn::Sub(hi, a);
    *lo = hn::Add(hn::Sub(a, hn::Sub(hi, bb)), hn::Sub(b, bb));
    return hi;
  };
  s = hn::Min(hn::Abs(s), hn::Set(d, 15.0f));
  const auto z = hn::BitCast(d, hn::And(hn::BitCast(du, s), hn::Set(du, 0xFFFFF000u)));
  auto z2 = hn::Mul(z, z);                           // exact
  auto rest = hn::Mul(hn::Sub(s, z), hn::Add(s, z));  // s^2 - z^2, |rest| < 2^-10 s^2
  if constexpr (kHalf) {
    z2 = hn::Mul(z2, hn::Set(d, 0.5f));
    rest = hn::Mul(rest, hn::Set(d, 0.5f));
  }
  hn::Vec<D> e1, e2;
  const auto s1 = two_sum(c, hn::Neg(z2), &e1);
  const auto s2 = two_sum(s1, q, &e2);
  return ExpCore<true>(d, s2, hn::Sub(hn::Add(e1, e2), rest));
}

// ---------------------------------------------------------------------------------------------
// erf and the normal CDF. Two pieces, split at |u| = kErfSplit:
//   |u| <  kErfSplit: erf(u) = u + u P(u^2), no cancellation;
//   |u| >= kErfSplit: erfc(t) / 2 = exp(R(t) - t^2), t = |u|, R a polynomial in t; then
//                     erf(u) = sign(u) (1 - 2 exp(...)), and Phi(x) = exp(...) for x < 0.
// Computing the tail as an exponential (never as 1 - erf) keeps the normal CDF's left tail
// accurate to a few ulp down to the subnormals, where 1 + erf(u) would lose every digit.
inline constexpr float kErfSplit = 0.921875f;
inline constexpr float kErfTailEnd = 10.0625f;  // erfc(t) / 2 < 2^-150 beyond: rounds to 0

// u + u P(u^2) = erf(u) for |u| < kErfSplit. P(s) = erf(sqrt s) / sqrt s - 1 on [0, 0.85],
// relative to erf: 0.26 ulp.
template <class D>
HWY_INLINE hn::Vec<D> ErfSmall(D d, hn::Vec<D> u) {
  static constexpr float kP[] = {0.12837915122509003f, -0.37612494826316833f,
                                 0.1128181591629982f,  -0.026766614988446236f,
                                 0.004993179347366095f, -0.000599085062276572f};
  return hn::MulAdd(Polynomial(d, hn::Mul(u, u), kP), u, u);
}

// R(t) = log(erfc(t) / 2) + t^2 for t in [kErfSplit, kErfTailEnd] (t is clamped to the end),
// as c + q: c exact, q = v P(v) with v = t - 1.875 on [0.921875, 4) and v = t - 7 on
// [4, 10.0625] (exact subtractions on these ranges). Degree 9 on each piece: 8.2e-9 and 2.2e-8
// absolute, i.e. 0.14 and 0.36 ulp relative to erfc. One polynomial over the whole range would
// need degree 13 and lose ~4 ulp to the rounding of its own evaluation.
template <class D>
HWY_INLINE hn::Vec<D> ErfcTailLog(D d, hn::Vec<D> t, hn::Vec<D>* c) {
  static constexpr float kNear[] = {
      -2.004593849182129f,     -0.43802371621131897f,   0.08277294039726257f,
      -0.01837042346596718f,   0.0040625352412462234f,  -0.000841231201775372f,
      0.00015313886979129165f, -2.1571395336650312e-05f, 1.7581900237928494e-06f,
      -2.732473269873026e-08f};
  static constexpr float kFar[] = {
      -3.2213783264160156f,    -0.14008019864559174f,  0.00962735153734684f,
      -0.0008661155588924885f, 8.618775609647855e-05f, -8.98022608453175e-06f,
      9.258034197046072e-07f,  -9.897170372141773e-08f, 1.4496811751030236e-08f,
      -1.5734840097536562e-09f};
  constexpr size_t kN = std::size(kNear);
  static_assert(std::size(kFar) == kN);
  t = hn::Min(t, hn::Set(d, kErfTailEnd));
  const auto near = hn::Lt(t, hn::Set(d, 4.0f));
  const auto coefficient = [&](size_t k) { return hn::IfThenElse(near, hn::Set(d, kNear[k]), hn::Set(d, kFar[k])); };
  const auto v = hn::Sub(t, hn::IfThenElse(near, hn::Set(d, 1.875f), hn::Set(d, 7.0f)));
  auto p = coefficient(kN - 1);
  for (size_t k = kN - 1; k-- > 1;) p = hn::MulAdd(p, v, coefficient(k));
  *c = coefficient(0);
  return hn::Mul(v, p);
}

// erf(x), odd, +-1 beyond |x| = 3.92, NaN kept.
template <class D>
HWY_INLINE hn::Vec<D> ErfF(D d, hn::Vec<D> x) {
  const auto t = hn::Abs(x);
  hn::Vec<D> c;
  const auto q = ErfcTailLog(d, t, &c);
  const auto half_erfc = ExpOfSum<false>(d, c, q, t);
  const auto tail = hn::NegMulAdd(hn::Set(d, 2.0f), half_erfc, hn::Set(d, 1.0f));  // exact 2x
  const auto y = hn::IfThenElse(hn::Lt(t, hn::Set(d, kErfSplit)), ErfSmall(d, x),
                                hn::CopySignToAbs(tail, x));
  return hn::IfThenElse(hn::IsNaN(x), x, y);
}

// Phi(x) = (1 + erf(x / sqrt 2)) / 2, the standard normal CDF; NaN kept. The tail's square is
// x^2 / 2 taken from x itself, so the rounding of u = x / sqrt 2 only enters through R.
template <class D>
HWY_INLINE hn::Vec<D> NormalCdfF(D d, hn::Vec<D> x) {
  const auto half = hn::Set(d, 0.5f);
  const auto u = hn::Mul(x, hn::Set(d, 0.7071067811865476f));
  const auto t = hn::Abs(u);
  const auto small = hn::MulAdd(half, ErfSmall(d, u), half);  // 0.5 erf exact: fused or not
  hn::Vec<D> c;
  const auto q = ErfcTailLog(d, t, &c);
  const auto tail = ExpOfSum<true>(d, c, q, x);  // Phi(-|x|)
  const auto large = hn::IfThenElse(hn::Lt(x, hn::Zero(d)), tail, hn::Sub(hn::Set(d, 1.0f), tail));
  const auto y = hn::IfThenElse(hn::Lt(t, hn::Set(d, kErfSplit)), small, large);
  return hn::IfThenElse(hn::IsNaN(x), x, y);
}

// phi(x) = e^(-x^2 / 2) / sqrt(2 pi), the standard normal density, x^2 exact.
template <class D>
HWY_INLINE hn::Vec<D> NormalPdfF(D d, hn::Vec<D> x) {
  return hn::Mul(hn::Set(d, 0.3989422804014327f), ExpOfSum<true>(d, hn::Zero(d), hn::Zero(d), x));
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
