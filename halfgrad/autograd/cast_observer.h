// CastObserver: while one lives, every rounding of f32 results into an f16/bf16 tensor
// (kernels::store_rounded) also counts what it did (precision::NumericsStats: underflow,
// subnormals, overflow). fp8 casts report to their own observer (fp8_cast.h). Global, at most one
// at a time; the numerics inspector installs it. Details: docs/design_notes.md#castobserver.
#pragma once

#include <mutex>
#include <vector>

#include "halfgrad/precision/numerics_stats.h"

namespace hg {

class CastObserver {
 public:
  CastObserver();  // throws if another CastObserver is installed
  ~CastObserver();
  CastObserver(const CastObserver&) = delete;
  CastObserver& operator=(const CastObserver&) = delete;

  // The counts of every narrowing since construction or the previous take(); resets them.
  precision::NumericsStats take();
  // Merges one narrowing's counts (called by kernels::store_rounded, from any thread).
  void add(const precision::NumericsStats& stats);

 private:
  std::mutex mutex_;
  precision::NumericsStats stats_;
};

// The installed observer, or nullptr (a relaxed atomic load).
CastObserver* cast_observer();

}  // namespace hg
