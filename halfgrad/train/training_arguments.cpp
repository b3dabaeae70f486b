// Validation and JSON form of TrainingArguments.
#include "halfgrad/train/training_arguments.h"

#include <algorithm>
#include <cmath>

#include "halfgrad/autograd/json_read.h"
#include "halfgrad/base/error.h"
#include "halfgrad/io/model_config.h"

namespace hg::train {

void TrainingArguments::validate(const std::vector<std::string>& metric_names) const {
  // Each message names the field and, in parentheses, the `halfgrad train` flag that sets it.
  const std::string at = "training arguments: ";
  check(!output_dir.empty(), at, "output_dir (--output-dir) is empty");
  check(max_steps > 0 || (std::isfinite(num_train_epochs) && num_train_epochs > 0), at,
        "num_train_epochs (--epochs) must be > 0 (or max_steps set), got ", num_train_epochs);
  check(per_device_train_batch_size >= 1, at, "per_device_train_batch_size (--batch-size) must be >= 1, got ",
        per_device_train_batch_size);
  check(per_device_eval_batch_size >= 1, at, "per_device_eval_batch_size (--eval-batch-size) must be >= 1, got ",
        per_device_eval_batch_size);
  check(std::isfinite(learning_rate) && learning_rate > 0 && learning_rate < 10, at,
        "learning_rate (--lr) must be in (0, 10), got ", learning_rate);
  check(weight_decay >= 0 && weight_decay < 1, at, "weight_decay (--weight-decay) must be in [0, 1), got ",
        weight_decay);
  check(!embedding_learning_rate ||
            (std::isfinite(*embedding_learning_rate) && *embedding_learning_rate > 0 && *embedding_learning_rate < 10),
        at, "embedding_learning_rate (--embedding-lr) must be in (0, 10), got ", embedding_learning_rate.value_or(0));
  check(label_smoothing_factor >= 0 && label_smoothing_factor < 1, at,
        "label_smoothing_factor (--label-smoothing) must be in [0, 1), got ", label_smoothing_factor);
  check(warmup_steps >= 0, at, "warmup_steps (--warmup-steps) must be >= 0, got ", warmup_steps);
  check(warmup_ratio >= 0 && warmup_ratio < 1, at, "warmup_ratio (--warmup-ratio) must be in [0, 1), got ",
        warmup_ratio);
  check(eval_steps >= 0, at, "eval_steps (--eval-steps) must be >= 1 (or 0: logging_steps), got ", eval_steps);
  check(logging_steps >= 1, at, "logging_steps (--logging-steps) must be >= 1, got ", logging_steps);
  check(save_steps >= 1, at, "save_steps (--save-steps) must be >= 1, got ", save_steps);
  check(save_total_limit == -1 || save_total_limit >= 1, at, "save_total_limit (--save-total-limit) ", save_total_limit,
        " would keep ", save_total_limit == 0 ? "no" : "a negative number of",
        " checkpoints: give N >= 1 to keep the newest N, -1 to keep all, or save_strategy no (--save-strategy no) "
        "to save none");
  check(std::isfinite(max_grad_norm) && max_grad_norm >= 0, at,
        "max_grad_norm (--max-grad-norm) must be finite and >= 0 (0 turns clipping off), got ", max_grad_norm);
  try {
    tokenizer.validate();
  } catch (const Error& e) {
    fail(at, "tokenizer (--tokenizer, --ngram-min, --ngram-max, --buckets): ", e.what());
  }
  try {
    mixed_precision.validate();
  } catch (const Error& e) {
    fail(at, e.what());
  }
  for (const std::string& r : report_to) {
    check(r == "none" || r == "jsonl" || r == "html", at, "report_to (--report-to) must be none, jsonl or html, got '",
          r, "'");
    check(r != "none" || report_to.size() == 1, at, "report_to (--report-to) none excludes the others");
  }
  check(ddp_check_every >= 0, at, "ddp_check_every (--ddp-check-every) must be >= 0, got ", ddp_check_every);
  check(gradient_accumulation_steps >= 1, at, "gradient_accumulation_steps (--grad-accum) must be >= 1, got ",
        gradient_accumulation_steps);
  check(!load_best_model_at_end || (eval_strategy != IntervalStrategy::kNo && save_strategy == eval_strategy), at,
        "load_best_model_at_end (--load-best) needs eval_strategy and save_strategy equal and not 'no', got '",
        kIntervalStrategyNames.name(eval_strategy), "' and '", kIntervalStrategyNames.name(save_strategy), "'");
  // The best model is chosen among checkpoints saved at an evaluation (HF's rule).
  const int64_t eval_every = eval_steps > 0 ? eval_steps : logging_steps;
  check(!load_best_model_at_end || save_strategy != IntervalStrategy::kSteps || save_steps % eval_every == 0, at,
        "load_best_model_at_end (--load-best) needs save_steps (--save-steps) ", save_steps,
        " to be a multiple of eval_steps (--eval-steps) ", eval_every, ", else no checkpoint is saved with a metric");
  if (!metric_names.empty()) {
    const std::string key = best_metric_key();
    const bool known = std::any_of(metric_names.begin(), metric_names.end(),
                                   [&](const std::string& m) { return key == "eval_" + m || key == m; });
    std::string list;
    for (const std::string& m : metric_names) list += (list.empty() ? "" : ", ") + m;
    check(known, at, "metric_for_best_model (--metric) '", metric_for_best_model,
          "' is not a metric evaluation reports (", list, ")");
  }
}

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
                      {"lr_scheduler_type", std::string(optim::kScheduleNames.name(lr_scheduler_type))},
                      {"eval_strategy", std::string(kIntervalStrategyNames.name(eval_strategy))},
                      {"eval_steps", eval_steps},
                      {"logging_steps", logging_steps},
                      {"save_strategy", std::string(kIntervalStrategyNames.name(save_strategy))},
                      {"save_steps", save_steps},
                      {"save_total_limit", save_total_limit},
                      {"load_best_model_at_end", load_best_model_at_end},
                      {"metric_for_best_model", metric_for_best_model},
                      {"max_grad_norm", max_grad_norm},
                      {"gradient_accumulation_steps", gradient_accumulation_steps},
                      {"seed", seed},
                      {"detect_anomaly", detect_anomaly},
                      {"ddp_comm", std::string(dist::kWireFormatNames.name(ddp_comm))},
                      {"ddp_check_every", ddp_check_every},
                      {"report_to", report_to},
                      {"save_only_model", save_only_model},
                      {"tokenizer", io::tokenizer_config_to_json(tokenizer)}};
  if (greater_is_better) j["greater_is_better"] = *greater_is_better;
  // Only when set (label smoothing and length grouping when on): the JSON of a run without them stays as it was.
  if (embedding_learning_rate) j["embedding_learning_rate"] = *embedding_learning_rate;
  if (label_smoothing_factor > 0) j["label_smoothing_factor"] = label_smoothing_factor;
  if (group_by_length) j["group_by_length"] = true;
  j.update(optim::mixed_precision_to_json(mixed_precision));  // HF's flat layout: "fp16", "bf16", ...
  return j;
}

TrainingArguments TrainingArguments::from_json(const nlohmann::json& j, const std::string& source) {
  TrainingArguments a;
  check(j.is_object(), source, ": training_args: expected a JSON object");
  for (const auto& [key, value] : j.items()) {
    const std::string at = source + ": training_args: key '" + key + "'";
    const auto set = [&v = value, &at](auto& field) {
      json_read::read(v, at, field);
    };  // &v: clang 14 cannot capture a binding
    try {
      if (key == "output_dir")
        set(a.output_dir);
      else if (key == "num_train_epochs")
        set(a.num_train_epochs);
      else if (key == "max_steps")
        set(a.max_steps);
      else if (key == "per_device_train_batch_size")
        set(a.per_device_train_batch_size);
      else if (key == "per_device_eval_batch_size")
        set(a.per_device_eval_batch_size);
      else if (key == "learning_rate")
        set(a.learning_rate);
      else if (key == "weight_decay")
        set(a.weight_decay);
      else if (key == "embedding_learning_rate")
        a.embedding_learning_rate = json_read::as<float>(value, at);
      else if (key == "label_smoothing_factor")
        set(a.label_smoothing_factor);
      else if (key == "warmup_steps")
        set(a.warmup_steps);
      else if (key == "warmup_ratio")
        set(a.warmup_ratio);
      else if (key == "lr_scheduler_type")
        a.lr_scheduler_type = optim::kScheduleNames.parse(json_read::as<std::string>(value, at), at);
      else if (key == "eval_strategy" || key == "evaluation_strategy") {
        a.eval_strategy = kIntervalStrategyNames.parse(json_read::as<std::string>(value, at), at);
      } else if (key == "eval_steps")
        set(a.eval_steps);
      else if (key == "logging_steps")
        set(a.logging_steps);
      else if (key == "save_strategy")
        a.save_strategy = kIntervalStrategyNames.parse(json_read::as<std::string>(value, at), at);
      else if (key == "save_steps")
        set(a.save_steps);
      else if (key == "save_total_limit")
        set(a.save_total_limit);
      else if (key == "load_best_model_at_end")
        set(a.load_best_model_at_end);
      else if (key == "metric_for_best_model")
        set(a.metric_for_best_model);
      else if (key == "greater_is_better")
        a.greater_is_better = json_read::as<bool>(value, at);
      else if (optim::is_mixed_precision_key(key))
        continue;  // read below
      else if (key == "max_grad_norm")
        set(a.max_grad_norm);
      else if (key == "gradient_accumulation_steps")
        set(a.gradient_accumulation_steps);
      else if (key == "seed")
        set(a.seed);
      else if (key == "group_by_length")
        set(a.group_by_length);
      else if (key == "detect_anomaly")
        set(a.detect_anomaly);
      else if (key == "ddp_comm")
        a.ddp_comm = dist::kWireFormatNames.parse(json_read::as<std::string>(value, at), at);
      else if (key == "ddp_check_every")
        set(a.ddp_check_every);
      else if (key == "report_to")
        a.report_to = value.get<std::vector<std::string>>();
      else if (key == "save_only_model")
        set(a.save_only_model);
      else if (key == "tokenizer")
        a.tokenizer = io::tokenizer_config_from_json(value, source);  // absent: bytes
      else
        fail(source, ": training_args: unknown key '", key, "'");
    } catch (const nlohmann::json::exception& e) {
      fail(source, ": training_args: key '", key, "' has the wrong type (", e.what(), ")");
    }
  }
  a.mixed_precision = optim::mixed_precision_from_json(j, source + ": training_args");
  return a;
}

}  // namespace hg::train
