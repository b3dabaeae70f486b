// Adam and AdamW, exactly as torch.optim (non-amsgrad, non-fused):
//   Adam:  g += wd p (L2);                 AdamW: p *= 1 - lr wd (decoupled, Loshchilov & Hutter)
//   m = b1 m + (1 - b1) g;  v = b2 v + (1 - b2) g^2
//   p -= (lr / (1 - b1^t)) m / (sqrt(v) / sqrt(1 - b2^t) + eps)
#pragma once

#include "halfgrad/optim/optimizer.h"

namespace hg::optim {

struct AdamOptions {
  float beta1 = 0.9f, beta2 = 0.999f;
  float eps = 1e-8f;
  bool decoupled_weight_decay = false;  // true: AdamW
};

class Adam : public Optimizer {
 public:
  Adam(std::vector<ParamGroup> groups, AdamOptions options = {});

 private:
  void update(std::vector<float>& p, const std::vector<float>& g, const ParamGroup& group,
              std::map<std::string, std::vector<float>>& state, int64_t step) override;
  nlohmann::json hyperparameters() const override;
  std::vector<std::string> state_names(const ParamGroup&) const override { return {"exp_avg", "exp_avg_sq"}; }
  AdamOptions options_;
};

// torch.optim.AdamW (its default weight_decay is 0.01: set it on the groups).
class AdamW : public Adam {
 public:
  AdamW(std::vector<ParamGroup> groups, AdamOptions options = {}) : Adam(std::move(groups), with_decoupled(options)) {}

 private:
  static AdamOptions with_decoupled(AdamOptions o) {
    o.decoupled_weight_decay = true;
    return o;
  }
};

}  // namespace hg::optim
