// How to test your own fp16 kernel with halfgrad's testing helpers (docs/numerics.md, "Testing
// helpers"): a sum accumulated in half against an exact reference with a derived ulp bound, an
// exhaustive sweep of unary functions against correctly rounded references, and the matchers
// that print bit patterns on failure. Built as build/bin/example_test_my_kernel, run by ctest
// (label `example`). Copy it next to your kernel and replace the kernels; link it with a Catch2
// main (a .cpp holding `#define CATCH_CONFIG_MAIN` and `#include <catch2/catch.hpp>`, compiled
// once for all your test files; here the test binary's own, tests/main.cpp).
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <span>
#include <vector>

#include "halfgrad/precision/catch_matchers.h"  // hg::EqualsBits, hg::WithinUlps
#include "halfgrad/precision/half.h"
#include "halfgrad/precision/testing.h"  // hg::ulp_distance, hg::all_values, hg::finite_values

namespace {

// ---- the kernels under test (yours go here) ----------------------------------------------

// A sum accumulated in half: every + rounds to nearest even.
hg::half sum_in_half(std::span<const hg::half> x) {
  hg::half sum(0);
  for (const hg::half v : x) sum += v;
  return sum;
}

// x^2 through float: the product of two 11-bit significands has at most 22 bits, so the float
// product is exact and the one rounding to half makes the result correctly rounded.
hg::half square(hg::half x) { return hg::half(x.to_float() * x.to_float()); }

// e^x through float's expf: rounded twice (expf, then to half), so not always correctly rounded.
hg::half exp_half(hg::half x) { return hg::half(std::exp(x.to_float())); }

// ---- the tests ---------------------------------------------------------------------------

TEST_CASE("sum_in_half of 16 values in [1, 2) is within 8 ulps of the exact sum") {
  // Bound: every partial sum lies in [0, 32), where the half spacing is at most 2^-6, so each of
  // the 15 additions after the first errs by at most half of that, 2^-7: the computed sum is
  // within 15 * 2^-7 = 7.5 ulps (ulp = 2^-6, the spacing in [16, 32)) of the exact sum. The
  // reference half(exact) is within 0.5 ulp of it, so the two are at most 8 steps apart.
  // (The exact sum: 16 halves of 11 bits in a double, no rounding at all.)
  std::mt19937 rng(7);
  std::uniform_real_distribution<double> uniform(1.0, 2.0);
  for (int trial = 0; trial < 100; ++trial) {
    std::vector<hg::half> x;
    double exact = 0;
    for (int i = 0; i < 16; ++i) {
      x.push_back(hg::half(uniform(rng)));
      exact += x.back().to_double();
    }
    const hg::half got = sum_in_half(x);
    INFO("trial " << trial << ": exact sum " << exact);
    CHECK(hg::ulp_distance(got, hg::half(exact)) <= 8);
  }
  // Where all partial sums are exact (small integers), the sum is exact: compare bits.
  const std::vector<hg::half> integers{hg::half(1), hg::half(2), hg::half(3), hg::half(-4)};
  CHECK_THAT(sum_in_half(integers), hg::EqualsBits(hg::half(2)));
}

TEST_CASE("square is correctly rounded for every half") {
  // The reference: the exact square in double (22 significant bits), rounded once to half.
  for (const hg::half x : hg::finite_values<hg::half>()) {
    const hg::half want(x.to_double() * x.to_double());
    if (square(x).bits() != want.bits()) {  // a matcher per value would print 63488 passes with -s
      INFO("x = " << hg::describe(x));
      CHECK_THAT(square(x), hg::EqualsBits(want));
    }
  }
  // The non-finite values: inf squared is inf, NaN stays NaN.
  for (const hg::half x : hg::all_values<hg::half>()) {
    if (isinf(x)) CHECK_THAT(square(x), hg::EqualsBits(std::numeric_limits<hg::half>::infinity()));
    if (isnan(x)) CHECK(isnan(square(x)));
  }
}

TEST_CASE("exp_half is within 1 ulp of the correctly rounded e^x for every finite half") {
  // expf errs by at most an ulp of float (2^-13 of a half ulp), so e^x rounded through float
  // lands on a half neighbouring the correctly rounded one (or on it): at most 1 step apart.
  // The reference rounds double's exp once (its error, 2^-29 half ulps, could only matter at a
  // near-tie, and then both neighbours are within 1).
  int64_t worst = 0;
  for (const hg::half x : hg::finite_values<hg::half>()) {
    const hg::half want(std::exp(x.to_double()));
    const hg::half got = exp_half(x);
    if (hg::ulp_distance(got, want) > 1) {
      INFO("x = " << hg::describe(x));
      CHECK_THAT(got, hg::WithinUlps(want, 1));
    }
    worst = std::max(worst, hg::ulp_distance(got, want));
  }
  CHECK(worst <= 1);
}

}  // namespace
