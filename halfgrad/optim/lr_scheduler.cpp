// The schedule factors, written as Hugging Face's lr_lambda functions.
#include "halfgrad/optim/lr_scheduler.h"

#include <algorithm>
#include <cmath>
#include <numbers>

#include "halfgrad/autograd/json_read.h"
#include "halfgrad/base/error.h"

namespace hg::optim {

LrScheduler::LrScheduler(Optimizer& optimizer, Schedule schedule, int64_t warmup_steps, int64_t total_steps)
    : optimizer_(optimizer), schedule_(schedule), warmup_(warmup_steps), total_(total_steps) {
  check(warmup_steps >= 0 && total_steps >= 0, "LrScheduler: warmup_steps and total_steps must be >= 0");
  for (const ParamGroup& g : optimizer.param_groups()) base_lrs_.push_back(g.lr);
  apply();
}

float LrScheduler::factor(int64_t step) const {
  if (step < warmup_) return float(step) / float(std::max<int64_t>(1, warmup_));
  if (schedule_ == Schedule::kConstant) return 1.0f;
  if (schedule_ == Schedule::kLinear) {
    return std::max(0.0f, float(total_ - step) / float(std::max<int64_t>(1, total_ - warmup_)));
  }
  const double progress = double(step - warmup_) / double(std::max<int64_t>(1, total_ - warmup_));
  return float(std::max(0.0, 0.5 * (1.0 + std::cos(std::numbers::pi * std::min(progress, 1.0)))));
}

void LrScheduler::apply() {
  auto& groups = optimizer_.param_groups();
  for (size_t i = 0; i < groups.size(); ++i) groups[i].lr = base_lrs_[i] * factor(step_);
}

void LrScheduler::step() {
  ++step_;
  apply();
}

float LrScheduler::last_lr() const {
  return optimizer_.param_groups().empty() ? 0.0f : optimizer_.param_groups()[0].lr;
}

nlohmann::json LrScheduler::state_dict() const {
  return {{"schedule", std::string(kScheduleNames.name(schedule_))},
          {"warmup_steps", warmup_},
          {"total_steps", total_},
          {"step", step_},
          {"base_lrs", base_lrs_}};
}

void LrScheduler::load_state_dict(const nlohmann::json& state) {
  schedule_ = kScheduleNames.parse(state.at("schedule").get<std::string>(), "scheduler state: schedule");
  json_read::read(state.at("warmup_steps"), "scheduler state: key 'warmup_steps'", warmup_);
  json_read::read(state.at("total_steps"), "scheduler state: key 'total_steps'", total_);
  json_read::read(state.at("step"), "scheduler state: key 'step'", step_);
  base_lrs_ = state.at("base_lrs").get<std::vector<float>>();
  check(base_lrs_.size() == optimizer_.param_groups().size(), "scheduler state: ", base_lrs_.size(),
        " groups saved, the optimizer has ", optimizer_.param_groups().size());
  apply();
}

}  // namespace hg::optim
