// AdaptiveThreads: the OpenMP team size for each training step, chosen by timing the steps
// (`halfgrad train --threads auto`).
//
// Why measure: a quiet 2-core machine runs a step 1.5-1.7x faster on 2 threads than on 1, but
// with another program on the second core 2 threads are slower than 1 (0.87-0.98x: a step has
// hundreds of short parallel regions, and each one's end waits for the worker the other program
// has preempted). No fixed count is right on a shared machine, and the load changes during a run.
// Why it is safe: halfgrad's results never depend on the team size (every GEMM element is one
// chain, reductions run in fixed blocks: docs/performance.md), so the team can change between any
// two steps without changing a bit.
//
// The policy, between two candidates, `max` (the team the program would otherwise use) and 1:
//   1. warm-up: the first `warmup_steps` run at max, untimed (allocator growth, page faults,
//      libgomp starting its threads);
//   2. probe: `probe_steps` steps at each size, interleaved (max, 1, max, 1, ...) so both see the
//      same machine load; the size with the lower median step time wins, but max must be more
//      than `margin` faster to win: at equal speed one thread does the work for half the CPU time
//      and leaves the other core to the program that is using it;
//   3. run at the winner, then probe again after `reprobe_steps` steps, so a machine that
//      becomes busy or quiet mid-run is followed. A probe that confirms the winner doubles the
//      steps until the next (up to `max_reprobe_steps`), one that changes it resets them: on a
//      steady machine the probes' slow steps cost little, after a change they come often. Once
//      `reprobe_seconds` of steps have run the next probe comes sooner, but never before
//      `reprobe_steps` steps: a probe's 3 steps at the slower size cost 1.5 steps' time when that
//      size is 1.5x slower, and one every 50 steps keeps that under 3% however long a step is.
// With max == 1 there is nothing to choose: every step runs at 1 and omp_set_num_threads is
// never called.
//
// The logic is driven by the durations it is fed (after_step), never by a clock of its own, so a
// test can replay any sequence of step times; before_step is its one call into OpenMP.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace hg {

struct AdaptiveThreadsOptions {
  int64_t warmup_steps = 2;         // untimed steps at max first
  int64_t probe_steps = 3;          // timed steps at each size per probe
  int64_t reprobe_steps = 50;       // steps at the winner before the next probe (after a change)
  int64_t max_reprobe_steps = 800;  // the most it doubles to while probes confirm the winner
  double reprobe_seconds = 10;      // ... and past reprobe_steps, no more than this much step time
  double margin = 0.03;             // max wins only when its median is below (1 - margin) x 1's
};

class AdaptiveThreads {
 public:
  // One probe's outcome: the median step time at each size and the size chosen.
  struct Decision {
    int64_t step = 0;  // the steps fed so far when it was made
    double seconds_max = 0, seconds_one = 0;
    int team = 1;
  };

  // `max_threads`: the larger candidate, at least 1 (the team the program would use unadapted,
  // usually omp_get_max_threads()). Throws hg::Error for a bad option, naming it.
  explicit AdaptiveThreads(int max_threads, AdaptiveThreadsOptions options = {});

  // The team size for the coming step: what before_step sets. Pure; changes only in after_step.
  int team() const;
  // Sets the team for the coming step (omp_set_num_threads, unless max is 1) and returns it.
  int before_step();
  // The coming step ran in `seconds` (its compute only) at team().
  void after_step(double seconds);

  int max_threads() const { return max_; }
  // The size the last probe chose (max before the first probe): the team to keep after training.
  int best() const { return decisions_.empty() ? max_ : decisions_.back().team; }
  // How many steps ran at each size (sizes never run are absent).
  const std::map<int, int64_t>& steps_per_team() const { return steps_per_team_; }
  const std::vector<Decision>& decisions() const { return decisions_; }
  // For logs: "auto (2: 780 steps, 1: 45 steps)", larger sizes first ("auto (no steps)" before any).
  std::string summary() const;

 private:
  enum class Phase { kWarmup, kProbe, kRun };
  void decide();

  int max_;
  AdaptiveThreadsOptions options_;
  Phase phase_;
  int64_t steps_ = 0, phase_steps_ = 0;  // steps fed in all, and in the current phase
  double phase_seconds_ = 0;             // step time fed in the current phase
  int64_t interval_;                     // steps at the winner before the next probe
  std::vector<double> probe_max_, probe_one_;
  std::map<int, int64_t> steps_per_team_;
  std::vector<Decision> decisions_;
};

}  // namespace hg
