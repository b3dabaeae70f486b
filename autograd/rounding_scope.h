// RoundingScope: how every rounding to f16/bf16 inside halfgrad's ops is done while the guard
// lives: round-to-nearest-even (the default, as GPUs do), flush-to-zero of subnormal results
// (GPU modes without gradual underflow), or stochastic rounding from a seed. A whole training
// run can be repeated under each to see what subnormals and rounding bias contribute.
#pragma once

#include <cstdint>

#include "precision/rounding.h"

namespace hg {

class RoundingScope {
 public:
  explicit RoundingScope(precision::RoundingOptions options, uint64_t seed = 0);
  ~RoundingScope();
  RoundingScope(const RoundingScope&) = delete;
  RoundingScope& operator=(const RoundingScope&) = delete;

  static RoundingScope nearest_even() { return RoundingScope({}); }
  static RoundingScope flush_to_zero() { return RoundingScope({.flush_subnormals = true}); }
  static RoundingScope stochastic(uint64_t seed) {
    return RoundingScope({.mode = precision::Rounding::kStochastic}, seed);
  }

 private:
  precision::RoundingOptions previous_options_;
  uint64_t previous_seed_;
  uint64_t previous_events_;
};

// The rounding in force on this thread.
const precision::RoundingOptions& current_rounding();
uint64_t current_rounding_seed();
// Reserves `n` consecutive stochastic-rounding event numbers and returns the first, so that
// every rounded element of a run draws different, reproducible random bits.
uint64_t reserve_rounding_events(uint64_t n);

}  // namespace hg
