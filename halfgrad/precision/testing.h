// Helpers for unit tests of numerical code in the small formats (half, bfloat16, fp8); no test
// framework needed (halfgrad/precision/catch_matchers.h builds Catch2 matchers on them).
// - ulp_distance(a, b): how many representable steps apart two values are, the unit in which
//   error bounds of rounded arithmetic are stated ("within 2 ulps").
// - all_values<T>() / finite_values<T>(): every bit pattern of a format in increasing bit order,
//   for exhaustive sweeps (`for (hg::half x : hg::all_values<hg::half>())`: 65536 values).
// In namespace hg like the rest of precision/: these are facts about the formats, not about a
// test framework, and code outside tests (benchmarks, tools) may sweep a format too.
#pragma once

#include <concepts>
#include <cstdint>
#include <ranges>
#include <string>

#include "halfgrad/base/error.h"
#include "halfgrad/precision/small_float.h"

namespace hg::precision {

// The number of representable steps from a to b (>= 0, symmetric): the bit patterns mapped to
// a linear order (sign-magnitude: -max ... -0 = +0 ... +max, then +inf where F has inf), so
// -0 and +0 are 0 apart, +-smallest subnormal 2 apart and half max to inf 1 apart. A NaN has
// no place in that order: a NaN operand throws hg::Error (a test comparing a NaN
// should fail loudly, not pass with a sentinel distance).
template <FloatFormat F>
constexpr int64_t ulp_distance(SmallFloat<F> a, SmallFloat<F> b) {
  const auto ordinal = [](SmallFloat<F> x) {
    if (x.is_nan()) fail("ulp_distance of a NaN: ", describe(x));
    const auto magnitude = int64_t(x.bits() & ~F.sign_mask());
    return x.sign_bit() ? -magnitude : magnitude;
  };
  const int64_t difference = ordinal(a) - ordinal(b);
  return difference < 0 ? -difference : difference;
}

// Every value of the SmallFloat type T, one per bit pattern 0 ... 2^bits - 1 in that order
// (+0, the positive values upward, inf and NaNs, then -0 and the negatives): a sized range.
// clang-format 14 misplaces C++20 requires clauses:
// clang-format off
template <class T>
  requires std::same_as<T, SmallFloat<T::kFormat>>
constexpr auto all_values() {
  return std::views::iota(uint32_t{0}, uint32_t{1} << T::kFormat.storage_bits()) |
         std::views::transform([](uint32_t bits) { return T::from_bits(typename T::storage_type(bits)); });
}
// clang-format on

// all_values<T>() without the infs and NaNs, in the same order.
// clang-format 14 misplaces C++20 requires clauses:
// clang-format off
template <class T>
  requires std::same_as<T, SmallFloat<T::kFormat>>
constexpr auto finite_values() {
  return all_values<T>() | std::views::filter([](T x) { return isfinite(x); });
}
// clang-format on

}  // namespace hg::precision

namespace hg {
using precision::all_values;
using precision::finite_values;
using precision::ulp_distance;
}  // namespace hg
