// Accelerator: the Hugging Face Accelerate API level. One object owns the mixed-precision machinery
// (halfgrad/optim/mixed_precision.h), so a plain training loop gains autocast, loss scaling, master
// weights, gradient accumulation and (under mpirun) data parallelism with four calls, and lists the
// run's state (state_dict). An example and the details: docs/design_notes.md#accelerator.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "halfgrad/autograd/autocast.h"
#include "halfgrad/autograd/generator.h"
#include "halfgrad/dist/communicator.h"
#include "halfgrad/dist/ddp.h"
#include "halfgrad/io/checkpoint.h"
#include "halfgrad/nn/module.h"
#include "halfgrad/optim/lr_scheduler.h"
#include "halfgrad/optim/mixed_precision.h"
#include "halfgrad/optim/optimizer.h"

namespace hg::train {

struct AcceleratorOptions {
  optim::MixedPrecisionOptions mixed_precision;  // f32 by default
  int64_t gradient_accumulation_steps = 1;
  dist::DdpOptions ddp;                        // the gradient reduction's wire format and buckets
  dist::Communicator* communicator = nullptr;  // null: dist::world()
};

class Accelerator;

// The training loop's own state, part of the run's (Accelerator::register_loop_state): the
// Trainer's TrainerState (step, epoch, log, best metric, running loss sums), saved as
// trainer_state.json.
struct LoopState {
  std::function<nlohmann::json()> save;
  std::function<void(const nlohmann::json& state, const std::string& source)> load;
  // Top-level keys the ranks may hold differently (the Trainer's log_history holds each rank's
  // own wire counts): the replica check leaves them out.
  std::vector<std::string> per_rank_keys;
};

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

  // A generator whose (seed, offset) is part of the run's state, as rng_state.json's entry
  // `name` (the Trainer's: the model's dropout generator, "dropout"). It must outlive this.
  void register_generator(const std::string& name, Generator& generator);
  // The loop's state, part of the run's (HF Accelerate's register_for_checkpointing, for one
  // object). Its functions must stay valid while this lives.
  void register_loop_state(LoopState state);

  // The run's state (HF Accelerate's save_state), the one list every use takes its parts from,
  // as the checkpoint files hold it (halfgrad/io/checkpoint.h; config.json and the tokenizer are
  // the caller's):
  //   model, fp8    the model's state (save_model_state: the weights the optimizer updates, the
  //                 f32 masters under O2; an fp8 run's scales)
  //   optimizer     its tensors and scalars
  //   scheduler     (null without one)
  //   scaler        the loss scaler's
  //   rng           each registered generator's {"seed", "offset"}
  //   trainer_state the registered loop state (null without one)
  // `model_only` (HF's save_only_model): the model's state and the loop state alone. Resume
  // loads it all (load_state_dict), inference the model's state (load_model_state), and the
  // replica check compares it all across ranks (check_replicas).
  io::Checkpoint state_dict(bool model_only = false) const;
  // Loads every part of `state` (read from the checkpoint directory `dir`; errors name it and
  // the file), each checked before use: a model-only checkpoint is refused (check_resumable),
  // the weights as load_checked_weights checks them, an inf or NaN optimizer tensor, an fp8 run
  // without its scales. Then the generators and the loop state.
  void load_state_dict(const io::Checkpoint& state, const std::string& dir);
  // Under several ranks, compares the run's state (state_dict(), and the model's parameters in
  // the dtype it computes in) across them and throws hg::Error on every rank naming the first
  // part that differs, the rank and `step` (dist::DistributedDataParallel::check_replicas). A
  // collective; a no-op in one process.
  void check_replicas(int64_t step);

 private:
  void prepare_module(nn::Module& model, optim::Optimizer& optimizer, optim::LrScheduler* scheduler);

  AcceleratorOptions options_;
  dist::DistributedDataParallel ddp_;
  nn::Module* model_ = nullptr;
  optim::Optimizer* optimizer_ = nullptr;
  optim::LrScheduler* scheduler_ = nullptr;
  std::unique_ptr<optim::MixedPrecision> mp_;
  std::map<std::string, Generator*> generators_;
  std::optional<LoopState> loop_state_;
  int64_t micro_step_ = 0;
  bool skipped_ = false;
};

// Throws hg::Error naming `dir` when checkpoint `c` cannot be resumed: a model-only one
// (save_only_model). Accelerator::load_state_dict runs it; `halfgrad train --resume` before
// reading data.
void check_resumable(const io::Checkpoint& c, const std::string& dir);

template <class Model>
template <class... Args>
Tensor PreparedModel<Model>::forward(Args&&... args) const {
  Autocast guard = accelerator_.autocast();
  return model_.forward(std::forward<Args>(args)...);
}

}  // namespace hg::train
