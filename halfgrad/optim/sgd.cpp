// torch.optim.SGD's update, per element in f32.
#include "halfgrad/optim/sgd.h"

#include "halfgrad/base/error.h"

namespace hg::optim {

SGD::SGD(std::vector<ParamGroup> groups, SGDOptions options) : Optimizer(std::move(groups)), options_(options) {
  check(!options.nesterov || (options.momentum > 0 && options.dampening == 0),
        "SGD: nesterov needs momentum > 0 and dampening 0");
}

void SGD::update(std::vector<float>& p, const std::vector<float>& g, const ParamGroup& group,
                 std::map<std::string, std::vector<float>>& state, int64_t step) {
  const float lr = group.lr, wd = group.weight_decay, mu = options_.momentum;
  // The parameter's first update (torch: no momentum_buffer yet); a row-sparse update finds the
  // buffer already created, zero (Optimizer::state_names).
  const bool first = step == 1;
  std::vector<float>& buf = state["momentum_buffer"];
  if (mu != 0.0f && buf.size() != p.size()) buf.assign(p.size(), 0.0f);
  for (size_t i = 0; i < p.size(); ++i) {
    float d = g[i] + wd * p[i];
    if (mu != 0.0f) {
      buf[i] = first ? d : mu * buf[i] + (1.0f - options_.dampening) * d;
      d = options_.nesterov ? d + mu * buf[i] : buf[i];
    }
    p[i] -= lr * d;
  }
  if (mu == 0.0f) state.erase("momentum_buffer");
}

nlohmann::json SGD::hyperparameters() const {
  return {{"optimizer", "SGD"},
          {"momentum", options_.momentum},
          {"dampening", options_.dampening},
          {"nesterov", options_.nesterov}};
}

}  // namespace hg::optim
