// elementwise.cpp: the kernels of elementwise.h, one per-target body each around the shared loop
// Transform (elementwise-inl.h, with the transcendental functions), then the dispatch wrappers.
// Not here: threads (the ops layer splits tensors into chunks) and dtypes.
//
// GCC and clang contract a * b + c into an FMA on the AVX2/AVX-512 targets by default, which
// would make these kernels differ from their scalar twins and between targets. This file is
// compiled with -ffp-contract=off (CMakeLists.txt): every Mul and Add rounds as written, and only
// the explicit MulAdd of the polynomials is fused (where the target has FMA).

#include "halfgrad/autograd/kernels/elementwise.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <utility>

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "halfgrad/autograd/kernels/elementwise.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"
#include "halfgrad/autograd/kernels/elementwise-inl.h"

HWY_BEFORE_NAMESPACE();
namespace hg::kernels::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

void AddImpl(float* y, const float* a, const float* b, size_t n) {
  Transform(
      y, n, [](VF p, VF q) { return hn::Add(p, q); }, a, b);
}
void SubImpl(float* y, const float* a, const float* b, size_t n) {
  Transform(
      y, n, [](VF p, VF q) { return hn::Sub(p, q); }, a, b);
}
void MulImpl(float* y, const float* a, const float* b, size_t n) {
  Transform(
      y, n, [](VF p, VF q) { return hn::Mul(p, q); }, a, b);
}
void DivImpl(float* y, const float* a, const float* b, size_t n) {
  Transform(
      y, n, [](VF p, VF q) { return hn::Div(p, q); }, a, b);
}
void AddScalarImpl(float* y, const float* x, float s, size_t n) {
  const VF vs = hn::Set(DF(), s);
  Transform(
      y, n, [vs](VF v) { return hn::Add(v, vs); }, x);
}
void MulScalarImpl(float* y, const float* x, float s, size_t n) {
  const VF vs = hn::Set(DF(), s);
  Transform(
      y, n, [vs](VF v) { return hn::Mul(v, vs); }, x);
}
void NegImpl(float* y, const float* x, size_t n) {
  Transform(
      y, n, [](VF v) { return hn::Neg(v); }, x);
}
void MaskedFillImpl(float* y, const float* x, const float* mask, float value, size_t n) {
  const VF vs = hn::Set(DF(), value);
  // Not(m == 0) rather than m != 0: Highway's Ne is an ordered comparison on x86 (false for NaN).
  Transform(
      y, n, [vs](VF v, VF m) { return hn::IfThenElse(hn::Not(hn::Eq(m, hn::Zero(DF()))), vs, v); }, x, mask);
}

void ExpImpl(float* y, const float* x, size_t n) {
  Transform(
      y, n, [](VF v) { return ExpF(DF(), v); }, x);
}
void LogImpl(float* y, const float* x, size_t n) {
  Transform(
      y, n, [](VF v) { return LogF(DF(), v); }, x);
}
void SqrtImpl(float* y, const float* x, size_t n) {
  Transform(
      y, n, [](VF v) { return hn::Sqrt(v); }, x);
}
void SqrtBackwardImpl(float* dx, const float* dy, const float* y, size_t n) {
  const VF half = hn::Set(DF(), 0.5f);
  Transform(
      dx, n, [half](VF g, VF r) { return hn::Mul(g, hn::Div(half, r)); }, dy, y);
}
void TanhImpl(float* y, const float* x, size_t n) {
  Transform(
      y, n, [](VF v) { return TanhF(DF(), v); }, x);
}
void TanhBackwardImpl(float* dx, const float* dy, const float* y, size_t n) {
  const VF one = hn::Set(DF(), 1.0f);
  Transform(
      dx, n, [one](VF g, VF t) { return hn::Mul(g, hn::Mul(hn::Sub(one, t), hn::Add(one, t))); }, dy, y);
}
void ReluImpl(float* y, const float* x, size_t n) {
  // x <= 0 is false for NaN, which is kept.
  Transform(
      y, n, [](VF v) { return hn::IfThenZeroElse(hn::Le(v, hn::Zero(DF())), v); }, x);
}
void ReluBackwardImpl(float* dx, const float* dy, const float* x, size_t n) {
  Transform(
      dx, n, [](VF g, VF v) { return hn::IfThenZeroElse(hn::Le(v, hn::Zero(DF())), g); }, dy, x);
}

void ErfImpl(float* y, const float* x, size_t n) {
  Transform(
      y, n, [](VF v) { return ErfF(DF(), v); }, x);
}
void GeluImpl(float* y, const float* x, size_t n) {
  Transform(
      y, n, [](VF v) { return hn::Mul(v, NormalCdfF<false>(DF(), v)); }, x);
}
// Phi(x) + x phi(x), phi(x) = e^(-x^2/2) / sqrt(2 pi).
void GeluBackwardImpl(float* dx, const float* dy, const float* x, size_t n) {
  const DF d;
  Transform(
      dx, n,
      [d](VF g, VF v) {
        VF density;
        const VF cdf = NormalCdfF<true>(d, v, &density);
        return hn::Mul(g, hn::Add(cdf, hn::Mul(v, density)));
      },
      dy, x);
}

// u = sqrt(2/pi) (x + 0.044715 x^3), in the twin's order.
HWY_INLINE VF GeluTanhArgument(DF d, VF x) {
  const VF cube = hn::Mul(hn::Mul(hn::Mul(hn::Set(d, 0.044715f), x), x), x);
  return hn::Mul(hn::Set(d, 0.7978845608028654f), hn::Add(x, cube));
}
void GeluTanhImpl(float* y, const float* x, size_t n) {
  const DF d;
  Transform(
      y, n,
      [d](VF v) {
        VF complement;
        const VF u = GeluTanhArgument(d, v);
        return hn::Mul(v, SigmoidF(d, hn::Add(u, u), &complement));
      },
      x);
}
// d/dx x s(2u) = s + x 2 s (1 - s) u', u' = sqrt(2/pi) (1 + 3 0.044715 x^2).
void GeluTanhBackwardImpl(float* dx, const float* dy, const float* x, size_t n) {
  const DF d;
  Transform(
      dx, n,
      [d](VF g, VF v) {
        VF complement;
        const VF u = GeluTanhArgument(d, v);
        const VF s = SigmoidF(d, hn::Add(u, u), &complement);
        const VF du = hn::Mul(hn::Set(d, 0.7978845608028654f),
                              hn::Add(hn::Set(d, 1.0f), hn::Mul(hn::Mul(hn::Set(d, 3.0f * 0.044715f), v), v)));
        const VF slope = hn::Mul(hn::Mul(hn::Mul(hn::Add(v, v), s), complement), du);
        return hn::Mul(g, hn::Add(s, slope));
      },
      dy, x);
}

// x^p = e^(p log|x|) in f64 (error ~1e-15 relative before the one rounding to f32), then the
// sign and NaN rules. p is finite and nonzero here (the wrapper handles the other cases).
template <class DF64>
HWY_INLINE hn::Vec<hn::Rebind<float, DF64>> PowCore(DF64 dd, hn::Vec<hn::Rebind<float, DF64>> x, float p,
                                                    bool p_integer, bool p_odd) {
  const hn::Rebind<float, DF64> df;
  const auto inf = std::numeric_limits<double>::infinity();
  const auto ax = hn::PromoteTo(dd, hn::Abs(x));
  auto lx = hn::Log(dd, ax);
  lx = hn::IfThenElse(hn::Eq(ax, hn::Zero(dd)), hn::Set(dd, -inf), lx);
  lx = hn::IfThenElse(hn::Eq(ax, hn::Set(dd, inf)), hn::Set(dd, inf), lx);
  // Beyond [-1000, 700] the f32 result is 0 or inf anyway; Highway's Exp is valid there.
  const auto t = hn::Min(hn::Max(hn::Mul(hn::Set(dd, double(p)), lx), hn::Set(dd, -1000.0)), hn::Set(dd, 700.0));
  const auto power = hn::Exp(dd, t);
  auto y = hn::DemoteTo(df, power);
  // SCALAR's DemoteTo saturates at FLT_MAX where rounding gives inf: patch those lanes.
  const auto overflow = hn::IfThenElseZero(hn::Ge(power, hn::Set(dd, 0x1p128 * (1 - 0x1p-25))), hn::Set(dd, 1.0));
  y = hn::IfThenElse(hn::Eq(hn::DemoteTo(df, overflow), hn::Set(df, 1.0f)), hn::Set(df, float(inf)), y);
  if (p_odd) y = hn::CopySignToAbs(y, x);  // (-x)^p = -(x^p), also for -0 and -inf
  if (!p_integer) {
    const auto negative_finite = hn::And(hn::Lt(x, hn::Zero(df)), hn::IsFinite(x));
    y = hn::IfThenElse(negative_finite, hn::Set(df, std::numeric_limits<float>::quiet_NaN()), y);
  }
  return hn::IfThenElse(hn::IsNaN(x), x, y);
}

// y[i] = f(PowCore(x[i]), i) over f64-width vectors (half an f32 vector each).
template <class F>
HWY_INLINE void PowLoop(float* y, const float* x, size_t n, float p, const F& finish) {
  const hn::ScalableTag<double> dd;
  const hn::Rebind<float, decltype(dd)> df;
  const bool p_integer = std::nearbyint(p) == p;
  const bool p_odd = p_integer && std::fabs(std::fmod(p, 2.0f)) == 1.0f;
  const size_t lanes = hn::Lanes(dd);
  size_t i = 0;
  for (; i + lanes <= n; i += lanes) {
    hn::StoreU(finish(PowCore(dd, hn::LoadU(df, x + i), p, p_integer, p_odd), i), df, y + i);
  }
  if (i == n) return;
  HWY_ALIGN float in[hn::MaxLanes(dd)] = {};
  HWY_ALIGN float out[hn::MaxLanes(dd)];
  std::copy_n(x + i, n - i, in);
  hn::Store(finish(PowCore(dd, hn::Load(df, in), p, p_integer, p_odd), i), df, out);
  std::copy_n(out, n - i, y + i);
}

void PowScalarImpl(float* y, const float* x, float p, size_t n) {
  PowLoop(y, x, n, p, [](auto v, size_t) { return v; });
}

void PowScalarBackwardImpl(float* dx, const float* dy, const float* x, float p, size_t n) {
  const hn::Rebind<float, hn::ScalableTag<double>> df;
  const auto vp = hn::Set(df, p);
  const size_t lanes = hn::Lanes(df);
  PowLoop(dx, x, n, p - 1.0f, [&](auto v, size_t i) {
    HWY_ALIGN float g[hn::MaxLanes(df)] = {};
    std::copy_n(dy + i, std::min(lanes, n - i), g);
    return hn::Mul(hn::Load(df, g), hn::Mul(vp, v));
  });
}

void DivBackwardDivisorImpl(float* db, const float* dy, const float* a, const float* b, size_t n) {
  Transform(
      db, n, [](VF g, VF p, VF q) { return hn::Div(hn::Mul(hn::Neg(g), p), hn::Mul(q, q)); }, dy, a, b);
}

}  // namespace hg::kernels::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace hg::kernels {

HWY_EXPORT(AddImpl);
HWY_EXPORT(SubImpl);
HWY_EXPORT(MulImpl);
HWY_EXPORT(DivImpl);
HWY_EXPORT(AddScalarImpl);
HWY_EXPORT(MulScalarImpl);
HWY_EXPORT(NegImpl);
HWY_EXPORT(MaskedFillImpl);
HWY_EXPORT(ExpImpl);
HWY_EXPORT(LogImpl);
HWY_EXPORT(SqrtImpl);
HWY_EXPORT(SqrtBackwardImpl);
HWY_EXPORT(TanhImpl);
HWY_EXPORT(TanhBackwardImpl);
HWY_EXPORT(ReluImpl);
HWY_EXPORT(ReluBackwardImpl);
HWY_EXPORT(ErfImpl);
HWY_EXPORT(GeluImpl);
HWY_EXPORT(GeluBackwardImpl);
HWY_EXPORT(GeluTanhImpl);
HWY_EXPORT(GeluTanhBackwardImpl);
HWY_EXPORT(PowScalarImpl);
HWY_EXPORT(PowScalarBackwardImpl);
HWY_EXPORT(DivBackwardDivisorImpl);

namespace {
size_t count(int64_t n) { return n > 0 ? size_t(n) : 0; }
}  // namespace

void add(float* y, const float* a, const float* b, int64_t n) { HWY_DYNAMIC_DISPATCH(AddImpl)(y, a, b, count(n)); }
void sub(float* y, const float* a, const float* b, int64_t n) { HWY_DYNAMIC_DISPATCH(SubImpl)(y, a, b, count(n)); }
void mul(float* y, const float* a, const float* b, int64_t n) { HWY_DYNAMIC_DISPATCH(MulImpl)(y, a, b, count(n)); }
void div(float* y, const float* a, const float* b, int64_t n) { HWY_DYNAMIC_DISPATCH(DivImpl)(y, a, b, count(n)); }
void add_scalar(float* y, const float* x, float s, int64_t n) {
  HWY_DYNAMIC_DISPATCH(AddScalarImpl)(y, x, s, count(n));
}
void mul_scalar(float* y, const float* x, float s, int64_t n) {
  HWY_DYNAMIC_DISPATCH(MulScalarImpl)(y, x, s, count(n));
}
void neg(float* y, const float* x, int64_t n) { HWY_DYNAMIC_DISPATCH(NegImpl)(y, x, count(n)); }
void masked_fill(float* y, const float* x, const float* mask, float value, int64_t n) {
  HWY_DYNAMIC_DISPATCH(MaskedFillImpl)(y, x, mask, value, count(n));
}
void exp(float* y, const float* x, int64_t n) { HWY_DYNAMIC_DISPATCH(ExpImpl)(y, x, count(n)); }
void log(float* y, const float* x, int64_t n) { HWY_DYNAMIC_DISPATCH(LogImpl)(y, x, count(n)); }
void sqrt(float* y, const float* x, int64_t n) { HWY_DYNAMIC_DISPATCH(SqrtImpl)(y, x, count(n)); }
void sqrt_backward(float* dx, const float* dy, const float* y, int64_t n) {
  HWY_DYNAMIC_DISPATCH(SqrtBackwardImpl)(dx, dy, y, count(n));
}
void tanh(float* y, const float* x, int64_t n) { HWY_DYNAMIC_DISPATCH(TanhImpl)(y, x, count(n)); }
void tanh_backward(float* dx, const float* dy, const float* y, int64_t n) {
  HWY_DYNAMIC_DISPATCH(TanhBackwardImpl)(dx, dy, y, count(n));
}
void relu(float* y, const float* x, int64_t n) { HWY_DYNAMIC_DISPATCH(ReluImpl)(y, x, count(n)); }
void relu_backward(float* dx, const float* dy, const float* x, int64_t n) {
  HWY_DYNAMIC_DISPATCH(ReluBackwardImpl)(dx, dy, x, count(n));
}
void erf(float* y, const float* x, int64_t n) { HWY_DYNAMIC_DISPATCH(ErfImpl)(y, x, count(n)); }
void gelu(float* y, const float* x, int64_t n) { HWY_DYNAMIC_DISPATCH(GeluImpl)(y, x, count(n)); }
void gelu_backward(float* dx, const float* dy, const float* x, int64_t n) {
  HWY_DYNAMIC_DISPATCH(GeluBackwardImpl)(dx, dy, x, count(n));
}
void gelu_tanh(float* y, const float* x, int64_t n) { HWY_DYNAMIC_DISPATCH(GeluTanhImpl)(y, x, count(n)); }
void gelu_tanh_backward(float* dx, const float* dy, const float* x, int64_t n) {
  HWY_DYNAMIC_DISPATCH(GeluTanhBackwardImpl)(dx, dy, x, count(n));
}

// pow's special values of p, decided once per call; the SIMD core sees finite nonzero p.
void pow_scalar(float* y, const float* x, float p, int64_t n) {
  if (p == 0.0f) {
    std::fill_n(y, count(n), 1.0f);  // x^0 = 1, even for NaN
  } else if (!std::isfinite(p)) {
    for (size_t i = 0; i < count(n); ++i) y[i] = std::pow(x[i], p);
  } else {
    HWY_DYNAMIC_DISPATCH(PowScalarImpl)(y, x, p, count(n));
  }
}
void pow_scalar_backward(float* dx, const float* dy, const float* x, float p, int64_t n) {
  if (p == 1.0f || !std::isfinite(p - 1.0f)) {  // x^0 = 1; inf/NaN exponents
    for (size_t i = 0; i < count(n); ++i) dx[i] = dy[i] * (p * std::pow(x[i], p - 1.0f));
  } else {
    HWY_DYNAMIC_DISPATCH(PowScalarBackwardImpl)(dx, dy, x, p, count(n));
  }
}

void div_backward_divisor(float* db, const float* dy, const float* a, const float* b, int64_t n) {
  HWY_DYNAMIC_DISPATCH(DivBackwardDivisorImpl)(db, dy, a, b, count(n));
}

}  // namespace hg::kernels
#endif  // HWY_ONCE
