// The usual grouping for transformer training (Hugging Face Trainer, nanoGPT): weight decay on
// matrices (Linear and Embedding weights), none on biases and LayerNorm weights (1-D tensors).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "halfgrad/nn/module.h"
#include "halfgrad/optim/optimizer.h"

namespace hg::optim {

// One parameter, by name, with a learning rate and weight decay of its own (e.g. the token table).
struct OwnGroup {
  std::string name;
  float lr, weight_decay;
};

// Group 0: parameters with >= 2 dims, decayed; group 1: 1-D parameters, weight_decay 0. With
// `own`, the parameter it names leaves them for a group 2 of its own (an hg::Error if no
// parameter has that name).
std::vector<ParamGroup> decay_groups(const nn::NamedTensors& params, float lr, float weight_decay,
                                     const std::optional<OwnGroup>& own = std::nullopt);

}  // namespace hg::optim
