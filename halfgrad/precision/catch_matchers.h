// Catch2 matchers for the small formats, for users' tests and halfgrad's own:
//   CHECK_THAT(got, hg::EqualsBits(want));     // the same bit pattern (so -0 != +0, NaN == NaN)
//   CHECK_THAT(got, hg::WithinUlps(want, 2));  // at most 2 representable steps apart (testing.h)
// A failure prints both values with their hex bits and fields (hg::describe). Test
// infrastructure, never included by the library; Catch2 v2 or v3: docs/library.md.
#pragma once

#if __has_include(<catch2/catch_version_macros.hpp>)
#include <catch2/matchers/catch_matchers.hpp>
#else
#include <catch2/catch.hpp>
#endif

#include <cstdint>
#include <optional>
#include <string>

#include "halfgrad/precision/small_float.h"
#include "halfgrad/precision/testing.h"

namespace hg::precision {

namespace detail {
#if __has_include(<catch2/catch_version_macros.hpp>)
template <class T>
using CatchMatcherBase = Catch::Matchers::MatcherBase<T>;  // Catch2 v3
#else
template <class T>
using CatchMatcherBase = Catch::MatcherBase<T>;  // Catch2 v2
#endif
}  // namespace detail

// Each matcher keeps the last value it was matched against, so that describe() can print it
// (Catch2 calls describe() after match() and prints the value only through operator<<, as a float).
template <FloatFormat F>
class EqualsBitsMatcher : public detail::CatchMatcherBase<SmallFloat<F>> {
 public:
  explicit EqualsBitsMatcher(SmallFloat<F> expected) : expected_(expected) {}
  bool match(const SmallFloat<F>& actual) const override {
    actual_ = actual;
    return actual.bits() == expected_.bits();
  }
  // "has the bits of 1 (0x3c00 = 0|01111|0000000000); got 1.00097656 (0x3c01 = ...)"
  std::string describe() const override {
    std::string text = "has the bits of " + precision::describe(expected_);
    if (actual_) text += "; got " + precision::describe(*actual_);
    return text;
  }

 private:
  SmallFloat<F> expected_;
  mutable std::optional<SmallFloat<F>> actual_;
};

template <FloatFormat F>
class WithinUlpsMatcher : public detail::CatchMatcherBase<SmallFloat<F>> {
 public:
  WithinUlpsMatcher(SmallFloat<F> expected, int64_t ulps) : expected_(expected), ulps_(ulps) {}
  // A NaN on either side never matches (it has no distance).
  bool match(const SmallFloat<F>& actual) const override {
    actual_ = actual;
    return !actual.is_nan() && !expected_.is_nan() && ulp_distance(actual, expected_) <= ulps_;
  }
  // "is within 1 ulps of 1 (0x3c00 = ...); got 1.00195312 (0x3c02 = ...), 2 ulps away"
  std::string describe() const override {
    std::string text = "is within " + std::to_string(ulps_) + " ulps of " + precision::describe(expected_);
    if (actual_) {
      text += "; got " + precision::describe(*actual_);
      if (!actual_->is_nan() && !expected_.is_nan()) {
        text += ", " + std::to_string(ulp_distance(*actual_, expected_)) + " ulps away";
      }
    }
    return text;
  }

 private:
  SmallFloat<F> expected_;
  int64_t ulps_;
  mutable std::optional<SmallFloat<F>> actual_;
};

template <FloatFormat F>
EqualsBitsMatcher<F> EqualsBits(SmallFloat<F> expected) {
  return EqualsBitsMatcher<F>(expected);
}
template <FloatFormat F>
WithinUlpsMatcher<F> WithinUlps(SmallFloat<F> expected, int64_t ulps) {
  return WithinUlpsMatcher<F>(expected, ulps);
}

}  // namespace hg::precision

namespace hg {
using precision::EqualsBits;
using precision::WithinUlps;
}  // namespace hg
