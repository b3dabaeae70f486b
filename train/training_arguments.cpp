// Validation and JSON form of TrainingArguments.
#include "train/training_arguments.h"

#include <cmath>

#include "autograd/error.h"
#include "optim/lr_scheduler.h"
#include "optim/mixed_precision.h"
#include "train/model_config.h"

namespace hg::train {

void TrainingArguments::validate() const {
  check(!output_dir.empty(), "training arguments: output_dir is empty");
  check(max_steps > 0 || (std::isfinite(num_train_epochs) && num_train_epochs > 0),
        "training arguments: num_train_epochs must be > 0 (or max_steps set), got ", num_train_epochs);
  check(per_device_train_batch_size >= 1, "training arguments: per_device_train_batch_size must be >= 1, got ",
        per_device_train_batch_size);
  check(per_device_eval_batch_size >= 1, "training arguments: per_device_eval_batch_size must be >= 1, got ",
        per_device_eval_batch_size);
  check(std::isfinite(learning_rate) && learning_rate > 0 && learning_rate < 10,
        "training arguments: learning_rate must be in (0, 10), got ", learning_rate);
  check(weight_decay >= 0 && weight_decay < 1, "training arguments: weight_decay must be in [0, 1), got ", weight_decay);
  check(warmup_steps >= 0, "training arguments: warmup_steps must be >= 0, got ", warmup_steps);
  check(warmup_ratio >= 0 && warmup_ratio <= 1, "training arguments: warmup_ratio must be in [0, 1], got ", warmup_ratio);
  optim::parse_schedule(lr_scheduler_type);
  for (const auto& [name, value] : {std::pair{"eval_strategy", eval_strategy}, {"save_strategy", save_strategy}}) {
    check(value == "no" || value == "steps" || value == "epoch", "training arguments: ", name,
          " must be no, steps or epoch, got '", value, "'");
  }
  check(eval_steps >= 0 && logging_steps >= 1 && save_steps >= 1,
        "training arguments: eval_steps must be >= 0, logging_steps and save_steps >= 1");
  check(save_total_limit == -1 || save_total_limit >= 1, "training arguments: save_total_limit must be >= 1 (or -1), got ",
        save_total_limit);
  check(!std::isnan(max_grad_norm), "training arguments: max_grad_norm must not be NaN (<= 0 turns clipping off)");
  check(!(fp16 && bf16), "training arguments: fp16 and bf16 are exclusive");
  tokenizer.validate();
  optim::parse_opt_level(fp16_opt_level);
  optim::parse_loss_scale(loss_scale);
  check(gradient_accumulation_steps >= 1, "training arguments: gradient_accumulation_steps must be >= 1, got ",
        gradient_accumulation_steps);
  check(!load_best_model_at_end || (eval_strategy != "no" && save_strategy == eval_strategy),
        "training arguments: load_best_model_at_end needs eval_strategy and save_strategy equal and not 'no'");
}

std::string TrainingArguments::mixed_precision() const { return fp16 ? "fp16" : bf16 ? "bf16" : "no"; }

std::string TrainingArguments::best_metric_key() const {
  return metric_for_best_model.rfind("eval_", 0) == 0 ? metric_for_best_model : "eval_" + metric_for_best_model;
}

bool TrainingArguments::best_metric_greater_is_better() const {
  if (greater_is_better) return *greater_is_better;
  return best_metric_key() != "eval_loss";
}

nlohmann::json TrainingArguments::to_json() const {
  nlohmann::json j = {{"output_dir", output_dir},
                      {"num_train_epochs", num_train_epochs},
                      {"max_steps", max_steps},
                      {"per_device_train_batch_size", per_device_train_batch_size},
                      {"per_device_eval_batch_size", per_device_eval_batch_size},
                      {"learning_rate", learning_rate},
                      {"weight_decay", weight_decay},
                      {"warmup_steps", warmup_steps},
                      {"warmup_ratio", warmup_ratio},
                      {"lr_scheduler_type", lr_scheduler_type},
                      {"eval_strategy", eval_strategy},
                      {"eval_steps", eval_steps},
                      {"logging_steps", logging_steps},
                      {"save_strategy", save_strategy},
                      {"save_steps", save_steps},
                      {"save_total_limit", save_total_limit},
                      {"load_best_model_at_end", load_best_model_at_end},
                      {"metric_for_best_model", metric_for_best_model},
                      {"fp16", fp16},
                      {"bf16", bf16},
                      {"fp16_opt_level", fp16_opt_level},
                      {"loss_scale", loss_scale},
                      {"max_grad_norm", max_grad_norm},
                      {"gradient_accumulation_steps", gradient_accumulation_steps},
                      {"seed", seed},
                      {"detect_anomaly", detect_anomaly},
                      {"tokenizer", tokenizer_config_to_json(tokenizer)}};
  if (greater_is_better) j["greater_is_better"] = *greater_is_better;
  return j;
}

TrainingArguments TrainingArguments::from_json(const nlohmann::json& j, const std::string& source) {
  TrainingArguments a;
  check(j.is_object(), source, ": training_args: expected a JSON object");
  for (const auto& [key, value] : j.items()) {
    try {
      if (key == "output_dir") a.output_dir = value;
      else if (key == "num_train_epochs") a.num_train_epochs = value;
      else if (key == "max_steps") a.max_steps = value;
      else if (key == "per_device_train_batch_size") a.per_device_train_batch_size = value;
      else if (key == "per_device_eval_batch_size") a.per_device_eval_batch_size = value;
      else if (key == "learning_rate") a.learning_rate = value;
      else if (key == "weight_decay") a.weight_decay = value;
      else if (key == "warmup_steps") a.warmup_steps = value;
      else if (key == "warmup_ratio") a.warmup_ratio = value;
      else if (key == "lr_scheduler_type") a.lr_scheduler_type = value;
      else if (key == "eval_strategy" || key == "evaluation_strategy") a.eval_strategy = value;
      else if (key == "eval_steps") a.eval_steps = value;
      else if (key == "logging_steps") a.logging_steps = value;
      else if (key == "save_strategy") a.save_strategy = value;
      else if (key == "save_steps") a.save_steps = value;
      else if (key == "save_total_limit") a.save_total_limit = value;
      else if (key == "load_best_model_at_end") a.load_best_model_at_end = value;
      else if (key == "metric_for_best_model") a.metric_for_best_model = value;
      else if (key == "greater_is_better") a.greater_is_better = value.get<bool>();
      else if (key == "fp16") a.fp16 = value;
      else if (key == "bf16") a.bf16 = value;
      else if (key == "fp16_opt_level") a.fp16_opt_level = value;
      else if (key == "loss_scale") a.loss_scale = value;
      else if (key == "max_grad_norm") a.max_grad_norm = value;
      else if (key == "gradient_accumulation_steps") a.gradient_accumulation_steps = value;
      else if (key == "seed") a.seed = value;
      else if (key == "detect_anomaly") a.detect_anomaly = value;
      else if (key == "tokenizer") a.tokenizer = tokenizer_config_from_json(value, source);  // absent: bytes
      else fail(source, ": training_args: unknown key '", key, "'");
    } catch (const nlohmann::json::exception& e) {
      fail(source, ": training_args: key '", key, "' has the wrong type (", e.what(), ")");
    }
  }
  return a;
}

}  // namespace hg::train
