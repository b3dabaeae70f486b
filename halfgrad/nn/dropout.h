// Dropout with probability p while training, identity in eval mode. Masks come from a
// Generator shared by the whole model, whose (seed, offset) a checkpoint saves.
#pragma once

#include <memory>

#include "halfgrad/autograd/generator.h"
#include "halfgrad/nn/module.h"

namespace hg::nn {

class Dropout : public Module {
 public:
  Dropout(float p, std::shared_ptr<Generator> gen);
  Tensor forward(const Tensor& x) const;

  float p;
  std::shared_ptr<Generator> gen;
};

}  // namespace hg::nn
