// TrainingArguments: the Hugging Face Trainer's settings, with its names and (where training
// from scratch does not call for other values) its defaults. mixed_precision (HF's fp16, bf16
// and fp16_opt_level, in its JSON under those keys, plus halfgrad's loss scaling and
// normalization outputs: halfgrad/optim/mixed_precision.h), detect_anomaly and tokenizer (what the
// Trainer's DataLoader tokenizes with; HF passes a tokenizer object to the Trainer instead) are
// halfgrad's forms of them.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "halfgrad/base/enum_names.h"
#include "halfgrad/data/tokenizer.h"
#include "halfgrad/dist/wire_format.h"
#include "halfgrad/optim/lr_scheduler.h"
#include "halfgrad/optim/mixed_precision.h"

namespace hg::train {

// HF's IntervalStrategy: when the Trainer evaluates or saves (eval_strategy, save_strategy).
enum class IntervalStrategy { kNo, kSteps, kEpoch };
inline constexpr EnumNames<IntervalStrategy, 3> kIntervalStrategyNames{
    {{{IntervalStrategy::kNo, "no"}, {IntervalStrategy::kSteps, "steps"}, {IntervalStrategy::kEpoch, "epoch"}}}};

struct TrainingArguments {
  std::string output_dir = "halfgrad-output";
  double num_train_epochs = 3.0;
  int64_t max_steps = -1;  // > 0: train exactly this many optimizer steps (overrides epochs)
  int64_t per_device_train_batch_size = 64;
  int64_t per_device_eval_batch_size = 256;
  float learning_rate = 1e-3f;  // HF's 5e-5 is for fine-tuning; this trains from scratch
  float weight_decay = 0.01f;   // on matrices only (halfgrad/optim/param_groups.h)
  // The token table's own peak learning rate (a parameter group of its own, under the same
  // schedule and weight_decay); unset: learning_rate. halfgrad's, not HF's.
  std::optional<float> embedding_learning_rate;
  float label_smoothing_factor = 0.0f;  // HF's: the training loss's targets mix in 1/K of uniform
  int64_t warmup_steps = 0;             // > 0 overrides warmup_ratio
  double warmup_ratio = 0.0;            // in [0, 1)
  optim::Schedule lr_scheduler_type = optim::Schedule::kLinear;  // optim::kScheduleNames
  IntervalStrategy eval_strategy = IntervalStrategy::kNo;        // JSON's old name: evaluation_strategy
  int64_t eval_steps = 0;                                        // 0: logging_steps
  int64_t logging_steps = 50;
  IntervalStrategy save_strategy = IntervalStrategy::kSteps;
  int64_t save_steps = 500;
  int64_t save_total_limit = -1;  // > 0: keep only this many checkpoints (and the best)
  bool load_best_model_at_end = false;
  std::string metric_for_best_model = "loss";  // an evaluate() key, "eval_" prefix optional
  std::optional<bool> greater_is_better;       // default: false for "loss", true otherwise
  // f32 by default; its opt level, when fp16 is chosen, defaults to O2 (HF's fp16_opt_level: O1).
  optim::MixedPrecisionOptions mixed_precision;
  float max_grad_norm = 1.0f;  // 0: no clipping
  int64_t gradient_accumulation_steps = 1;
  uint64_t seed = 42;
  // HF's group_by_length: training batches of similar lengths (data::DataLoaderOptions), so a
  // transformer pads less; evaluation order is unchanged.
  bool group_by_length = false;
  bool detect_anomaly = false;      // name the first op that produces inf/NaN
  data::TokenizerConfig tokenizer;  // bytes by default; saved in config.json with the model
  // Data-parallel runs (launched by mpirun; docs/distributed.md): the gradients' wire format
  // (halfgrad/dist/wire_format.h) and, when > 0, a check every N steps that every rank's
  // parameters, masters and optimizer state are still identical.
  dist::WireFormat ddp_comm = dist::WireFormat::kF32;
  int64_t ddp_check_every = 0;
  // HF's report_to: where the run's log goes, any of "jsonl" (output_dir/log.jsonl, by the
  // Trainer) and "html" (output_dir/report.html at the end, by report::HtmlReportCallback, which
  // the caller adds), or "none" alone.
  std::vector<std::string> report_to = {"jsonl"};
  // HF's save_only_model: checkpoints hold the weights, config and trainer state only (no
  // optimizer, scheduler, scaler or RNG state): a third of the size, evaluated and predicted
  // with like any other, but not resumable.
  bool save_only_model = false;

  // The metrics every evaluation reports with the default compute_metrics (classification_metrics).
  static std::vector<std::string> standard_metrics() { return {"loss", "accuracy", "f1"}; }
  // Throws hg::Error naming the first invalid field and the `halfgrad train` flag that sets it.
  // metric_for_best_model must be one of `metric_names` ("eval_" prefix optional); an empty
  // list skips that check (custom compute_metrics, whose keys are known only after evaluating).
  void validate(const std::vector<std::string>& metric_names = standard_metrics()) const;
  // The metric key in evaluate()'s result ("eval_loss" for "loss").
  std::string best_metric_key() const;
  bool best_metric_greater_is_better() const;

  nlohmann::json to_json() const;
  // Accepts every field of to_json(); "evaluation_strategy" is read as eval_strategy. An
  // unknown or mistyped key is an error naming `source` (the file it came from) and the key.
  // The training_args of checkpoints written before mixed_precision existed (keys fp16, bf16,
  // fp16_opt_level, loss_scale) still load.
  static TrainingArguments from_json(const nlohmann::json& j, const std::string& source);
};

}  // namespace hg::train
