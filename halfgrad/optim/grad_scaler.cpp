// GradScaler: torch.cuda.amp.GradScaler's state machine, plus a per-step history.
#include "halfgrad/optim/grad_scaler.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <sstream>

#include "halfgrad/autograd/json_read.h"
#include "halfgrad/autograd/ops/elementwise.h"
#include "halfgrad/autograd/ops/shape_ops.h"
#include "halfgrad/base/error.h"

namespace hg::optim {

GradScaler::GradScaler(GradScalerOptions options)
    : options_(options), enabled_(options.enabled), scale_(options.init_scale), lowest_scale_(options.init_scale) {
  check(options.min_scale > 0 && options.min_scale <= options.init_scale && options.init_scale <= options.max_scale &&
            std::isfinite(options.max_scale),
        "GradScaler: need 0 < min_scale <= init_scale <= max_scale < inf, got ", options.min_scale, ", ",
        options.init_scale, ", ", options.max_scale);
  check(options.growth_factor > 1, "GradScaler: growth_factor must be > 1, got ", options.growth_factor);
  check(options.backoff_factor > 0 && options.backoff_factor < 1, "GradScaler: backoff_factor must be in (0, 1), got ",
        options.backoff_factor);
  check(options.growth_interval > 0, "GradScaler: growth_interval must be > 0, got ", options.growth_interval);
}

Tensor GradScaler::scale(const Tensor& loss) const {
  if (!enabled_) return loss;
  return mul_scalar(cast(loss, DType::f32), scale_);
}

void GradScaler::unscale(Optimizer& optimizer, bool allow_fp16) {
  if (!enabled_) return;
  check(!unscaled_, "unscale() has already been called on this optimizer since the last update()");
  check(!stepped_, "unscale() is being called after step()");
  const float inv_scale = float(1.0 / double(scale_));
  current_ = {scale_, false, "", 0, 0};
  for (const Tensor& p : optimizer.parameters()) {  // check all before changing any
    check(allow_fp16 || !p.has_grad() || p.grad_values().dtype() != DType::f16,
          "Attempting to unscale FP16 gradients (parameter '", p.name(),
          "'): keep f32 master weights (fp16 O2) or f32 parameters (O1)");
  }
  for (const Tensor& p : optimizer.parameters()) {
    if (!p.has_grad()) continue;
    const Tensor g = p.grad_values();  // a row-sparse gradient's stored rows: the rest are zeros
    std::vector<float> values = g.to_vector();
    // Counts, not an early exit or a short-circuit &&, so that the loop vectorises.
    int64_t nonfinite = 0, zeros = 0;
    for (float& v : values) {
      nonfinite += !(std::fabs(v) <= std::numeric_limits<float>::max());  // inf, and NaN (unordered)
      v *= inv_scale;
      zeros += v == 0.0f;
    }
    const bool finite = nonfinite == 0;
    current_.zero_grad_elements += zeros;
    // The counts are the dense gradient's: the rows a sparse one does not store count as zeros.
    current_.zero_grad_elements += p.numel() - g.numel();
    current_.grad_elements += p.numel();
    if (!finite && !found_inf_) current_.first_nonfinite = p.name();
    found_inf_ = found_inf_ || !finite;
    g.assign_nearest(values);
  }
  current_.skipped = found_inf_;
  unscaled_ = true;
}

bool GradScaler::step(Optimizer& optimizer, bool allow_fp16) {
  if (!enabled_) {
    optimizer.step();
    return true;
  }
  check(!stepped_, "step() has already been called since the last update()");
  if (!unscaled_) unscale(optimizer, allow_fp16);
  stepped_ = true;
  if (found_inf_) return false;
  optimizer.step();
  return true;
}

void GradScaler::update(std::optional<float> new_scale) {
  if (!enabled_) return;
  if (!unscaled_) current_ = {scale_, found_inf_, "", 0, 0};
  history_.push_back(current_);
  if (current_.skipped) {
    ++skipped_;
    last_nonfinite_ = current_.first_nonfinite;
  }
  if (new_scale) {
    check(*new_scale > 0 && std::isfinite(*new_scale), "GradScaler::update: new scale must be finite and > 0, got ",
          *new_scale);
    scale_ = std::clamp(*new_scale, options_.min_scale, options_.max_scale);
  } else if (options_.dynamic) {
    if (found_inf_) {
      scale_ = std::max(scale_ * options_.backoff_factor, options_.min_scale);
      growth_tracker_ = 0;
    } else if (++growth_tracker_ == options_.growth_interval) {
      scale_ = std::min(scale_ * options_.growth_factor, options_.max_scale);
      growth_tracker_ = 0;
    }
  }
  lowest_scale_ = std::min(lowest_scale_, scale_);
  unscaled_ = stepped_ = found_inf_ = false;
}

std::string GradScaler::health_warning(const ScalerHealthOptions& options) const {
  if (!enabled_) return "";
  const int64_t steps = int64_t(history_.size());
  std::ostringstream out;
  if (lowest_scale_ < 1.0f && lowest_scale_ < options_.init_scale) {  // a static scale below 1 is a choice
    out << "the loss scale fell to " << lowest_scale_ << " (below 1: gradients overflow even unscaled)";
  } else if (steps >= options.min_steps && double(skipped_) > options.max_skipped_share * double(steps)) {
    out << "the loss scaler skipped " << skipped_ << " of " << steps << " steps (more than "
        << 100 * options.max_skipped_share << "%)";
  } else {
    return "";
  }
  if (!last_nonfinite_.empty()) out << "; latest skipped step: first inf/NaN gradient in '" << last_nonfinite_ << "'";
  return out.str();
}

nlohmann::json GradScaler::state_dict() const {
  if (!enabled_) return nlohmann::json::object();  // torch returns {} when disabled
  return {{"scale", scale_},
          {"growth_factor", options_.growth_factor},
          {"backoff_factor", options_.backoff_factor},
          {"growth_interval", options_.growth_interval},
          {"_growth_tracker", growth_tracker_}};
}

void GradScaler::load_state_dict(const nlohmann::json& state) {
  if (!enabled_) return;
  check(state.is_object() && !state.empty(),
        "GradScaler::load_state_dict: the state is empty (saved from a disabled scaler)");
  try {
    const std::string at = "GradScaler::load_state_dict: key";
    const float scale = json_read::as<float>(state.at("scale"), at + " 'scale'");
    check(scale > 0 && std::isfinite(scale), "GradScaler::load_state_dict: scale must be finite and > 0, got ", scale);
    scale_ = std::clamp(scale, options_.min_scale, options_.max_scale);
    json_read::read(state.at("growth_factor"), at + " 'growth_factor'", options_.growth_factor);
    json_read::read(state.at("backoff_factor"), at + " 'backoff_factor'", options_.backoff_factor);
    json_read::read(state.at("growth_interval"), at + " 'growth_interval'", options_.growth_interval);
    json_read::read(state.at("_growth_tracker"), at + " '_growth_tracker'", growth_tracker_);
  } catch (const nlohmann::json::exception& e) {
    fail("GradScaler::load_state_dict: ", e.what());
  }
}

}  // namespace hg::optim
