#include "halfgrad/train/recipe_warnings.h"

#include <cmath>
#include <cstdio>

namespace hg::train {

std::string warmup_warning(int64_t warmup_steps, int64_t max_steps) {
  if (max_steps <= 0 || warmup_steps < max_steps) return "";
  char text[256];
  std::snprintf(text, sizeof text,
                "the warmup (%lld steps) covers all %lld optimizer steps: the learning rate never reaches its "
                "peak; give --warmup-ratio (a share of the steps) or fewer --warmup-steps",
                static_cast<long long>(warmup_steps), static_cast<long long>(max_steps));
  return text;
}

std::string stalled_loss_warning(double epoch_loss, int64_t classes, int64_t steps, int64_t steps_per_epoch) {
  if (classes < 2 || !std::isfinite(epoch_loss)) return "";
  const double uniform = std::log(double(classes));
  if (epoch_loss < (1 - kStalledLossShare) * uniform) return "";
  char text[384];
  std::snprintf(text, sizeof text,
                "the last epoch's train loss %.4f is still within %.0f%% of ln(%lld) = %.4f, the loss of a "
                "uniform guess: the model has not learned. The run had %lld optimizer steps (%lld an epoch); "
                "give more --epochs, a smaller --batch-size or another --learning-rate",
                epoch_loss, 100 * kStalledLossShare, static_cast<long long>(classes), uniform,
                static_cast<long long>(steps), static_cast<long long>(steps_per_epoch));
  return text;
}

}  // namespace hg::train
