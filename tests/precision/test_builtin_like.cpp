// half, bfloat16 and fp8 behave like built-in floating-point types (halfgrad/precision/small_float.h):
// construction from every arithmetic type rounded once (against the exact integer oracle),
// mixed arithmetic and comparisons with the result types and values of GCC's _Float16, the
// std-style customisation points (ADL math, numeric_limits against finfo, std::hash, to_string,
// operator<<) and the one public namespace hg::.
#include <catch2/catch.hpp>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <iomanip>
#include <limits>
#include <random>
#include <sstream>
#include <string>
#include <type_traits>
#include <unordered_set>

#include "halfgrad/precision/bfloat16.h"
#include "halfgrad/precision/convert.h"
#include "halfgrad/precision/finfo.h"
#include "halfgrad/precision/float8.h"
#include "halfgrad/precision/half.h"
#include "tests/precision/oracles.h"

namespace {

using hg::bfloat16;
using hg::float8_e4m3;
using hg::float8_e5m2;
using hg::half;
using hg::precision::oracle::exact_round;
using hg::precision::oracle::ExactMode;
using hg::precision::oracle::hex16;
using hg::precision::oracle::u128;

// The one public namespace: every name a user needs is reachable as hg::name.
[[maybe_unused]] constexpr hg::RoundingOptions kPublicOptions{.mode = hg::Rounding::kUp};
[[maybe_unused]] constexpr auto kPublicEncode = &hg::encode<hg::half::kFormat>;
[[maybe_unused]] constexpr auto kPublicDecode = &hg::decode<hg::half::kFormat>;
[[maybe_unused]] constexpr hg::FloatInfo kPublicInfo = hg::finfo<hg::half>();
static_assert(std::is_same_v<decltype(hg::sqrt(half())), half>);
static_assert(std::is_same_v<decltype(hg::fma(half(), half(), half())), half>);
static_assert(std::is_same_v<decltype(hg::add(half(), half(), kPublicOptions)), half>);
static_assert(std::is_same_v<decltype(hg::convert<bfloat16>(half())), bfloat16>);
static_assert(std::is_same_v<hg::ConvertOptions, hg::precision::ConvertOptions>);

// C++23 std::float16_t's rules: narrowing into half is explicit, widening to float, double and
// long double implicit, to an integer explicit; formats do not mix.
static_assert(!std::is_convertible_v<int, half> && !std::is_convertible_v<double, half>);
static_assert(std::is_convertible_v<half, float> && std::is_convertible_v<half, double> &&
              std::is_convertible_v<bfloat16, long double> && std::is_convertible_v<float8_e4m3, float>);
static_assert(!std::is_convertible_v<half, int> && std::is_constructible_v<int, half>);
static_assert(std::is_constructible_v<half, int> && std::is_constructible_v<half, long double> &&
              std::is_constructible_v<half, bool> && std::is_constructible_v<half, unsigned long long>);
template <class A, class B>
concept Addable = requires(A a, B b) {
  a + b;
};
static_assert(!Addable<half, bfloat16> && !Addable<float8_e4m3, float8_e5m2>);

template <class T>
uint32_t exact_integer(T x, const hg::precision::oracle::ExactFormat& f, ExactMode mode = ExactMode::kNearestEven) {
  const bool negative = x < 0;
  const uint64_t magnitude = negative ? 0 - uint64_t(int64_t(x)) : uint64_t(x);
  return exact_round(negative, u128(magnitude), 0, f, mode);
}

}  // namespace

TEST_CASE("construction from every integer type rounds the exact integer once", "[precision][builtin_like]") {
  using namespace hg::precision::oracle;
  // bf16 (8 bits): 2^40 + 2^32 + 1 is just above the midpoint 2^40 + 2^32 of 2^40 and
  // 2^40 + 2^33, so it rounds up to 0x5381 (2^40 is 0x5380). Through float it would become
  // 2^40 + 2^32 first (float's ulp there is 2^17), a tie, and then the even 2^40.
  const int64_t x = (int64_t{1} << 40) + (int64_t{1} << 32) + 1;
  CHECK(hex16(bfloat16(x).bits()) == hex16(0x5381));
  CHECK(hex16(bfloat16(float(x)).bits()) == hex16(0x5380));
  CHECK(hex16(bfloat16(-x).bits()) == hex16(0xD381));
  CHECK(hex16(bfloat16(uint64_t(x), {.mode = hg::Rounding::kDown}).bits()) == hex16(0x5380));
  // Extremes: the largest uint64 rounds to 2^64 (bf16 0x5F80); INT64_MIN is exactly -2^63.
  CHECK(hex16(bfloat16(std::numeric_limits<uint64_t>::max()).bits()) == hex16(0x5F80));
  CHECK(hex16(bfloat16(std::numeric_limits<int64_t>::min()).bits()) == hex16(0xDF00));
  CHECK(hex16(half(std::numeric_limits<int64_t>::min()).bits()) == hex16(0xFC00));
  CHECK(hex16(half(65519).bits()) == hex16(0x7BFF));
  CHECK(hex16(half(65520).bits()) == hex16(0x7C00));  // the overflow midpoint ties to inf
  CHECK(hex16(half(true).bits()) == hex16(0x3C00));
  CHECK(hex16(half(false).bits()) == hex16(0x0000));
  CHECK(hex16(half('A').bits()) == hex16(half(65).bits()));
  CHECK(hex16(half(short(-3)).bits()) == hex16(0xC200));
  CHECK(hex16(half(7u).bits()) == hex16(0x4700));
  CHECK(hex16(half(1L).bits()) == hex16(0x3C00));
  // Random integers of every magnitude, all modes, all formats, against the oracle.
  std::mt19937_64 rng(11);
  const hg::Rounding modes[] = {hg::Rounding::kNearestEven, hg::Rounding::kNearestAway, hg::Rounding::kTowardZero,
                                hg::Rounding::kUp, hg::Rounding::kDown};
  const ExactMode exact_modes[] = {ExactMode::kNearestEven, ExactMode::kNearestAway, ExactMode::kTowardZero,
                                   ExactMode::kUp, ExactMode::kDown};
  int wrong = 0;
  for (int k = 0; k < 200000; ++k) {
    const int64_t v = int64_t(rng() >> (rng() % 64)) * ((rng() & 1) ? -1 : 1);
    const int m = k % 5;
    const hg::RoundingOptions o{.mode = modes[m]};
    const bool ok = half(v, o).bits() == exact_integer(v, kExactF16, exact_modes[m]) &&
                    bfloat16(v, o).bits() == exact_integer(v, kExactBF16, exact_modes[m]) &&
                    float8_e4m3(v, o).bits() == exact_integer(v, kExactE4M3, exact_modes[m]) &&
                    float8_e5m2(v, o).bits() == exact_integer(v, kExactE5M2, exact_modes[m]) &&
                    half(uint64_t(v), o).bits() == exact_integer(uint64_t(v), kExactF16, exact_modes[m]) &&
                    half(int32_t(v), o).bits() == exact_integer(int32_t(v), kExactF16, exact_modes[m]);
    if (!ok && wrong++ == 0) {
      INFO("integer " << v << " mode " << m);
      CHECK(ok);
    }
  }
  CHECK(wrong == 0);
}

TEST_CASE("construction from long double rounds its 64-bit significand once", "[precision][builtin_like]") {
  // bf16: 1 + 2^-8 is the midpoint of 1 and 1 + 2^-7; 2^-60 more puts it above (up: 0x3F81).
  // As a double (53 bits) the 2^-60 is lost, the tie goes to the even 1 (0x3F80).
  const long double x = 1.0L + 0x1p-8L + 0x1p-60L;
  CHECK(hex16(bfloat16(x).bits()) == hex16(0x3F81));
  CHECK(hex16(bfloat16(double(x)).bits()) == hex16(0x3F80));
  CHECK(hex16(half(-(1.0L + 0x1p-11L + 0x1p-62L)).bits()) == hex16(0xBC01));
  CHECK(hex16(half(0x1p-25L + 0x1p-70L).bits()) == hex16(0x0001));  // above half the smallest subnormal
  CHECK(hex16(half(0x1p-25L).bits()) == hex16(0x0000));             // the tie itself: even 0
  CHECK(hex16(half(std::numeric_limits<long double>::infinity()).bits()) == hex16(0x7C00));
  CHECK(half(std::numeric_limits<long double>::quiet_NaN()).is_nan());
  CHECK(hex16(half(-0.0L).bits()) == hex16(0x8000));
  CHECK(hex16(half(1e4000L).bits()) == hex16(0x7C00));
  CHECK(hex16(half(1e4000L, {.mode = hg::Rounding::kTowardZero}).bits()) == hex16(0x7BFF));
}

#if defined(__FLT16_MANT_DIG__)
namespace {

// decltype(a op b) for half equals decltype for _Float16 with the same other operand.
template <class T>
constexpr bool same_promotion() {
  using H = _Float16;
  using R = std::conditional_t<std::is_same_v<decltype(H() + T()), H>, half, decltype(H() + T())>;
  return std::is_same_v<decltype(half() + T()), R> && std::is_same_v<decltype(T() + half()), R> &&
         std::is_same_v<decltype(half() - T()), R> && std::is_same_v<decltype(T() * half()), R> &&
         std::is_same_v<decltype(half() / T()), R> && std::is_same_v<decltype(half() < T()), bool> &&
         std::is_same_v<decltype(T() == half()), bool>;
}
static_assert(same_promotion<float>() && same_promotion<double>() && same_promotion<long double>());
static_assert(same_promotion<int>() && same_promotion<long long>() && same_promotion<unsigned>() &&
              same_promotion<short>() && same_promotion<char>() && same_promotion<bool>() &&
              same_promotion<unsigned long long>());
static_assert(std::is_same_v<decltype(half() + 1.0f), float> && std::is_same_v<decltype(half() + 1), half>);
static_assert(std::is_same_v<decltype(-half()), half> && std::is_same_v<decltype(+half()), half>);

}  // namespace

TEST_CASE("mixed arithmetic and comparisons give _Float16's values", "[precision][builtin_like]") {
  std::mt19937 rng(12);
  const int ints[] = {0, 1, -1, 2, 3, 7, 1000, 2049, -2049, 4097, 65504, 65519, 65520, 70000, -70000};
  int wrong = 0;
  for (int k = 0; k < 20000; ++k) {
    const uint16_t bits = uint16_t(rng());
    const half h = half::from_bits(bits);
    const _Float16 g = std::bit_cast<_Float16>(bits);
    const int i = ints[k % std::size(ints)];
    const float f = std::bit_cast<float>(uint32_t(rng()));
    const double d = double(f) * 0.3;
    auto same16 = [](half ours, _Float16 theirs) {
      const uint16_t t = std::bit_cast<uint16_t>(theirs);
      return ours.is_nan() ? (t & 0x7FFF) > 0x7C00 : ours.bits() == t;
    };
    auto same = [](auto ours, auto theirs) { return std::isnan(ours) ? std::isnan(theirs) : ours == theirs; };
    half compound = h;
    compound += f;
    _Float16 compound16 = g;
    compound16 += f;
    float float_lhs = f;
    float_lhs *= h;
    int int_lhs = 3;
    const bool int_ok = !(std::fabs(float(g) * 3) < 1e9f) || ((int_lhs += h), int_lhs == int(3 + g));
    const bool ok = same16(h + i, g + i) && same16(i - h, i - g) && same16(h * i, g * i) && same16(h / i, g / i) &&
                    same(h + f, g + f) && same(f * h, f * g) && same(h - d, g - d) && same(d / h, d / g) &&
                    (h == i) == (g == i) && (h < i) == (g < i) && (i >= h) == (i >= g) && (h != f) == (g != f) &&
                    (h > d) == (g > d) && same16(compound, compound16) && same(float_lhs, f * float(g)) && int_ok;
    if (!ok && wrong++ == 0) {
      INFO("half " << hex16(bits) << ", int " << i << ", float " << f);
      CHECK(ok);
    }
  }
  CHECK(wrong == 0);
  // The surprise C's rules imply, shared with _Float16: the integer is rounded to half first.
  CHECK(half(2048) == 2049);
  CHECK(_Float16(2048) == 2049);
  CHECK_FALSE(half(2048) == 2049.0f);
  CHECK(hex16((half(1) + 70000).bits()) == hex16(0x7C00));  // 70000 is inf as a half
  half counter(0);
  for (int k = 0; k < 3000; ++k) ++counter;
  CHECK(counter == half(2048));  // 2048 + 1 rounds back to 2048: counting stops there
}
#endif

namespace {

// Generic code written for built-in floats, calling the math functions unqualified.
template <class T>
T generic_hypot(T a, T b) {
  using std::sqrt;
  return sqrt(a * a + b * b);
}
template <class T>
bool generic_is_bad(T x) {
  using std::isfinite;
  using std::isnan;
  return isnan(x) || !isfinite(x);
}
template <class T>
T generic_abs_fma(T a, T b, T c) {
  using std::abs;
  using std::fma;
  return fma(abs(a), b, c);
}

}  // namespace

TEST_CASE("generic code finds the math functions by ADL", "[precision][builtin_like]") {
  CHECK(hex16(generic_hypot(half(3), half(4)).bits()) == hex16(0x4500));  // 5
  CHECK(generic_hypot(3.0f, 4.0f) == 5.0f);
  CHECK(generic_is_bad(std::numeric_limits<half>::infinity()));
  CHECK(generic_is_bad(std::numeric_limits<bfloat16>::quiet_NaN()));
  CHECK_FALSE(generic_is_bad(half(1)));
  CHECK(hex16(generic_abs_fma(half(-2), half(3), half(1)).bits()) == hex16(0x4700));  // 7
  CHECK(hex16(abs(half(-0.0)).bits()) == hex16(0x0000));
  CHECK(hex16(fabs(std::numeric_limits<half>::quiet_NaN() * half(-1)).bits() & 0x8000) == hex16(0));
  CHECK(signbit(half(-0.0)));
  CHECK_FALSE(signbit(half(0.0)));
  CHECK(hg::isinf(-std::numeric_limits<float8_e5m2>::infinity()));
  CHECK_FALSE(hg::isinf(std::numeric_limits<float8_e4m3>::max()));
}

namespace {

template <class T>
void check_limits_against_finfo() {
  using L = std::numeric_limits<T>;
  constexpr hg::FloatInfo info = hg::finfo<T>();
  CHECK(L::is_specialized);
  CHECK(L::epsilon().to_double() == info.eps);
  CHECK(L::max().to_double() == info.max);
  CHECK(L::lowest().to_double() == -info.max);
  CHECK(L::min().to_double() == info.smallest_normal);
  CHECK(L::denorm_min().to_double() == info.smallest_subnormal);
  CHECK(L::digits == info.mantissa_bits + 1);
  CHECK(int(sizeof(T)) * 8 == info.bits);
  CHECK(L::max_exponent - L::min_exponent + 1 == (1 << info.exponent_bits) - (L::has_infinity ? 2 : 1));
  CHECK(std::numeric_limits<const T>::max().bits() == L::max().bits());  // cv versions too
  CHECK(L::round_style == std::round_to_nearest);
  CHECK_FALSE(L::traps);
  CHECK_FALSE(L::tinyness_before);
  CHECK_FALSE(L::is_modulo);
  CHECK_FALSE(L::has_denorm_loss);
}

}  // namespace

TEST_CASE("numeric_limits agrees with finfo for all four formats", "[precision][builtin_like]") {
  check_limits_against_finfo<half>();
  check_limits_against_finfo<bfloat16>();
  check_limits_against_finfo<float8_e4m3>();
  check_limits_against_finfo<float8_e5m2>();
}

TEST_CASE("std::hash: equal values hash equally, so unordered containers work", "[precision][builtin_like]") {
  const std::hash<half> hash;
  CHECK(hash(half(0.0)) == hash(half(-0.0)));
  std::unordered_set<half> set;
  int nans = 0;
  for (uint32_t bits = 0; bits <= 0xFFFF; ++bits) {
    const half h = half::from_bits(uint16_t(bits));
    nans += h.is_nan();
    if (!h.is_nan()) set.insert(h);
  }
  CHECK(nans == 2046);
  CHECK(set.size() == 65536 - 2046 - 1);  // -0 and +0 are one value
  CHECK(set.count(half(1)) == 1);
  CHECK(set.count(half(-0.0)) == 1);
}

TEST_CASE("to_string is the shortest decimal that reads back, operator<< the float value",
          "[precision][builtin_like]") {
  CHECK(hg::to_string(half(0.1)) == "0.1");                  // the half is 0.0999755859375
  CHECK(hg::to_string(half(65504)) == "6.55e+04");           // 65500 reads back as 65504; numpy prints it so too
  CHECK(hg::to_string(half::from_bits(0x0001)) == "6e-08");  // 2^-24 = 5.96e-08
  CHECK(hg::to_string(half(-2.5)) == "-2.5");
  CHECK(hg::to_string(std::numeric_limits<half>::infinity()) == "inf");
  CHECK(hg::to_string(bfloat16(0.1)) == "0.1");
  CHECK(hg::to_string(float8_e4m3(448)) == "4.5e+02");  // 400 would tie between 384 and 416
  int wrong = 0;
  for (uint32_t bits = 0; bits <= 0xFFFF; ++bits) {
    const half h = half::from_bits(uint16_t(bits));
    if (h.is_nan()) continue;
    const std::string s = hg::to_string(h);
    const bool reads_back = half(std::strtod(s.c_str(), nullptr)).bits() == h.bits();
    if (!reads_back && wrong++ == 0) {
      INFO(hex16(bits) << " printed as " << s);
      CHECK(reads_back);
    }
  }
  CHECK(wrong == 0);
  std::ostringstream os;
  os << half(0.1) << " " << std::setprecision(12) << half(0.1);
  CHECK(os.str() == "0.0999756 0.0999755859375");
}
