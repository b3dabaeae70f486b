// MasterWeights: f32 copies of a model's low-precision parameters, the optimizer's real
// weights in fp16 "O2" training (Micikevicius et al. 2018, section 3.1). An f16 weight cannot
// hold an update smaller than half its ulp (1 + 1e-4 rounds back to 1); the f32 master
// accumulates such updates until they cross a rounding boundary of the f16 copy.
//   after backward:  copy_grads_to_masters()  (f16 grads widened exactly into f32 master grads)
//   optimizer step on the masters (unscaled, clipped there)
//   after the step:  copy_step_to_model()  (masters rounded once into the f16 parameters)
// A row-sparse gradient (autograd/sparse_rows.h) stays row-sparse on the master, and after the
// step only its rows are copied back: the optimizer updates no others (optimizer.h).
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "autograd/tensor.h"

namespace hg::optim {

class MasterWeights {
 public:
  // One f32 master per model parameter, with the parameter's name.
  explicit MasterWeights(std::vector<Tensor> model_params);

  const std::vector<Tensor>& masters() const { return masters_; }
  const std::vector<Tensor>& model_params() const { return model_; }

  void copy_grads_to_masters();  // and drops the model's gradients
  // After an optimizer step on those gradients: rounds into the model what the step can have
  // changed -- every element of a parameter without a row-sparse gradient, the gradient's rows
  // of one with.
  void copy_step_to_model();
  // Rounds every element of every master into the model (after masters were set by other means,
  // e.g. loaded from a checkpoint).
  void copy_masters_to_model();

 private:
  std::vector<Tensor> model_, masters_;
  // Per parameter, the rows of the row-sparse gradient last copied to its master (the rows
  // copy_step_to_model() copies back), or nullopt: every element.
  std::vector<std::optional<std::vector<int64_t>>> sparse_rows_;
};

}  // namespace hg::optim
