// Accelerator: the Hugging Face Accelerate API level. One object owns the mixed-precision machinery
// (halfgrad/optim/mixed_precision.h), so a plain training loop gains autocast, loss scaling, master
// weights, gradient accumulation and (under mpirun) data parallelism with four calls. An example
// and the details: docs/design_notes.md#accelerator.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>

#include "halfgrad/autograd/autocast.h"
#include "halfgrad/dist/communicator.h"
#include "halfgrad/dist/ddp.h"
#include "halfgrad/nn/module.h"
#include "halfgrad/optim/lr_scheduler.h"
#include "halfgrad/optim/mixed_precision.h"
#include "halfgrad/optim/optimizer.h"

namespace hg::train {

struct AcceleratorOptions {
  optim::MixedPrecisionOptions mixed_precision;  // f32 by default
  int64_t gradient_accumulation_steps = 1;
  dist::DdpOptions ddp;  // the gradient reduction's wire format and buckets
  dist::Communicator* communicator = nullptr;  // null: dist::world()
};

class Accelerator;

// A model whose forward runs under the accelerator's autocast (what Accelerate's prepared
// model does).
template <class Model>
class PreparedModel {
 public:
  PreparedModel(Model& model, const Accelerator& accelerator) : model_(model), accelerator_(accelerator) {}
  template <class... Args>
  Tensor forward(Args&&... args) const;
  Model& module() const { return model_; }

 private:
  Model& model_;
  const Accelerator& accelerator_;
};

class Accelerator {
 public:
  explicit Accelerator(AcceleratorOptions options = {});

  // Wires mixed precision into `model` and `optimizer` (and steps `scheduler` only when the
  // optimizer really stepped). Call once.
  template <class Model>
  PreparedModel<Model> prepare(Model& model, optim::Optimizer& optimizer, optim::LrScheduler* scheduler = nullptr) {
    prepare_module(model, optimizer, scheduler);
    return PreparedModel<Model>(model, *this);
  }

  Autocast autocast() const;
  // loss / gradient_accumulation_steps, scaled, backward; counts one micro-batch.
  void backward(const Tensor& loss);
  // True on the micro-batch that completes an accumulation cycle: step then.
  bool sync_gradients() const;
  // Unscales (once per step) and clips the optimizer's gradients; returns the norm before.
  float clip_grad_norm(float max_norm);
  // Steps (unless inf/NaN), updates the scale, steps the scheduler if the optimizer stepped,
  // and zeroes the gradients. Returns whether the optimizer stepped.
  bool step();
  bool optimizer_step_was_skipped() const { return skipped_; }

  // The data-parallel job (Accelerate's names): 1, 0 and true in a single process.
  int num_processes() const { return ddp_.size(); }
  int process_index() const { return ddp_.rank(); }
  bool is_main_process() const { return ddp_.rank() == 0; }
  dist::DistributedDataParallel& ddp() { return ddp_; }

  optim::MixedPrecision& mixed_precision() { return *mp_; }
  const optim::MixedPrecision& mixed_precision() const { return *mp_; }
  const AcceleratorOptions& options() const { return options_; }
  int64_t micro_step() const { return micro_step_; }

 private:
  void prepare_module(nn::Module& model, optim::Optimizer& optimizer, optim::LrScheduler* scheduler);

  AcceleratorOptions options_;
  dist::DistributedDataParallel ddp_;
  nn::Module* model_ = nullptr;
  optim::Optimizer* optimizer_ = nullptr;
  optim::LrScheduler* scheduler_ = nullptr;
  std::unique_ptr<optim::MixedPrecision> mp_;
  int64_t micro_step_ = 0;
  bool skipped_ = false;
};

template <class Model>
template <class... Args>
Tensor PreparedModel<Model>::forward(Args&&... args) const {
  Autocast guard = accelerator_.autocast();
  return model_.forward(std::forward<Args>(args)...);
}

}  // namespace hg::train
