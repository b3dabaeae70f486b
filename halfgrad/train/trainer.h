// Trainer: the Hugging Face Trainer API level, for TextClassifier on labelled text, built on the
// Accelerator (all three API levels run the same step). Checkpoints hold everything a resume needs,
// so a resumed run continues bit for bit; under mpirun every rank runs this loop on its shard.
// An example and the data-parallel details: docs/design_notes.md#trainer.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "halfgrad/base/adaptive_threads.h"
#include "halfgrad/data/data_loader.h"
#include "halfgrad/data/dataset.h"
#include "halfgrad/nn/text_classifier.h"
#include "halfgrad/train/accelerator.h"
#include "halfgrad/train/evaluation.h"
#include "halfgrad/train/metrics.h"
#include "halfgrad/train/training_arguments.h"

namespace hg::io {
struct Checkpoint;
}

namespace hg::train {

using Metrics = std::map<std::string, double>;

using ComputeMetrics = std::function<Metrics(const EvalPrediction&)>;

// What trainer_state.json holds (HF's TrainerState, the fields halfgrad uses).
struct TrainerState {
  int64_t global_step = 0;
  int64_t max_steps = 0;
  double epoch = 0;
  nlohmann::json log_history = nlohmann::json::array();
  std::optional<double> best_metric;
  std::string best_model_checkpoint;
  int64_t skipped_steps = 0;
  // Sums of the per-step training loss (a step's loss: the mean over its micro-batches) over the
  // steps so far and over the current epoch's steps, leaving out steps whose loss is inf or NaN
  // (fp16 steps the loss scaler skips; HF's logging_nan_inf_filter also keeps them out of its
  // train_loss), so the counts may be less than the steps. They are checkpointed, so a resumed run
  // reports the same means as an uninterrupted one (HF's train_loss, which sums only the steps
  // since the resume but divides by all steps, comes out low after a resume). A checkpoint
  // written before these fields existed resumes with them at 0: its means then cover only the
  // steps run since.
  double loss_sum = 0, epoch_loss_sum = 0;
  int64_t loss_steps = 0, epoch_loss_steps = 0;
  // HF's train_loss: the mean loss of the optimizer steps so far (0 before the first).
  double train_loss() const { return loss_steps ? loss_sum / double(loss_steps) : 0.0; }
  // The mean loss of the current epoch's optimizer steps so far.
  double epoch_train_loss() const { return epoch_loss_steps ? epoch_loss_sum / double(epoch_loss_steps) : 0.0; }
  nlohmann::json to_json() const;
  // Throws hg::Error naming `source` and the missing or mistyped field.
  static TrainerState from_json(const nlohmann::json& j, const std::string& source = "trainer_state.json");
};

// Hooks into training (HF's TrainerCallback). Setting should_stop ends training after the
// current step.
class TrainerCallback {
 public:
  virtual ~TrainerCallback() = default;
  virtual void on_train_begin(const TrainerState&, const TrainingArguments&) {}
  // step_info: {"step", "loss" (this step's: the mean over its micro-batches), "scale", "stepped",
  // "grad_norm"}; under mpirun with --ddp-comm fp16|bf16 also "ddp_wire": {"format", "values",
  // "flushed", "subnormal", "overflowed"}, this rank's cast of its gradients to the wire format.
  virtual void on_step_end(const TrainerState&, const nlohmann::json& step_info) { (void)step_info; }
  virtual void on_log(const TrainerState&, const nlohmann::json& logs) { (void)logs; }
  virtual void on_evaluate(const TrainerState&, const Metrics& metrics) { (void)metrics; }
  virtual void on_epoch_end(const TrainerState&) {}
  virtual void on_train_end(const TrainerState&) {}
  bool should_stop = false;
};

// Stops training when metric_for_best_model has not improved by more than `threshold` for
// `patience` evaluations in a row (HF's EarlyStoppingCallback).
class EarlyStoppingCallback : public TrainerCallback {
 public:
  EarlyStoppingCallback(const TrainingArguments& args, int64_t patience, double threshold = 0.0);
  void on_evaluate(const TrainerState& state, const Metrics& metrics) override;

 private:
  std::string key_;
  bool greater_;
  int64_t patience_, bad_evaluations_ = 0;
  double threshold_;
  std::optional<double> best_;
};

struct TrainOutput {
  int64_t global_step = 0;
  bool interrupted = false;  // SIGINT: stopped after the step in progress, saved a checkpoint
  double training_loss = 0;  // HF's train_loss: TrainerState::train_loss(), across resumes
  Metrics metrics;           // train_runtime, train_steps_per_second, ...
};

struct PredictionOutput {
  EvalPrediction prediction;
  Metrics metrics;  // test_loss, test_accuracy, ...
};

class Trainer {
 public:
  // `communicator`: the data-parallel job (null: dist::world(), the job mpirun launched).
  Trainer(nn::TextClassifier& model, TrainingArguments args, const data::Dataset& train_dataset,
          const data::Dataset* eval_dataset = nullptr, ComputeMetrics compute_metrics = {},
          std::vector<std::shared_ptr<TrainerCallback>> callbacks = {}, dist::Communicator* communicator = nullptr);
  ~Trainer();

  // Trains (resuming from a checkpoint directory when given) and returns the summary. While it
  // runs, SIGINT (Ctrl-C) finishes the step in progress, saves a checkpoint of it and returns
  // with `interrupted` set; a second SIGINT kills the process as usual. A loss scaler whose
  // scale collapses or that skips too many steps (GradScaler::health_warning) is reported once,
  // on stderr and in the log, with the op anomaly mode blamed if it is on.
  TrainOutput train(const std::string& resume_from_checkpoint = "");
  // Loss, accuracy, macro-F1 (and compute_metrics' entries) with keys prefixed "eval_".
  Metrics evaluate(const data::Dataset* dataset = nullptr, const std::string& prefix = "eval");
  PredictionOutput predict(const data::Dataset& dataset);
  // Writes output_dir/checkpoint-<global_step>/ now (without the training state under
  // save_only_model).
  std::string save_checkpoint();
  // From now on, train() sets the OpenMP team of each optimizer step with `policy`
  // (halfgrad/base/adaptive_threads.h, `halfgrad train --threads auto`), timing each step's compute
  // (forward, backward, update; not evaluation, logging or checkpoints). No result changes: none
  // depends on the team size. The final log entry's "threads" reports the steps run at each size;
  // after train() the team stays at the policy's last choice. One process only (an hg::Error
  // otherwise): under mpirun each step waits for the slowest rank in the all-reduce, so its time
  // does not measure the local team.
  void adapt_threads(AdaptiveThreads policy);
  // The policy adapt_threads gave, with its history; null without one.
  const AdaptiveThreads* adaptive_threads() const { return threads_ ? &*threads_ : nullptr; }

  const TrainerState& state() const { return state_; }
  const TrainingArguments& args() const { return args_; }
  Accelerator& accelerator() { return *accelerator_; }
  int64_t steps_per_epoch() const;
  // Training texts longer than the model's max_len, cut when the loader tokenized them.
  int64_t truncated_train_texts() const;

 private:
  struct Parts;
  // What one optimizer step did, for the bookkeeping after it.
  struct StepOutcome {
    double loss = 0;  // the mean over its micro-batches
    float scale = 1;  // the loss scale it used
    float grad_norm = 0;
    bool stepped = false;
  };
  // train()'s steps, in order.
  void begin_training(const std::string& checkpoint);
  int64_t begin_epoch(int64_t epoch);
  StepOutcome training_step(int64_t epoch, int64_t first_batch);
  bool end_step(const StepOutcome& step, bool& interrupted);
  bool end_epoch();
  TrainOutput end_training(double seconds, int64_t start_step, bool interrupted);
  void log(nlohmann::json entry);
  void warn(const std::string& text);  // stderr (rank 0) and the log; nothing when empty
  void maybe_evaluate_and_save(bool epoch_end);
  std::string write_checkpoint(bool model_only);
  void restore(const std::string& checkpoint);

  nn::TextClassifier& model_;
  TrainingArguments args_;
  const data::Dataset& train_dataset_;
  const data::Dataset* eval_dataset_;
  ComputeMetrics compute_metrics_;
  std::vector<std::shared_ptr<TrainerCallback>> callbacks_;
  std::unique_ptr<Parts> parts_;
  std::unique_ptr<Accelerator> accelerator_;
  TrainerState state_;
  std::optional<AdaptiveThreads> threads_;
};

// The standard metrics of an EvalPrediction: accuracy and macro-F1 (keys "accuracy", "f1").
Metrics classification_metrics(const EvalPrediction& prediction);

}  // namespace hg::train
