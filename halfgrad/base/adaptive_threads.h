// AdaptiveThreads: the OpenMP team size for each training step (`halfgrad train --threads auto`),
// chosen by timing steps at the full team and at one thread, and probed again as the load changes;
// safe because no result depends on the team size. It is driven by the durations it is fed, so a
// test replays any sequence. Why, and the policy: docs/design_notes.md#adaptivethreads.
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
