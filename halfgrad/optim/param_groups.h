// The usual grouping for transformer training (Hugging Face Trainer, nanoGPT): weight decay on
// matrices (Linear and Embedding weights), none on biases and LayerNorm weights (1-D tensors).
#pragma once

#include <vector>

#include "halfgrad/nn/module.h"
#include "halfgrad/optim/optimizer.h"

namespace hg::optim {

// Group 0: parameters with >= 2 dims, decayed; group 1: 1-D parameters, weight_decay 0.
std::vector<ParamGroup> decay_groups(const nn::NamedTensors& params, float lr, float weight_decay);

}  // namespace hg::optim
