// Shared by the kernel tests: run a body on every compiled Highway target, and print floats
// with their bits when a comparison fails.
#pragma once

#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "hwy/targets.h"
#include "tests/float_specials.h"

namespace hg::kernels::test_util {

using hg::testing::kInf;
using hg::testing::kNaN;
inline constexpr float kSentinel = -12345.0f;  // fills outputs, to catch writes out of bounds

// Output arrays of n elements followed by sentinels that must survive.
inline std::vector<float> output(int64_t n) { return std::vector<float>(size_t(n) + 16, kSentinel); }

// The ulp of the float nearest to v (subnormal spacing below 2^-126; 2^104 from 2^127 up, the
// largest binade), as the kernels' error bounds use it.
inline double ulp_of(double v) {
  const double a = std::fabs(v);
  if (a < 0x1p-126) return 0x1p-149;
  if (a >= 0x1p127) return 0x1p104;
  return std::ldexp(1.0, std::ilogb(a) - 23);
}

// Runs `body` once per compiled target this CPU supports, with dispatch forced to it.
inline void for_each_target(const std::function<void()>& body) {
  for (const int64_t target : hwy::SupportedAndGeneratedTargets()) {
    hwy::SetSupportedTargetsForTest(target);
    INFO("target " << hwy::TargetName(target));
    body();
  }
  hwy::SetSupportedTargetsForTest(0);
}

inline uint32_t bits(float x) {
  uint32_t u;
  std::memcpy(&u, &x, sizeof u);
  return u;
}

inline std::string hex(float x) {
  char buffer[48];
  std::snprintf(buffer, sizeof buffer, "%.9g (0x%08x)", double(x), bits(x));
  return buffer;
}

}  // namespace hg::kernels::test_util
