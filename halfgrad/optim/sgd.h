// SGD with momentum, dampening, Nesterov and L2 weight decay, exactly as torch.optim.SGD:
//   d = g + wd p;  buf = momentum buf + (1 - dampening) d  (buf = d on the first step);
//   d = nesterov ? d + momentum buf : buf;  p -= lr d
#pragma once

#include "halfgrad/optim/optimizer.h"

namespace hg::optim {

struct SGDOptions {
  float momentum = 0.0f;
  float dampening = 0.0f;
  bool nesterov = false;
};

class SGD : public Optimizer {
 public:
  SGD(std::vector<ParamGroup> groups, SGDOptions options = {});

 private:
  void update(std::vector<float>& p, const std::vector<float>& g, const ParamGroup& group,
              std::map<std::string, std::vector<float>>& state, int64_t step) override;
  nlohmann::json hyperparameters() const override;
  std::vector<std::string> state_names(const ParamGroup&) const override {
    return options_.momentum != 0.0f ? std::vector<std::string>{"momentum_buffer"} : std::vector<std::string>{};
  }
  SGDOptions options_;
};

}  // namespace hg::optim
