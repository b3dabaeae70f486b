// decay_groups: split by dimensionality.
#include "halfgrad/optim/param_groups.h"

#include "halfgrad/base/error.h"

namespace hg::optim {

std::vector<ParamGroup> decay_groups(const nn::NamedTensors& params, float lr, float weight_decay,
                                     const std::optional<OwnGroup>& own) {
  ParamGroup decay{{}, lr, weight_decay}, no_decay{{}, lr, 0.0f};
  std::optional<ParamGroup> separate;
  for (const auto& [name, tensor] : params) {
    if (own && name == own->name)
      separate = ParamGroup{{tensor}, own->lr, own->weight_decay};
    else
      (tensor.ndim() >= 2 ? decay : no_decay).params.push_back(tensor);
  }
  if (!own) return {decay, no_decay};
  check(separate.has_value(), "decay_groups: no parameter named '", own->name, "'");
  return {decay, no_decay, *separate};
}

}  // namespace hg::optim
