// Tests for halfgrad/autograd/kernels/elementwise.h on every compiled Highway target the CPU supports:
// the exact kernels equal their scalar twins (reference.h) bit for bit, at sizes that exercise
// the vector tails and with inf/NaN/zero/subnormal inputs; the transcendental kernels stay within
// elementwise.h's ulp bounds of double-precision references on dense sweeps, and of their twins;
// IEEE special values; nothing is written past n.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "halfgrad/autograd/kernels/cast.h"
#include "halfgrad/autograd/kernels/elementwise.h"
#include "halfgrad/autograd/kernels/reference.h"
#include "hwy/targets.h"

#include "tests/autograd/kernels/kernel_test_util.h"
#include "tests/sweep_stride.h"

namespace hg::kernels {

using namespace test_util;

namespace {

constexpr int64_t kSizes[] = {0, 1, 7, 17, 67, 1000};

// Floats mapped to integers in value order (-0 and +0 adjacent), for ulp distances.
int64_t ordered(float x) {
  const int64_t u = bits(x) & 0x7FFFFFFF;
  return (bits(x) >> 31) ? -u : u;
}

// ulps between two floats; 0 if both are NaN, "infinite" if one is.
double ulps_between(float a, float b) {
  if (std::isnan(a) || std::isnan(b)) return std::isnan(a) && std::isnan(b) ? 0 : 1e30;
  return double(std::llabs(ordered(a) - ordered(b)));
}

// Error of `got` against the exact `want`, in ulps of `scale` (the value whose ulp counts).
double ulp_error(float got, double want, double scale) {
  if (std::isnan(want)) return std::isnan(got) ? 0 : 1e30;
  if (std::isnan(got)) return 1e30;
  if (std::isinf(got) || std::fabs(want) >= 0x1p128) {  // overflow: inf is right above the rounding edge
    const double edge = 0x1p128 * (1 - 0x1p-25);
    if (std::isinf(got) && std::fabs(want) >= edge && std::signbit(got) == std::signbit(want)) return 0;
    const double g = std::isinf(got) ? std::copysign(0x1p128, double(got)) : double(got);
    return std::fabs(g - std::fmax(-0x1p128, std::fmin(want, 0x1p128))) / ulp_of(0x1p127);
  }
  return std::fabs(double(got) - want) / ulp_of(scale);
}

// Random values in [low, high] with special values sprinkled in.
std::vector<float> inputs(int64_t n, uint32_t seed, float low = -4.0f, float high = 4.0f) {
  static const float specials[] = {0.0f,
                                   -0.0f,
                                   1.0f,
                                   -1.0f,
                                   kInf,
                                   -kInf,
                                   kNaN,
                                   std::numeric_limits<float>::min(),
                                   -std::numeric_limits<float>::denorm_min(),
                                   std::numeric_limits<float>::max(),
                                   1e-30f,
                                   -3e38f};
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(low, high);
  std::vector<float> x(static_cast<size_t>(n));
  for (size_t i = 0; i < x.size(); ++i) x[i] = i % 5 == 3 ? specials[(i / 5) % std::size(specials)] : u(rng);
  return x;
}

void check_sentinels(const std::vector<float>& y, int64_t n) {
  for (size_t i = size_t(n); i < y.size(); ++i) REQUIRE(bits(y[i]) == bits(kSentinel));
}

// Every element of got and want equal bit for bit (failure prints the first mismatch in hex),
// except that any NaN equals any NaN: IEEE 754 (6.3) leaves the sign and payload of an
// arithmetic NaN result open, and x86 returns the first operand's NaN, so which of two NaN
// operands wins depends on the compiler's operand order (it differs between -O1 and -O3).
void check_bits(const std::vector<float>& got, const std::vector<float>& want, int64_t n, const std::vector<float>& x) {
  for (int64_t i = 0; i < n; ++i) {
    const bool both_nan = std::isnan(got[size_t(i)]) && std::isnan(want[size_t(i)]);
    if (bits(got[size_t(i)]) != bits(want[size_t(i)]) && !both_nan) {
      FAIL_CHECK("element " << i << " of " << n << ", input " << hex(x[size_t(i)]) << ": got " << hex(got[size_t(i)])
                            << ", want " << hex(want[size_t(i)]));
      return;
    }
  }
  check_sentinels(got, n);
}

using Unary = void (*)(float*, const float*, int64_t);
using Binary = void (*)(float*, const float*, const float*, int64_t);

struct UnaryCase {
  const char* name;
  Unary kernel, twin;
};
struct BinaryCase {
  const char* name;
  Binary kernel, twin;
};

}  // namespace

TEST_CASE("exact elementwise kernels equal their scalar twins bit for bit", "[simd][kernels]") {
  const UnaryCase unary[] = {
      {"neg", neg, reference::neg}, {"sqrt", sqrt, reference::sqrt}, {"relu", relu, reference::relu}};
  const BinaryCase binary[] = {{"add", add, reference::add},
                               {"sub", sub, reference::sub},
                               {"mul", mul, reference::mul},
                               {"div", div, reference::div},
                               {"sqrt_backward", sqrt_backward, reference::sqrt_backward},
                               {"tanh_backward", tanh_backward, reference::tanh_backward},
                               {"relu_backward", relu_backward, reference::relu_backward}};
  for_each_target([&] {
    for (const int64_t n : kSizes) {
      INFO("n = " << n);
      const std::vector<float> a = inputs(n, 1), b = inputs(n, 2), c = inputs(n, 3, 0.5f, 2.0f);
      for (const UnaryCase& k : unary) {
        INFO(k.name);
        std::vector<float> got = output(n), want = output(n);
        k.kernel(got.data(), a.data(), n);
        k.twin(want.data(), a.data(), n);
        check_bits(got, want, n, a);
      }
      for (const BinaryCase& k : binary) {
        INFO(k.name);
        std::vector<float> got = output(n), want = output(n);
        k.kernel(got.data(), a.data(), b.data(), n);
        k.twin(want.data(), a.data(), b.data(), n);
        check_bits(got, want, n, a);
      }
      for (const float s : {0.1f, -3.0f, kInf, kNaN}) {
        INFO("scalar " << s);
        std::vector<float> got = output(n), want = output(n);
        add_scalar(got.data(), a.data(), s, n);
        reference::add_scalar(want.data(), a.data(), s, n);
        check_bits(got, want, n, a);
        mul_scalar(got.data(), a.data(), s, n);
        reference::mul_scalar(want.data(), a.data(), s, n);
        check_bits(got, want, n, a);
        masked_fill(got.data(), a.data(), b.data(), s, n);
        reference::masked_fill(want.data(), a.data(), b.data(), s, n);
        check_bits(got, want, n, a);
      }
      std::vector<float> got = output(n), want = output(n);
      div_backward_divisor(got.data(), a.data(), b.data(), c.data(), n);
      reference::div_backward_divisor(want.data(), a.data(), b.data(), c.data(), n);
      check_bits(got, want, n, a);
    }
  });
}

TEST_CASE("elementwise kernels work in place", "[simd][kernels]") {
  for_each_target([] {
    const std::vector<float> x = inputs(67, 4);
    std::vector<float> y = x, want(x.size());
    gelu(y.data(), y.data(), 67);
    reference::gelu(want.data(), x.data(), 67);
    for (size_t i = 0; i < y.size(); ++i) CHECK(ulps_between(y[i], want[i]) <= 5);
    y = x;
    mul(y.data(), y.data(), y.data(), 67);
    reference::mul(want.data(), x.data(), x.data(), 67);
    check_bits(y, want, 67, x);
  });
}

TEST_CASE("IEEE special values of the elementwise kernels", "[simd][kernels]") {
  for_each_target([] {
    const auto one = [](Unary kernel, float x) {
      float y[1];
      kernel(y, &x, 1);
      return y[0];
    };
    CHECK(std::isnan(one(relu, kNaN)));
    CHECK(bits(one(relu, -0.0f)) == 0);
    CHECK(one(exp, kInf) == kInf);
    CHECK(bits(one(exp, -kInf)) == 0);
    CHECK(one(exp, 89.0f) == kInf);
    CHECK(one(exp, 88.72f) < kInf);
    CHECK(bits(one(exp, -104.0f)) == 0);
    CHECK(one(exp, -103.0f) > 0.0f);  // a subnormal
    CHECK(std::isnan(one(exp, kNaN)));
    CHECK(one(log, 0.0f) == -kInf);
    CHECK(one(log, -0.0f) == -kInf);
    CHECK(one(log, kInf) == kInf);
    CHECK(std::isnan(one(log, -1.0f)));
    CHECK(std::isnan(one(log, kNaN)));
    CHECK(one(log, std::numeric_limits<float>::denorm_min()) == Approx(-103.2789f));
    CHECK(bits(one(sqrt, -0.0f)) == 0x80000000u);
    CHECK(std::isnan(one(sqrt, -1.0f)));
    CHECK(one(tanh, kInf) == 1.0f);
    CHECK(one(tanh, -kInf) == -1.0f);
    CHECK(bits(one(tanh, -0.0f)) == 0x80000000u);
    CHECK(std::isnan(one(tanh, kNaN)));
    CHECK(one(erf, kInf) == 1.0f);
    CHECK(one(erf, -kInf) == -1.0f);
    CHECK(bits(one(erf, -0.0f)) == 0x80000000u);
    CHECK(std::isnan(one(erf, kNaN)));
    CHECK(one(gelu, kInf) == kInf);
    CHECK(bits(one(gelu, -30.0f)) == 0x80000000u);  // -30 Phi(-30) underflows to -0
    CHECK(std::isnan(one(gelu, kNaN)));
    CHECK(one(gelu_tanh, kInf) == kInf);
    CHECK(std::isnan(one(gelu_tanh, kNaN)));
    float y[3];
    const float x[3] = {-8.0f, 0.0f, kNaN};
    pow_scalar(y, x, 0.0f, 3);  // x^0 = 1 for every x
    CHECK((y[0] == 1.0f && y[1] == 1.0f && y[2] == 1.0f));
    pow_scalar(y, x, 3.0f, 3);
    CHECK((y[0] == -512.0f && bits(y[1]) == 0 && std::isnan(y[2])));
    pow_scalar(y, x, -1.0f, 3);
    CHECK((y[0] == -0.125f && y[1] == kInf));
    pow_scalar(y, x, 0.5f, 2);
    CHECK((std::isnan(y[0]) && bits(y[1]) == 0));
  });
}

namespace {

// Dense sweeps: every float between low and high (both finite, same sign or either side of 0)
// stepping through the ordered bit patterns, so that every binade is covered; plus a uniform
// grid on [low, high] clipped to `linear` (the range where the values matter most). `points`
// of each, divided by tests/sweep_stride.h's stride in the sanitized tree.
std::vector<float> sweep(float low, float high, float linear_low, float linear_high, int64_t points) {
  points = std::max<int64_t>(1, points / int64_t(testing::kSweepStride));
  std::vector<float> x;
  const int64_t a = ordered(low), b = ordered(high);
  const int64_t step = std::max<int64_t>(1, (b - a) / points);
  for (int64_t o = a; o <= b; o += step) {
    const uint32_t u = o < 0 ? uint32_t(-o) | 0x80000000u : uint32_t(o);
    float f;
    std::memcpy(&f, &u, sizeof f);
    x.push_back(f);
  }
  for (int64_t i = 0; i <= points; ++i) {
    x.push_back(linear_low + (linear_high - linear_low) * float(double(i) / double(points)));
  }
  return x;
}

struct Accuracy {
  double worst = 0;
  float at = 0;
};

// Max ulp error of kernel over xs against want(x) (exact, in double), ulps of scale(x, want).
Accuracy measure(
    Unary kernel, const std::vector<float>& xs, const std::function<double(double)>& want,
    const std::function<double(double, double)>& scale = [](double, double w) { return w; }) {
  std::vector<float> y(xs.size());
  kernel(y.data(), xs.data(), int64_t(xs.size()));
  Accuracy a;
  for (size_t i = 0; i < xs.size(); ++i) {
    const double w = want(xs[i]);
    const double e = ulp_error(y[i], w, scale(xs[i], w));
    if (e > a.worst) a = {e, xs[i]};
  }
  return a;
}

}  // namespace

TEST_CASE("transcendental kernels are within their ulp bounds of double precision", "[simd][kernels]") {
  const std::vector<float> exp_x = sweep(-104.0f, 89.0f, -20.0f, 20.0f, 1 << 20);
  const std::vector<float> log_x = sweep(0.0f, std::numeric_limits<float>::max(), 0.0f, 4.0f, 1 << 20);
  const std::vector<float> wide_x = sweep(-30.0f, 30.0f, -6.0f, 6.0f, 1 << 20);
  // Phi(x) is subnormal below x = -12.95 (2^-126): that part is checked separately.
  const std::vector<float> gelu_x = sweep(-12.95f, 15.0f, -6.0f, 6.0f, 1 << 20);
  const std::vector<float> tanh_form_x = sweep(-6.0f, 15.0f, -6.0f, 6.0f, 1 << 20);
  const auto gelu_exact = [](double x) { return x * 0.5 * std::erfc(-x * 0.70710678118654752440); };
  for_each_target([&] {
    Accuracy a = measure(exp, exp_x, [](double x) { return std::exp(x); });
    INFO("exp: " << a.worst << " ulp at " << hex(a.at));
    CHECK(a.worst <= 1.5);
    a = measure(log, log_x, [](double x) { return std::log(x); });
    INFO("log: " << a.worst << " ulp at " << hex(a.at));
    CHECK(a.worst <= 2.0);
    a = measure(tanh, wide_x, [](double x) { return std::tanh(x); });
    INFO("tanh: " << a.worst << " ulp at " << hex(a.at));
    CHECK(a.worst <= 3.0);
    a = measure(erf, wide_x, [](double x) { return std::erf(x); });
    INFO("erf: " << a.worst << " ulp at " << hex(a.at));
    CHECK(a.worst <= 2.0);
    a = measure(gelu, gelu_x, gelu_exact);
    INFO("gelu: " << a.worst << " ulp at " << hex(a.at));
    CHECK(a.worst <= 5.0);
    // Below -12.95 Phi(x) is subnormal: the error is that of one subnormal rounding, times |x|.
    const std::vector<float> deep = sweep(-20.0f, -12.95f, -20.0f, -12.95f, 1 << 16);
    std::vector<float> y(deep.size());
    gelu(y.data(), deep.data(), int64_t(deep.size()));
    double worst_deep = 0;
    for (size_t i = 0; i < deep.size(); ++i) {
      worst_deep =
          std::max(worst_deep, std::fabs(double(y[i]) - gelu_exact(deep[i])) / (std::fabs(deep[i]) * 0x1p-149));
    }
    INFO("gelu below -12.95: " << worst_deep << " |x| subnormal ulps");
    CHECK(worst_deep <= 2.0);
    // The tanh form: the f32 rounding of u = sqrt(2/pi) (x + 0.044715 x^3) (up to ~2.5 ulp of u,
    // as in any f32 evaluation) moves sigmoid(2u) by up to 5|u| ulp on the left: 3 + 6|u| ulp.
    std::vector<float> z(tanh_form_x.size());
    gelu_tanh(z.data(), tanh_form_x.data(), int64_t(z.size()));
    double worst_tanh_form = 0;
    float at = 0;
    for (size_t i = 0; i < z.size(); ++i) {
      const double x = tanh_form_x[i], u = 0.79788456080286535588 * (x + 0.044715 * x * x * x);
      const double e = ulp_error(z[i], x / (1 + std::exp(-2 * u)), x / (1 + std::exp(-2 * u))) /
                       (3 + 6 * std::fabs(std::fmin(u, 0.0)));
      if (e > worst_tanh_form) worst_tanh_form = e, at = float(x);
    }
    INFO("gelu_tanh: " << worst_tanh_form << " of the bound at " << hex(at));
    CHECK(worst_tanh_form <= 1.0);
  });
}

TEST_CASE("pow_scalar is within 1 ulp of double precision", "[simd][kernels]") {
  const std::vector<float> positive = sweep(0.0f, 1e6f, 0.0f, 4.0f, 1 << 18);
  const std::vector<float> negative = sweep(-1e3f, -0.0f, -4.0f, 0.0f, 1 << 16);
  for_each_target([&] {
    for (const float p : {0.5f, 1.5f, -1.5f, 2.0f, 3.0f, -1.0f, 0.3f, 7.0f, -2.0f}) {
      INFO("p = " << p);
      std::vector<float> x = positive;
      if (std::nearbyint(p) == p) x.insert(x.end(), negative.begin(), negative.end());
      std::vector<float> y(x.size());
      pow_scalar(y.data(), x.data(), p, int64_t(x.size()));
      double worst = 0;
      for (size_t i = 0; i < x.size(); ++i) {
        const double want = std::pow(double(x[i]), double(p));
        if (std::fabs(want) < 0x1p-126) continue;  // subnormal results: checked against the twin
        worst = std::max(worst, ulp_error(y[i], want, want));
      }
      CHECK(worst <= 1.0);
    }
  });
}

TEST_CASE("transcendental kernels agree with their scalar twins", "[simd][kernels]") {
  struct Bound {
    const char* name;
    Unary kernel, twin;
    double ulps;
  };
  // Twin against kernel: the kernel's bound plus the twin's own error (glibc: < 1 ulp; gelu's
  // twin is correctly rounded), rounded down to whole ulps.
  const Bound unary[] = {{"exp", exp, reference::exp, 2},    {"log", log, reference::log, 2},
                         {"tanh", tanh, reference::tanh, 3}, {"erf", erf, reference::erf, 2},
                         {"gelu", gelu, reference::gelu, 6}, {"gelu_tanh", gelu_tanh, reference::gelu_tanh, 3}};
  for_each_target([&] {
    for (const int64_t n : kSizes) {
      INFO("n = " << n);
      const std::vector<float> x = inputs(n, 5, -12.0f, 12.0f), log_x = inputs(n, 6, 0.0f, 100.0f);
      for (const Bound& k : unary) {
        INFO(k.name);
        const std::vector<float>& in = k.kernel == log ? log_x : x;
        std::vector<float> got = output(n), want = output(n);
        k.kernel(got.data(), in.data(), n);
        k.twin(want.data(), in.data(), n);
        for (int64_t i = 0; i < n; ++i) {
          INFO("x = " << hex(in[size_t(i)]) << ": got " << hex(got[size_t(i)]) << ", want " << hex(want[size_t(i)]));
          CHECK(ulps_between(got[size_t(i)], want[size_t(i)]) <= k.ulps);
        }
        check_sentinels(got, n);
      }
      const std::vector<float> px = inputs(n, 7, 0.0f, 30.0f), dy = inputs(n, 8, -2.0f, 2.0f);
      for (const float p : {2.5f, -0.5f, 3.0f}) {
        std::vector<float> got = output(n), want = output(n);
        pow_scalar(got.data(), px.data(), p, n);
        reference::pow_scalar(want.data(), px.data(), p, n);
        for (int64_t i = 0; i < n; ++i) CHECK(ulps_between(got[size_t(i)], want[size_t(i)]) <= 1);
        pow_scalar_backward(got.data(), dy.data(), px.data(), p, n);
        reference::pow_scalar_backward(want.data(), dy.data(), px.data(), p, n);
        for (int64_t i = 0; i < n; ++i) CHECK(ulps_between(got[size_t(i)], want[size_t(i)]) <= 2);
        check_sentinels(got, n);
      }
    }
  });
}

TEST_CASE("gelu derivatives are within their bounds", "[simd][kernels]") {
  // The derivative's two terms can cancel (it crosses 0 near x = -0.75), so errors are measured
  // in ulps of the larger term: Phi(x) and x phi(x) for the exact form, s and 2 x s (1 - s) u'
  // for the tanh form (the latter against its twin, which shares the f32 argument u). Ranges end
  // where a term turns subnormal (x phi(x) below x = -13.3, s below x = -9.9): beyond, errors are
  // a few subnormal ulps times |x| u'.
  const std::vector<float> x = sweep(-13.0f, 15.0f, -6.0f, 6.0f, 1 << 19);
  const std::vector<float> tanh_form_x = sweep(-9.5f, 15.0f, -6.0f, 6.0f, 1 << 19);
  const std::vector<float> ones(x.size(), 1.0f);
  for_each_target([&] {
    std::vector<float> got(x.size()), want(x.size());
    gelu_backward(got.data(), ones.data(), x.data(), int64_t(x.size()));
    double worst = 0;
    float at = 0;
    for (size_t i = 0; i < x.size(); ++i) {
      const double v = x[i], cdf = 0.5 * std::erfc(-v * 0.70710678118654752440);
      const double slope = v * 0.39894228040143267794 * std::exp(-0.5 * v * v);
      const double e = ulp_error(got[i], cdf + slope, std::fmax(cdf, std::fabs(slope)));
      if (e > worst) worst = e, at = x[i];
    }
    INFO("gelu_backward: " << worst << " ulp of the larger term at " << hex(at));
    CHECK(worst <= 6.0);
    got.resize(tanh_form_x.size());
    want.resize(tanh_form_x.size());
    gelu_tanh_backward(got.data(), ones.data(), tanh_form_x.data(), int64_t(got.size()));
    reference::gelu_tanh_backward(want.data(), ones.data(), tanh_form_x.data(), int64_t(got.size()));
    worst = 0;
    for (size_t i = 0; i < got.size(); ++i) {
      float complement;
      const float v = tanh_form_x[i], u = 0.7978845608028654f * (v + 0.044715f * v * v * v);
      const float e = std::exp(-std::fabs(u + u)), s = u + u < 0 ? e / (1 + e) : 1 / (1 + e);
      complement = 1 - s;
      const double du = 0.7978845608028654 * (1 + 3 * 0.044715 * double(v) * v);
      const double scale = std::fmax(s, std::fabs(2.0 * v * s * complement * du));
      const double error = std::fabs(double(got[i]) - double(want[i])) / ulp_of(scale);
      if (error > worst) worst = error, at = v;
    }
    INFO("gelu_tanh_backward: " << worst << " ulp of the larger term (twin) at " << hex(at));
    CHECK(worst <= 6.0);
  });
}

TEST_CASE("all_finite judges the stored bits as widening and std::isfinite do", "[kernels]") {
  // Oracle: widen (the decode path) then std::isfinite, on every f16 and bf16 bit pattern.
  for (const DType dtype : {DType::f16, DType::bf16}) {
    int64_t disagree = 0;
    for (uint32_t b = 0; b < 65536; ++b) {
      const uint16_t bits = uint16_t(b);
      float value = 0;
      load_f32(&value, &bits, dtype, 0, 1);
      disagree += all_finite(&bits, dtype, 1) != std::isfinite(value);
    }
    INFO(dtype_name(dtype));
    CHECK(disagree == 0);
  }
  // f32: the edges of the exponent field and a million random patterns.
  std::mt19937 rng(11);
  std::vector<uint32_t> patterns = {0x00000000u, 0x80000000u, 0x00000001u, 0x7F7FFFFFu, 0xFF7FFFFFu,
                                    0x7F800000u, 0xFF800000u, 0x7F800001u, 0x7FC00000u, 0xFFFFFFFFu};
  for (int i = 0; i < 1000000; ++i) patterns.push_back(rng());
  int64_t disagree = 0;
  for (const uint32_t bits : patterns) {
    float value;
    std::memcpy(&value, &bits, sizeof value);
    disagree += all_finite(&bits, DType::f32, 1) != std::isfinite(value);
  }
  CHECK(disagree == 0);
  // One inf or NaN anywhere in a longer array (vector body and tail) is found.
  for (const int64_t n : {1, 7, 8, 9, 33, 100}) {
    for (int64_t at = 0; at < n; ++at) {
      std::vector<float> values(size_t(n), 1.5f);
      CHECK(all_finite(values.data(), DType::f32, n));
      values[size_t(at)] = (at % 2) ? std::numeric_limits<float>::infinity() : std::numeric_limits<float>::quiet_NaN();
      CHECK_FALSE(all_finite(values.data(), DType::f32, n));
    }
  }
}

}  // namespace hg::kernels
