// torch.optim.Adam/AdamW's update (single-tensor path), per element in f32; the bias
// corrections are computed in double from the step count, as torch does on the host.
#include "halfgrad/optim/adam.h"

#include <cmath>

#include "halfgrad/base/error.h"
#include "halfgrad/base/parallel.h"

namespace hg::optim {

Adam::Adam(std::vector<ParamGroup> groups, AdamOptions options) : Optimizer(std::move(groups)), options_(options) {
  check(options.beta1 >= 0 && options.beta1 < 1 && options.beta2 >= 0 && options.beta2 < 1,
        "Adam: betas must be in [0, 1), got ", options.beta1, ", ", options.beta2);
  check(options.eps >= 0, "Adam: eps must be >= 0, got ", options.eps);
}

void Adam::update(std::vector<float>& p, const std::vector<float>& g, const ParamGroup& group,
                  std::map<std::string, std::vector<float>>& state, int64_t step) {
  std::vector<float>& m = state["exp_avg"];
  std::vector<float>& v = state["exp_avg_sq"];
  if (m.empty()) {
    m.assign(p.size(), 0.0f);
    v.assign(p.size(), 0.0f);
  }
  const float lr = group.lr, wd = group.weight_decay, b1 = options_.beta1, b2 = options_.beta2;
  const double bias1 = 1.0 - std::pow(double(b1), double(step));
  const double bias2 = 1.0 - std::pow(double(b2), double(step));
  const float step_size = float(double(lr) / bias1);
  const float bias2_sqrt = float(std::sqrt(bias2));
  const float decay = float(1.0 - double(lr) * double(wd));  // AdamW's factor, as torch (host double)
  const bool decoupled = options_.decoupled_weight_decay;
  const float eps = options_.eps;
  const int64_t n = int64_t(p.size());
  // Elementwise, so any split between threads gives the same bits. Plain pointers and local
  // constants (nothing the stores could change) let GCC vectorise the loop (CMakeLists.txt builds
  // this file without errno for the sqrt); every element's operations stay as written.
  float* __restrict pw = p.data();
  float* __restrict pm = m.data();
  float* __restrict pv = v.data();
  const float* __restrict pg = g.data();
  maybe_parallel(use_team(n, kParallelElements), [=] {
#pragma omp for schedule(static)
    for (int64_t i = 0; i < n; ++i) {
      float grad = pg[i];
      float w = pw[i];
      if (decoupled) {
        w *= decay;
      } else {
        grad += wd * w;
      }
      float mi = pm[i], vi = pv[i];
      mi += (1.0f - b1) * (grad - mi);           // torch: exp_avg.lerp_(grad, 1 - beta1)
      vi = vi * b2 + (1.0f - b2) * grad * grad;  // exp_avg_sq.mul_(b2).addcmul_(g, g, 1 - b2)
      w -= step_size * mi / (std::sqrt(vi) / bias2_sqrt + eps);
      pw[i] = w;
      pm[i] = mi;
      pv[i] = vi;
    }
  });
}

nlohmann::json Adam::hyperparameters() const {
  return {{"optimizer", options_.decoupled_weight_decay ? "AdamW" : "Adam"},
          {"beta1", options_.beta1},
          {"beta2", options_.beta2},
          {"eps", options_.eps}};
}

}  // namespace hg::optim
