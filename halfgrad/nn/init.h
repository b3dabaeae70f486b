// How layers initialise their parameters, from a seeded Generator so a model is reproducible.
//   kTorchDefault: what torch.nn does: Linear weight and bias ~ U(-1/sqrt(in), 1/sqrt(in))
//     (kaiming_uniform with a = sqrt(5)), Embedding ~ N(0, 1), LayerNorm weight 1, bias 0.
//   kNormal: GPT-2 style: Linear and Embedding weights ~ N(0, std), biases 0, LayerNorm 1/0
//     (what bench/torch_train.py uses, std = 0.02).
#pragma once

#include "halfgrad/autograd/generator.h"

namespace hg::nn {

struct Init {
  enum class Scheme { kTorchDefault, kNormal } scheme = Scheme::kNormal;
  float std = 0.02f;
  Generator* gen = nullptr;  // required: every layer draws from it in construction order
};

}  // namespace hg::nn
