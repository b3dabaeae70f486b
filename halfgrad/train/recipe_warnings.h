// Warnings about a run's recipe, for runs that would otherwise end quietly with a model that did not
// learn: a schedule that never leaves its warmup, and a training loss still at its starting value
// (ln K for K classes: the loss of a uniform guess, where a freshly initialised model starts).
// The Trainer prints them to stderr and logs them as {"warning": ...}; docs/training.md lists them.
#pragma once

#include <cstdint>
#include <string>

namespace hg::train {

// Non-empty when the warmup covers every step (the learning rate never reaches its peak).
std::string warmup_warning(int64_t warmup_steps, int64_t max_steps);

// Non-empty when `epoch_loss`, the mean training loss of the last epoch, is still within
// kStalledLossShare of ln(classes). `steps` and `steps_per_epoch` go into the advice.
inline constexpr double kStalledLossShare = 0.05;
std::string stalled_loss_warning(double epoch_loss, int64_t classes, int64_t steps, int64_t steps_per_epoch);

}  // namespace hg::train
