// Restricting the Highway targets a benchmark may use, so one machine can time the kernels another
// would run: `--target AVX2` on an AVX-512 CPU runs the AVX2 code paths (the CPU's own
// microarchitecture still: its caches, ports and clock, not an AVX2-only CPU's).
#pragma once

#include <hwy/targets.h>

#include <cstdint>
#include <string>

namespace hg::bench {

// Limits dispatch to the target named (hwy::TargetName: AVX3, AVX2, SSE4, EMU128 ...) and, with
// `and_below`, the weaker targets the CPU supports too. "best" keeps them all. False when the
// target is not compiled in or not supported here.
inline bool restrict_targets(const std::string& name, bool and_below) {
  if (name == "best") return true;
  int64_t chosen = 0;
  for (const int64_t t : hwy::SupportedAndGeneratedTargets()) {
    if (name == hwy::TargetName(t)) chosen = t;
  }
  if (chosen == 0) return false;
  // Highway numbers targets from the best (lowest bit) to the weakest: the weaker ones are the
  // higher bits of hwy::SupportedTargets().
  hwy::SetSupportedTargetsForTest(and_below ? (hwy::SupportedTargets() & ~(chosen - 1)) : chosen);
  return true;
}

}  // namespace hg::bench
