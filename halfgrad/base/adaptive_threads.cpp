// The team-size policy of adaptive_threads.h: a three-phase state machine fed step times.
#include "halfgrad/base/adaptive_threads.h"

#include <omp.h>

#include <algorithm>
#include <cmath>

#include "halfgrad/base/error.h"
#include "halfgrad/base/median.h"

namespace hg {

AdaptiveThreads::AdaptiveThreads(int max_threads, AdaptiveThreadsOptions options)
    : max_(max_threads), options_(options), phase_(Phase::kWarmup), interval_(options.reprobe_steps) {
  check(max_threads >= 1, "adaptive threads: the largest team must be at least 1 thread, not ", max_threads);
  check(options.warmup_steps >= 0, "adaptive threads: warmup_steps must be >= 0, not ", options.warmup_steps);
  check(options.probe_steps >= 1, "adaptive threads: probe_steps must be >= 1, not ", options.probe_steps);
  check(options.reprobe_steps >= 1, "adaptive threads: reprobe_steps must be >= 1, not ", options.reprobe_steps);
  check(options.max_reprobe_steps >= options.reprobe_steps, "adaptive threads: max_reprobe_steps (",
        options.max_reprobe_steps, ") must be >= reprobe_steps (", options.reprobe_steps, ")");
  check(options.reprobe_seconds > 0, "adaptive threads: reprobe_seconds must be > 0, not ", options.reprobe_seconds);
  check(options.margin >= 0 && options.margin < 1, "adaptive threads: margin must be in [0, 1), not ", options.margin);
  if (options.warmup_steps == 0) phase_ = Phase::kProbe;
}

int AdaptiveThreads::team() const {
  if (max_ == 1) return 1;
  switch (phase_) {
    case Phase::kWarmup:
      return max_;
    case Phase::kProbe:
      return phase_steps_ % 2 == 0 ? max_ : 1;
    case Phase::kRun:
      break;
  }
  return best();
}

int AdaptiveThreads::before_step() {
  const int t = team();
  if (max_ > 1) omp_set_num_threads(t);
  return t;
}

void AdaptiveThreads::after_step(double seconds) {
  check(std::isfinite(seconds) && seconds >= 0, "adaptive threads: a step time must be finite and >= 0, not ", seconds);
  const int t = team();
  ++steps_per_team_[t];
  ++steps_;
  if (max_ == 1) return;
  ++phase_steps_;
  phase_seconds_ += seconds;
  switch (phase_) {
    case Phase::kWarmup:
      if (phase_steps_ >= options_.warmup_steps) {
        phase_ = Phase::kProbe;
        phase_steps_ = 0;
        phase_seconds_ = 0;
      }
      break;
    case Phase::kProbe:
      (t == max_ ? probe_max_ : probe_one_).push_back(seconds);
      if (phase_steps_ >= 2 * options_.probe_steps) decide();
      break;
    case Phase::kRun:
      if (phase_steps_ >= interval_ ||
          (phase_steps_ >= options_.reprobe_steps && phase_seconds_ >= options_.reprobe_seconds)) {
        phase_ = Phase::kProbe;
        phase_steps_ = 0;
        phase_seconds_ = 0;
      }
      break;
  }
}

// The end of a probe: the winner, and how long to run it before the next probe.
void AdaptiveThreads::decide() {
  Decision d{.step = steps_, .seconds_max = median(probe_max_), .seconds_one = median(probe_one_)};
  d.team = d.seconds_max < (1 - options_.margin) * d.seconds_one ? max_ : 1;
  const bool confirmed = !decisions_.empty() && decisions_.back().team == d.team;
  interval_ = confirmed ? std::min(2 * interval_, options_.max_reprobe_steps) : options_.reprobe_steps;
  decisions_.push_back(d);
  probe_max_.clear();
  probe_one_.clear();
  phase_ = Phase::kRun;
  phase_steps_ = 0;
  phase_seconds_ = 0;
}

std::string AdaptiveThreads::summary() const {
  if (steps_per_team_.empty()) return "auto (no steps)";
  std::string out = "auto (";
  for (auto it = steps_per_team_.rbegin(); it != steps_per_team_.rend(); ++it) {
    if (it != steps_per_team_.rbegin()) out += ", ";
    out += std::to_string(it->first) + ": " + std::to_string(it->second) + (it->second == 1 ? " step" : " steps");
  }
  return out + ")";
}

}  // namespace hg
