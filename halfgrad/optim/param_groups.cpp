// decay_groups: split by dimensionality.
#include "halfgrad/optim/param_groups.h"

namespace hg::optim {

std::vector<ParamGroup> decay_groups(const nn::NamedTensors& params, float lr, float weight_decay) {
  ParamGroup decay{{}, lr, weight_decay}, no_decay{{}, lr, 0.0f};
  for (const auto& [name, tensor] : params) (tensor.ndim() >= 2 ? decay : no_decay).params.push_back(tensor);
  return {decay, no_decay};
}

}  // namespace hg::optim
