// What the precision sweeps iterate over: the five rounding modes of halfgrad/precision/rounding.h, each
// beside the exact oracle's mode of the same rule (oracles.h) and a name for messages, and the four
// basic operations.
#pragma once

#include "halfgrad/precision/rounding.h"
#include "tests/precision/oracles.h"

namespace hg::testing {

inline constexpr int kModeCount = 5;
inline constexpr precision::Rounding kModes[kModeCount] = {
    precision::Rounding::kNearestEven, precision::Rounding::kNearestAway, precision::Rounding::kTowardZero,
    precision::Rounding::kUp, precision::Rounding::kDown};
inline constexpr precision::oracle::ExactMode kExactModes[kModeCount] = {
    precision::oracle::ExactMode::kNearestEven, precision::oracle::ExactMode::kNearestAway,
    precision::oracle::ExactMode::kTowardZero, precision::oracle::ExactMode::kUp, precision::oracle::ExactMode::kDown};
inline constexpr const char* kModeNames[kModeCount] = {"nearest-even", "nearest-away", "toward-zero", "up", "down"};

enum Op { kAdd, kSub, kMul, kDiv, kOpCount };
inline constexpr const char* kOpNames[kOpCount] = {"+", "-", "*", "/"};

}  // namespace hg::testing
