// GradScaler: dynamic loss scaling with torch.cuda.amp.GradScaler's algorithm and defaults
// (Micikevicius et al. 2018, section 3.2), the scale clamped to [min_scale, max_scale]; also a
// static mode, a pass-through when disabled, a history of every step and health_warning().
// The update rule: docs/design_notes.md#gradscaler.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "halfgrad/autograd/tensor.h"
#include "halfgrad/optim/optimizer.h"

namespace hg::optim {

struct GradScalerOptions {
  float init_scale = 65536.0f;  // 2^16
  float growth_factor = 2.0f;
  float backoff_factor = 0.5f;
  int64_t growth_interval = 2000;
  bool enabled = true;
  bool dynamic = true;  // false: the scale stays init_scale (static loss scaling)
  // Bounds of the scale. Past 2^40 any nonzero f16 gradient (>= 2^-24) scales to >= 2^16, above
  // f16's max 65504, so every step would overflow; below 2^-40 any f16 gradient (<= 65504 <
  // 2^16) scales under 2^-24 and flushes to zero. Neither can train, so the scale stops there.
  float min_scale = 0x1p-40f;
  float max_scale = 0x1p40f;
};

// When health_warning() speaks up: the share of skipped steps it tolerates, judged once at
// least min_steps steps were taken (dynamic scaling normally skips a few steps at the start,
// while the scale backs off from 2^16, and one in growth_interval afterwards).
struct ScalerHealthOptions {
  double max_skipped_share = 0.05;
  int64_t min_steps = 100;
};

// One optimizer step as the scaler saw it.
struct ScalerStep {
  float scale = 0;                 // the scale this step's loss was multiplied by
  bool skipped = false;            // gradients held inf/NaN: the optimizer did not step
  std::string first_nonfinite;     // name of the first parameter whose gradient held inf/NaN
  int64_t zero_grad_elements = 0;  // gradient elements that were exactly zero (after unscaling)
  int64_t grad_elements = 0;
};

class GradScaler {
 public:
  explicit GradScaler(GradScalerOptions options = {});

  // loss * scale in f32 (a recorded op, so backward seeds the scaled gradient).
  Tensor scale(const Tensor& loss) const;
  // Divides the optimizer's gradients (dense, or a row-sparse gradient's stored rows) by the
  // scale (the inverse computed in double, rounded to f32, as torch) and records whether any
  // was inf/NaN. Throws if already called since the last update(), or if a gradient is f16
  // (fp16 parameters need f32 master weights: torch's "Attempting to unscale FP16
  // gradients."), unless allow_fp16 (pure fp16 training).
  void unscale(Optimizer& optimizer, bool allow_fp16 = false);
  // Unscales if not done yet, then steps the optimizer unless a gradient was inf/NaN.
  // Returns whether the optimizer stepped.
  bool step(Optimizer& optimizer, bool allow_fp16 = false);
  // Adjusts the scale for the next step (or sets it to new_scale) and closes the step.
  void update(std::optional<float> new_scale = std::nullopt);

  float get_scale() const { return enabled_ ? scale_ : 1.0f; }
  bool is_enabled() const { return enabled_; }
  bool found_inf() const { return found_inf_; }
  int64_t growth_tracker() const { return growth_tracker_; }
  const std::vector<ScalerStep>& history() const { return history_; }
  int64_t skipped_steps() const { return skipped_; }
  // Empty while the run is healthy; otherwise one line saying what went wrong -- the scale fell
  // below 1 (gradients overflow even unscaled), or more than max_skipped_share of the steps
  // were skipped -- naming the parameter whose gradient was first inf/NaN in the latest
  // skipped step.
  std::string health_warning(const ScalerHealthOptions& options = {}) const;

  // torch's five keys: scale, growth_factor, backoff_factor, growth_interval, _growth_tracker.
  nlohmann::json state_dict() const;
  void load_state_dict(const nlohmann::json& state);

 private:
  GradScalerOptions options_;
  bool enabled_;
  float scale_;
  int64_t growth_tracker_ = 0;
  int64_t skipped_ = 0;
  float lowest_scale_;
  std::string last_nonfinite_;  // ScalerStep::first_nonfinite of the latest skipped step
  // Per-step state, reset by update().
  bool unscaled_ = false, stepped_ = false, found_inf_ = false;
  ScalerStep current_;
  std::vector<ScalerStep> history_;
};

}  // namespace hg::optim
