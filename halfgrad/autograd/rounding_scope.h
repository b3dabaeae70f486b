// RoundingScope: how every rounding to f16/bf16 inside halfgrad's ops is done while the guard
// lives: round-to-nearest-even (the default, as GPUs do), flush-to-zero of subnormal results
// (GPU modes without gradual underflow), or stochastic rounding from a seed. A whole training
// run can be repeated under each to see what subnormals and rounding bias contribute.
#pragma once

#include <cstdint>
#include <span>

#include "halfgrad/autograd/tensor.h"
#include "halfgrad/precision/rounding.h"

namespace hg {

class RoundingScope {
 public:
  // Stochastic rounding draws for event numbers first_event, first_event + 1, ... (one per
  // rounded element, in op order on this thread).
  explicit RoundingScope(precision::RoundingOptions options, uint64_t seed = 0, uint64_t first_event = 0);
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

// The one way an op's f32 result is rounded into its output tensor: once, under the scope in
// force where the op runs. The constructor takes that scope's mode and seed, and reserves one
// stochastic-rounding event number per element of `out` (none for f32, which is not rounded), on
// the calling thread; store() may then be called from any thread (OpenMP workers do not see this
// thread's scope), for chunks in any order and split, with the same bits. Values that are not an
// op's result are written with Tensor::assign_nearest instead.
class ScopedRounder {
 public:
  explicit ScopedRounder(Tensor out);
  // Elements [first, first + values.size()) of the output = values rounded once (copied in f32).
  void store(std::span<const float> values, int64_t first = 0) const;
  const Tensor& out() const { return out_; }

 private:
  Tensor out_;
  precision::RoundingOptions rounding_;
  uint64_t seed_, events_;
};

// A new tensor of `shape` and `dtype` holding `values` (an op's f32 result) rounded once under
// the active scope: ScopedRounder over a whole tensor.
Tensor round_scoped(std::span<const float> values, const Shape& shape, DType dtype);

}  // namespace hg
