// Shared by the kernel tests: run a body on every compiled Highway target, and print floats
// with their bits when a comparison fails.
#pragma once

#include <catch2/catch.hpp>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <limits>
#include <string>

#include "hwy/targets.h"

namespace hg::kernels::test_util {

inline constexpr float kInf = std::numeric_limits<float>::infinity();
inline constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
inline constexpr float kSentinel = -12345.0f;  // fills outputs, to catch writes out of bounds

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
