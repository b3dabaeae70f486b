// MasterWeights: f32 copies of a model's low-precision parameters, the optimizer's real
// weights in fp16 "O2" training (Micikevicius et al. 2018, section 3.1). An f16 weight cannot
// hold an update smaller than half its ulp (1 + 1e-4 rounds back to 1); the f32 master
// accumulates such updates until they cross a rounding boundary of the f16 copy.
//   after backward:  copy_grads_to_masters()  (f16 grads widened exactly into f32 master grads)
//   optimizer step on the masters (unscaled, clipped there)
//   after the step:  copy_step_to_model()  (masters rounded once into the f16 parameters)
// A row-sparse gradient (halfgrad/autograd/sparse_rows.h) stays row-sparse on the master, and after the
// step only the master gradient's rows are copied back: the optimizer updates no others
// (optimizer.h). They are read from the master at that point, so rows that a data-parallel
// reduction added to the master's gradient (halfgrad/dist/ddp.h: other ranks' rows) are copied too.
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
