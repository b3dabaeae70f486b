// Learning-rate schedules (Hugging Face transformers' get_*_schedule_with_warmup): each group's
// lr is base_lr * factor(step), where step counts optimizer steps taken so far:
//   constant: 1 (after an optional linear warmup)
//   linear:   step / warmup during warmup, then (total - step) / (total - warmup), down to 0
//   cosine:   step / warmup during warmup, then 0.5 (1 + cos(pi progress)), progress in [0, 1]
// Call step() only after the optimizer really stepped (not when the GradScaler skipped).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "halfgrad/base/enum_names.h"
#include "halfgrad/optim/optimizer.h"

namespace hg::optim {

enum class Schedule { kConstant, kLinear, kCosine };

// HF's lr_scheduler_type names (its SchedulerType); constant_with_warmup is read as constant, whose
// warmup is optional here.
inline constexpr EnumNames<Schedule, 3, 1> kScheduleNames{
    {{{Schedule::kConstant, "constant"}, {Schedule::kLinear, "linear"}, {Schedule::kCosine, "cosine"}}},
    {{{Schedule::kConstant, "constant_with_warmup"}}}};

class LrScheduler {
 public:
  LrScheduler(Optimizer& optimizer, Schedule schedule, int64_t warmup_steps, int64_t total_steps);

  float factor(int64_t step) const;
  void step();  // advances one optimizer step and sets every group's lr
  int64_t steps() const { return step_; }
  int64_t warmup_steps() const { return warmup_; }
  float last_lr() const;  // the first group's current lr

  nlohmann::json state_dict() const;
  void load_state_dict(const nlohmann::json& state);

 private:
  void apply();
  Optimizer& optimizer_;
  Schedule schedule_;
  int64_t warmup_, total_, step_ = 0;
  std::vector<float> base_lrs_;
};

}  // namespace hg::optim
