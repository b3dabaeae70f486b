// MasterWeights: f32 copies of a model's low-precision parameters, the optimizer's real weights in
// fp16 O2 training (Micikevicius et al. 2018, section 3.1): gradients widened into the masters
// after backward, the masters rounded once into the model after each step. Row-sparse gradients
// and the sequence: docs/design_notes.md#masterweights.
#pragma once

#include <cstdint>
#include <vector>

#include "halfgrad/autograd/tensor.h"

namespace hg::optim {

class MasterWeights {
 public:
  // One f32 master per model parameter, with the parameter's name.
  explicit MasterWeights(std::vector<Tensor> model_params);

  const std::vector<Tensor>& masters() const { return masters_; }
  const std::vector<Tensor>& model_params() const { return model_; }

  void copy_grads_to_masters();  // and drops the model's gradients
  // After an optimizer step on the masters' gradients (before they are zeroed): rounds into the
  // model what the step can have changed -- every element of a parameter whose master has no
  // row-sparse gradient, the gradient's rows of one that has.
  void copy_step_to_model();
  // Rounds every element of every master into the model (after masters were set by other means,
  // e.g. loaded from a checkpoint).
  void copy_masters_to_model();

 private:
  std::vector<Tensor> model_, masters_;
};

}  // namespace hg::optim
