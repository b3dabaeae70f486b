// The Trainer's loop: epochs of micro-batches, optimizer steps through the Accelerator,
// logging, evaluation, checkpoints and resume.
#include "halfgrad/train/trainer.h"

#include <omp.h>
#include <signal.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <span>

#include "halfgrad/autograd/all_ops.h"
#include "halfgrad/autograd/json_read.h"
#include "halfgrad/autograd/tape.h"
#include "halfgrad/base/error.h"
#include "halfgrad/base/fingerprint.h"
#include "halfgrad/dist/communicator.h"
#include "halfgrad/io/checkpoint.h"
#include "halfgrad/io/digest.h"
#include "halfgrad/io/output_lock.h"
#include "halfgrad/io/model_config.h"
#include "halfgrad/optim/adam.h"
#include "halfgrad/optim/param_groups.h"
#include "halfgrad/train/recipe_warnings.h"

namespace hg::train {

nlohmann::json TrainerState::to_json() const {
  nlohmann::json j = {{"global_step", global_step},
                      {"max_steps", max_steps},
                      {"epoch", epoch},
                      {"log_history", log_history},
                      {"skipped_steps", skipped_steps},
                      {"best_model_checkpoint", best_model_checkpoint},
                      {"loss_sum", loss_sum},
                      {"loss_steps", loss_steps},
                      {"epoch_loss_sum", epoch_loss_sum},
                      {"epoch_loss_steps", epoch_loss_steps}};
  j["best_metric"] = best_metric ? nlohmann::json(*best_metric) : nlohmann::json(nullptr);
  return j;
}

TrainerState TrainerState::from_json(const nlohmann::json& j, const std::string& source) {
  check(j.is_object(), source, ": expected a JSON object");
  TrainerState s;
  // Every field through json_read (a step count of 5.5e100 must be an error, not a cast).
  json_read::read_field(j, source, "global_step", s.global_step);
  json_read::read_field(j, source, "max_steps", s.max_steps);
  json_read::read_field(j, source, "epoch", s.epoch);
  for (const char* key : {"log_history", "best_metric"}) check(j.contains(key), source, ": missing field '", key, "'");
  s.log_history = j.at("log_history");
  // The fields below: absent before they were checkpointed (trainer.h).
  json_read::read_optional_field(j, source, "skipped_steps", s.skipped_steps);
  json_read::read_optional_field(j, source, "best_model_checkpoint", s.best_model_checkpoint);
  json_read::read_optional_field(j, source, "loss_sum", s.loss_sum);
  json_read::read_optional_field(j, source, "loss_steps", s.loss_steps);
  json_read::read_optional_field(j, source, "epoch_loss_sum", s.epoch_loss_sum);
  json_read::read_optional_field(j, source, "epoch_loss_steps", s.epoch_loss_steps);
  if (!j.at("best_metric").is_null())
    s.best_metric = json_read::as<double>(j.at("best_metric"), source + ": key 'best_metric'");
  check(s.global_step >= 0 && s.max_steps >= 0 && s.skipped_steps >= 0 && s.skipped_steps <= s.global_step &&
            std::isfinite(s.epoch) && s.epoch >= 0 && s.loss_steps >= 0 && s.loss_steps <= s.global_step &&
            s.epoch_loss_steps >= 0 && s.epoch_loss_steps <= s.loss_steps,
        source, ": inconsistent state (global_step ", s.global_step, ", max_steps ", s.max_steps, ", skipped_steps ",
        s.skipped_steps, ", epoch ", s.epoch, ", loss_steps ", s.loss_steps, ", epoch_loss_steps ", s.epoch_loss_steps,
        ")");
  check(s.log_history.is_array(), source, ": log_history is not an array");
  return s;
}

EarlyStoppingCallback::EarlyStoppingCallback(const TrainingArguments& args, int64_t patience, double threshold)
    : key_(args.best_metric_key()),
      greater_(args.best_metric_greater_is_better()),
      patience_(patience),
      threshold_(threshold) {
  check(patience >= 1, "EarlyStoppingCallback: patience must be >= 1, got ", patience);
}

void EarlyStoppingCallback::on_evaluate(const TrainerState&, const Metrics& metrics) {
  const auto it = metrics.find(key_);
  check(it != metrics.end(), "EarlyStoppingCallback: evaluation has no metric '", key_, "'");
  const double value = it->second;
  const bool improved = !best_ || (greater_ ? value > *best_ + threshold_ : value < *best_ - threshold_);
  if (improved) {
    best_ = value;
    bad_evaluations_ = 0;
  } else if (++bad_evaluations_ >= patience_) {
    should_stop = true;
  }
}

Metrics classification_metrics(const EvalPrediction& p) {
  const ClassificationReport r = classification_report(p.predictions, p.label_ids, p.classes);
  return {{"accuracy", r.accuracy}, {"f1", r.macro_f1}};
}

namespace {

// SIGINT while train() runs sets a flag that the loop reads at each step boundary. SA_RESETHAND
// restores the default action on delivery, so a second Ctrl-C ends the process at once.
volatile std::sig_atomic_t sigint_received = 0;

extern "C" void on_sigint(int) { sigint_received = 1; }

class SigintGuard {
 public:
  SigintGuard() {
    sigint_received = 0;
    struct sigaction action = {};
    action.sa_handler = on_sigint;
    action.sa_flags = SA_RESETHAND;
    sigemptyset(&action.sa_mask);
    sigaction(SIGINT, &action, &previous_);
  }
  ~SigintGuard() { sigaction(SIGINT, &previous_, nullptr); }
  SigintGuard(const SigintGuard&) = delete;
  SigintGuard& operator=(const SigintGuard&) = delete;

 private:
  struct sigaction previous_ = {};
};

// Every field in which a checkpoint's JSON `saved` and this run's `current` differ, as
// "name: checkpoint A, this run B (--flag)", joined by "; "; `fields` maps each key compared to
// its flag (or ""). Nested objects (the tokenizer) are compared field by field, as "key.field".
std::string differences(const nlohmann::json& saved, const nlohmann::json& current,
                        const std::vector<std::pair<std::string, std::string>>& fields,
                        const std::string& prefix = "") {
  auto shown = [](const nlohmann::json* j) {
    const std::string text = j ? j->dump() : "(none)";
    return text.size() > 60 ? text.substr(0, 57) + "..." : text;
  };
  std::string out;
  auto add = [&](const std::string& part) { out += (out.empty() || part.empty() ? "" : "; ") + part; };
  for (const auto& [key, flag] : fields) {
    const nlohmann::json* a = saved.contains(key) ? &saved.at(key) : nullptr;
    const nlohmann::json* b = current.contains(key) ? &current.at(key) : nullptr;
    if (a && b && a->is_object() && b->is_object()) {
      std::vector<std::pair<std::string, std::string>> inner;
      for (const auto& [k, v] : a->items()) inner.emplace_back(k, flag);
      for (const auto& [k, v] : b->items()) {
        if (!a->contains(k)) inner.emplace_back(k, flag);
      }
      add(differences(*a, *b, inner, prefix + key + "."));
    } else if ((a == nullptr) != (b == nullptr) || (a != nullptr && *a != *b)) {
      add(prefix + key + ": checkpoint " + shown(a) + ", this run " + shown(b) +
          (flag.empty() ? "" : " (" + flag + ")"));
    }
  }
  return out;
}

// Throws hg::Error naming `dir` unless the checkpoint's model config `saved` equals this run's
// `current` (ModelConfig's operator==: every architecture field, the labels, the tokenizer). The
// message names each config.json field that differs, with both values and the flag that sets it:
// the fields below first, then any other in key order.
void check_same_model(const io::ModelConfig& saved, const io::ModelConfig& current, const std::string& dir) {
  if (saved == current) return;
  const nlohmann::json a = io::model_config_to_json(saved), b = io::model_config_to_json(current);
  std::vector<std::pair<std::string, std::string>> fields = {{"hidden_size", "--d-model"},
                                                             {"num_hidden_layers", "--layers"},
                                                             {"num_attention_heads", "--heads"},
                                                             {"intermediate_size", "--d-ff"},
                                                             {"max_position_embeddings", "--max-len"},
                                                             {"vocab_size", "--buckets"},
                                                             {"position_embedding", "--tokenizer"},
                                                             {"num_labels", "the training data's labels"},
                                                             {"id2label", "the training data's labels"},
                                                             {"tokenizer", "--tokenizer, --ngram-*, --buckets"},
                                                             {"dropout", "--dropout"},
                                                             {"pooling", "--pooling"}};
  for (const nlohmann::json* j : {&a, &b}) {
    for (auto it = j->begin(); it != j->end(); ++it) {
      const std::string& key = it.key();
      const auto listed = [&key](const auto& field) { return field.first == key; };
      if (std::none_of(fields.begin(), fields.end(), listed)) fields.emplace_back(key, "");
    }
  }
  const std::string diff = differences(a, b, fields);
  fail(dir, ": the checkpoint does not match this run: ", diff.empty() ? "the model configs differ" : diff);
}

// What every rank must hold alike before a data-parallel run starts: the arguments, the model's
// config, and fingerprints of the data sets (their texts and labels).
nlohmann::json run_identity(const TrainingArguments& args, const nlohmann::json& model_config,
                            const data::Dataset& train, const data::Dataset* eval) {
  auto digest = [](const data::Dataset& d) {
    uint64_t h = kFnv1aOffset;
    for (const data::Example& e : d.examples) {
      h = fnv1a(e.text.data(), e.text.size() + 1, h);  // the terminating '\0' separates texts
      h = fnv1a(&e.label, sizeof e.label, h);
    }
    return std::to_string(d.size()) + " examples, fingerprint " + std::to_string(h);
  };
  return {{"training_args", args.to_json()},
          {"model", model_config},
          {"train_data", digest(train)},
          {"eval_data", eval ? digest(*eval) : "none"}};
}

// Predictions over `d`: under several ranks rank r runs examples r, r + W, ... and every rank
// gathers the others', so each holds the single-process result's layout (examples in order;
// the loss the mean of the ranks' summed losses, added in rank order).
EvalPrediction sharded_evaluation(Accelerator& acc, nn::TextClassifier& model, const data::Dataset& d,
                                  int64_t batch_size, const data::TokenizerConfig& tokenizer) {
  const int world = acc.num_processes(), rank = acc.process_index();
  if (world == 1) return run_evaluation(model, d, batch_size, acc.mixed_precision(), tokenizer);
  data::Dataset shard;
  shard.source = d.source;
  shard.label_names = d.label_names;
  for (size_t i = size_t(rank); i < d.examples.size(); i += size_t(world)) shard.examples.push_back(d.examples[i]);
  EvalPrediction mine;
  mine.classes = model.config.classes;
  if (!shard.examples.empty()) mine = run_evaluation(model, shard, batch_size, acc.mixed_precision(), tokenizer);
  dist::Communicator& comm = acc.ddp().communicator();
  const std::vector<double> losses = dist::allgather_value(comm, mine.loss * double(shard.size()));
  const std::vector<int64_t> truncated = dist::allgather_value(comm, mine.truncated);
  auto gather = [&](const auto& values) {
    using T = typename std::decay_t<decltype(values)>::value_type;
    std::vector<std::vector<T>> out;
    for (const auto& bytes : dist::allgather(comm, std::as_bytes(std::span(values)))) {
      out.emplace_back(bytes.size() / sizeof(T));
      if (!bytes.empty()) std::memcpy(out.back().data(), bytes.data(), bytes.size());
    }
    return out;
  };
  const auto logits = gather(mine.logits);
  const auto predictions = gather(mine.predictions);
  const auto labels = gather(mine.label_ids);
  EvalPrediction p;
  p.classes = mine.classes;
  const size_t k = size_t(p.classes);
  for (size_t i = 0; i < d.examples.size(); ++i) {
    const size_t r = i % size_t(world), j = i / size_t(world);
    p.logits.insert(p.logits.end(), logits[r].begin() + std::ptrdiff_t(j * k),
                    logits[r].begin() + std::ptrdiff_t((j + 1) * k));
    p.predictions.push_back(predictions[r][j]);
    p.label_ids.push_back(labels[r][j]);
  }
  double loss_sum = 0;
  for (int r = 0; r < world; ++r) {
    loss_sum += losses[size_t(r)];
    p.truncated += truncated[size_t(r)];
  }
  p.loss = loss_sum / double(d.size());
  return p;
}

// What the ranks must agree on about --resume: the path and the SHA-256 of the checkpoint's
// manifest (a broken checkpoint is reported by restore, on every rank, after this check).
nlohmann::json resume_identity(const std::string& checkpoint) {
  if (checkpoint.empty()) return {{"resume", nullptr}};
  std::string manifest;
  try {
    manifest = io::read_file_bounded(std::filesystem::path(checkpoint) / io::kManifestFile, io::kMaxJsonFileBytes);
  } catch (const Error&) {  // restore names the problem
  }
  return {{"resume", checkpoint}, {"manifest_sha256", io::sha256_hex(manifest.data(), manifest.size())}};
}

// What casts of gradients to the 16-bit wire format did (a step's, or a logging window's), as the
// log and the inspector show it.
nlohmann::json wire_counts(const precision::NumericsStats& w) {
  return {{"values", w.total()}, {"flushed", w.underflow}, {"subnormal", w.subnormal}, {"overflowed", w.overflow}};
}

}  // namespace

struct Trainer::Parts {
  // The steps since the last log entry (the sum of their losses, their count, how many the
  // scaler skipped) and whether the scaler's health warning was given: one train() call's.
  struct Window {
    double loss = 0;
    int64_t steps = 0, skipped = 0;
    bool warned = false;
    precision::NumericsStats wire;  // data-parallel: what the 16-bit gradient casts did
  };
  data::Tokenizer tokenizer;
  std::unique_ptr<data::DataLoader> loader;
  std::unique_ptr<optim::AdamW> optimizer;
  std::unique_ptr<optim::LrScheduler> scheduler;
  std::ofstream log_file;
  Window window;
  std::unique_ptr<io::OutputDirLock> lock;  // rank 0, while train() runs
};

Trainer::Trainer(nn::TextClassifier& model, TrainingArguments args, const data::Dataset& train_dataset,
                 const data::Dataset* eval_dataset, ComputeMetrics compute_metrics,
                 std::vector<std::shared_ptr<TrainerCallback>> callbacks, dist::Communicator* communicator)
    : model_(model),
      args_(std::move(args)),
      train_dataset_(train_dataset),
      eval_dataset_(eval_dataset),
      compute_metrics_(compute_metrics ? compute_metrics : classification_metrics),
      callbacks_(std::move(callbacks)),
      parts_(std::make_unique<Parts>()) {
  // Under several ranks, a check that fails on one fails on all, and the ranks must then run the
  // same arguments, model and data, before any step that could wait for a rank running another.
  dist::Communicator& comm = communicator ? *communicator : dist::world();
  dist::agree(comm, [&] {
    // Custom metrics' names are known only after an evaluation: maybe_evaluate_and_save checks them.
    args_.validate(compute_metrics ? std::vector<std::string>{} : TrainingArguments::standard_metrics());
    check(args_.eval_strategy == IntervalStrategy::kNo || eval_dataset_ != nullptr, "Trainer: eval_strategy '",
          kIntervalStrategyNames.name(args_.eval_strategy), "' needs an eval dataset");
    check(int64_t(train_dataset.label_names.size()) == model.config.classes, "Trainer: the training set has ",
          train_dataset.label_names.size(), " classes but the model has ", model.config.classes);
    parts_->tokenizer = data::Tokenizer(args_.tokenizer, model.config.pooling == nn::Pooling::kCls);
    // The rule every saved config.json is loaded with: what this run saves must load.
    io::check_model_config({model.config, train_dataset.label_names, args_.tokenizer}, "Trainer: the model's config");
  });
  dist::check_same(
      comm,
      run_identity(args_, io::model_config_to_json({model.config, train_dataset.label_names, args_.tokenizer}),
                   train_dataset, eval_dataset),
      "the runs' arguments, model or data");
  accelerator_ =
      std::make_unique<Accelerator>(AcceleratorOptions{.mixed_precision = args_.mixed_precision,
                                                       .gradient_accumulation_steps = args_.gradient_accumulation_steps,
                                                       .ddp = {.wire = args_.ddp_comm},
                                                       .communicator = &comm});
  parts_->loader = std::make_unique<data::DataLoader>(
      train_dataset, parts_->tokenizer,
      data::DataLoaderOptions{args_.per_device_train_batch_size, true, false, args_.seed, model.config.max_len,
                              accelerator_->num_processes(), accelerator_->process_index(), args_.group_by_length});
  state_.max_steps =
      args_.max_steps > 0 ? args_.max_steps : int64_t(std::ceil(args_.num_train_epochs * double(steps_per_epoch())));
  std::optional<optim::OwnGroup> table;  // the token table's own learning rate
  if (args_.embedding_learning_rate) {
    table = optim::OwnGroup{"token_embedding.weight", *args_.embedding_learning_rate, args_.weight_decay};
  }
  parts_->optimizer = std::make_unique<optim::AdamW>(
      optim::decay_groups(model.named_parameters(), args_.learning_rate, args_.weight_decay, table));
  const int64_t warmup =
      args_.warmup_steps > 0 ? args_.warmup_steps : int64_t(std::ceil(args_.warmup_ratio * double(state_.max_steps)));
  parts_->scheduler =
      std::make_unique<optim::LrScheduler>(*parts_->optimizer, args_.lr_scheduler_type, warmup, state_.max_steps);
  accelerator_->prepare(model, *parts_->optimizer, parts_->scheduler.get());
  accelerator_->mixed_precision().set_seed(args_.seed);  // stochastic rounding draws from the run's seed
  accelerator_->register_generator("dropout", *model.dropout_gen);
  accelerator_->register_loop_state({.save = [this] { return state_.to_json(); },
                                     .load =
                                         [this](const nlohmann::json& j, const std::string& source) {
                                           const int64_t max_steps =
                                               state_.max_steps;  // this run's arguments say how far to train
                                           state_ = TrainerState::from_json(j, source);
                                           state_.max_steps = max_steps;
                                         },
                                     .per_rank_keys = {"log_history"}});  // each rank logs its own wire bytes and casts
}

Trainer::~Trainer() = default;

int64_t Trainer::steps_per_epoch() const {
  const int64_t n = args_.gradient_accumulation_steps;
  return (parts_->loader->num_batches() + n - 1) / n;
}

int64_t Trainer::truncated_train_texts() const { return parts_->loader->truncated(); }

void Trainer::log(nlohmann::json entry) {
  entry["step"] = state_.global_step;
  entry["epoch"] = state_.epoch;
  state_.log_history.push_back(entry);
  if (parts_->log_file.is_open()) parts_->log_file << entry.dump() << '\n' << std::flush;  // rank 0 only
  for (auto& c : callbacks_) c->on_log(state_, entry);
}

void Trainer::warn(const std::string& text) {
  if (text.empty()) return;
  if (accelerator_->is_main_process()) std::fprintf(stderr, "warning: %s\n", text.c_str());
  log({{"warning", text}});
}

Metrics Trainer::evaluate(const data::Dataset* dataset, const std::string& prefix) {
  const data::Dataset* d = dataset ? dataset : eval_dataset_;
  check(d != nullptr, "Trainer::evaluate: no dataset");
  const PredictionOutput out = predict(*d);  // keys "test_*", renamed below
  Metrics metrics;
  for (const auto& [key, value] : out.metrics) metrics[prefix + key.substr(4)] = value;
  nlohmann::json entry(metrics);
  log(entry);
  for (auto& c : callbacks_) c->on_evaluate(state_, metrics);
  return metrics;
}

PredictionOutput Trainer::predict(const data::Dataset& dataset) {
  check(dataset.label_names.size() == train_dataset_.label_names.size(), dataset.source, ": ",
        dataset.label_names.size(), " classes, the model was trained on ", train_dataset_.label_names.size());
  PredictionOutput out;
  out.prediction =
      sharded_evaluation(*accelerator_, model_, dataset, args_.per_device_eval_batch_size, args_.tokenizer);
  out.metrics["test_loss"] = out.prediction.loss;
  for (const auto& [key, value] : compute_metrics_(out.prediction)) out.metrics["test_" + key] = value;
  return out;
}

std::string Trainer::save_checkpoint() { return write_checkpoint(args_.save_only_model); }

std::string Trainer::write_checkpoint(bool model_only) {
  io::Checkpoint c = accelerator_->state_dict(model_only);  // the run's state (trainer_state: state_)
  c.config = io::model_config_to_json({model_.config, train_dataset_.label_names, args_.tokenizer});
  c.tokenizer_model = args_.tokenizer.spm_model;  // sentencepiece.model (empty: none)
  c.trainer_state["training_args"] = args_.to_json();
  // Rank 0 writes for every rank (the replicas are identical); the others learn whether it could.
  std::filesystem::path dir =
      std::filesystem::path(args_.output_dir) / ("checkpoint-" + std::to_string(state_.global_step));
  dist::agree(accelerator_->ddp().communicator(), [&] {
    if (!accelerator_->is_main_process()) return;
    dir = io::save_checkpoint(args_.output_dir, state_.global_step, c);
    std::filesystem::path keep;
    if (!state_.best_model_checkpoint.empty()) keep = state_.best_model_checkpoint;
    if (args_.save_total_limit > 0) io::rotate_checkpoints(args_.output_dir, args_.save_total_limit, keep);
  });
  return dir.string();
}

// A function-try-block: a JSON field of the checkpoint that is missing or of the wrong type
// anywhere below becomes an error naming the checkpoint.
void Trainer::restore(const std::string& dir) try {
  const io::Checkpoint c = io::load_checkpoint(dir);
  check_resumable(c, dir);
  // What must match: the model (its architecture, labels and tokenizer), then the precision mode
  // (the weights' dtypes, the forward's numerics; the loss scaling may change). Each differing
  // field is named with both values.
  check_same_model(io::model_config_from_checkpoint(c, dir),  // (the sentencepiece model attached)
                   {model_.config, train_dataset_.label_names, args_.tokenizer}, dir);
  const TrainingArguments saved_args =
      TrainingArguments::from_json(c.trainer_state.at("training_args"), dir + "/trainer_state.json");
  optim::MixedPrecisionOptions saved = saved_args.mixed_precision;
  saved.loss_scaling = args_.mixed_precision.loss_scaling;
  if (!(saved.resolved() == args_.mixed_precision.resolved())) {
    const nlohmann::json a = optim::mixed_precision_to_json(saved.resolved()),
                         b = optim::mixed_precision_to_json(args_.mixed_precision.resolved());
    std::vector<std::pair<std::string, std::string>> keys;
    for (const auto& [k, v] : a.items()) keys.emplace_back(k, "");
    fail(dir, ": the checkpoint was saved with another precision: ", differences(a, b, keys));
  }
  accelerator_->load_state_dict(c, dir);  // the run's state: weights to loop counters
} catch (const nlohmann::json::exception& e) {
  fail(dir, ": a checkpoint file has a missing or mistyped field (", e.what(), ")");
}

void Trainer::maybe_evaluate_and_save(bool epoch_end) {
  const int64_t step = state_.global_step;
  const int64_t eval_every = args_.eval_steps > 0 ? args_.eval_steps : args_.logging_steps;
  using S = IntervalStrategy;
  const bool evaluate_now = (args_.eval_strategy == S::kSteps && !epoch_end && step % eval_every == 0) ||
                            (args_.eval_strategy == S::kEpoch && epoch_end);
  const bool save_now = (args_.save_strategy == S::kSteps && !epoch_end && step % args_.save_steps == 0) ||
                        (args_.save_strategy == S::kEpoch && epoch_end);
  std::optional<double> metric;
  if (evaluate_now) {
    const Metrics m = evaluate();
    const auto it = m.find(args_.best_metric_key());
    check(it != m.end(), "training arguments: metric_for_best_model '", args_.metric_for_best_model,
          "' is not among the evaluation's metrics");
    metric = it->second;
  }
  if (save_now) {
    const bool better =
        metric && (!state_.best_metric || (args_.best_metric_greater_is_better() ? *metric > *state_.best_metric
                                                                                 : *metric < *state_.best_metric));
    if (better) {
      state_.best_metric = metric;
      state_.best_model_checkpoint =
          (std::filesystem::path(args_.output_dir) / ("checkpoint-" + std::to_string(step))).string();
    }
    save_checkpoint();
  }
}

// Resumes from `checkpoint` if given (a bad one leaves output_dir untouched), takes output_dir's
// lock (halfgrad/io/output_lock.h), opens the log (report_to jsonl). Under several ranks the checkpoint (its
// path and its manifest's SHA-256, which covers every file's) must be the same on every rank before
// restore runs a collective: a --resume given to one rank only is one agreed error, not a hang.
void Trainer::begin_training(const std::string& checkpoint) {
  dist::Communicator& comm = accelerator_->ddp().communicator();
  dist::check_same(comm, resume_identity(checkpoint), "the runs' --resume checkpoints");
  if (!checkpoint.empty()) dist::agree(comm, [&] { restore(checkpoint); });
  dist::agree(comm, [&] {
    if (!accelerator_->is_main_process()) return;  // only rank 0 writes
    parts_->lock = std::make_unique<io::OutputDirLock>(args_.output_dir);
    if (std::find(args_.report_to.begin(), args_.report_to.end(), "jsonl") == args_.report_to.end()) return;
    parts_->log_file.open(std::filesystem::path(args_.output_dir) / "log.jsonl", std::ios::app);
    check(parts_->log_file.good(), args_.output_dir, "/log.jsonl: cannot open for writing");
  });
  parts_->window = {};
}

// At the start of `epoch`: returns its first batch, past the ones earlier steps consumed on resume.
int64_t Trainer::begin_epoch(int64_t epoch) {
  parts_->loader->set_epoch(epoch);
  const int64_t first_batch = (state_.global_step - epoch * steps_per_epoch()) * args_.gradient_accumulation_steps;
  if (first_batch == 0) {
    state_.epoch_loss_sum = 0;
    state_.epoch_loss_steps = 0;
  }
  return first_batch;
}

// One optimizer step over the micro-batches from `first_batch`: forward and backward of each,
// clip, step; then the state's step, epoch and loss sums.
Trainer::StepOutcome Trainer::training_step(int64_t epoch, int64_t first_batch) {
  data::DataLoader& loader = *parts_->loader;
  optim::MixedPrecision& mp = accelerator_->mixed_precision();
  const int64_t end = std::min(loader.num_batches(), first_batch + args_.gradient_accumulation_steps);
  StepOutcome step;  // step.loss: summed over this step's micro-batches, then their mean
  dist::DistributedDataParallel& ddp = accelerator_->ddp();
  ddp.begin_step(*model_.dropout_gen);
  const RoundingScope rounding = mp.rounding_scope(uint64_t(state_.global_step) << 40);
  for (int64_t micro = first_batch; micro < end; ++micro) {
    const data::Batch batch = loader.batch(micro);
    Tensor loss;
    {
      Autocast guard = accelerator_->autocast();
      loss = cross_entropy(model_.forward(batch.ids, batch.attention_mask), batch.labels,
                           {.label_smoothing = args_.label_smoothing_factor});
    }
    const float value = loss.item();
    check(std::isfinite(value) || mp.scaler().is_enabled(), "training loss is ",
          std::isnan(value) ? "NaN"
          : value > 0       ? "inf"
                            : "-inf",
          " at step ", state_.global_step + 1,
          " (no loss scaler to skip the step): stopping instead of training on garbage; "
          "try a lower learning_rate, or --detect-anomaly to find the op");
    accelerator_->backward(loss);
    step.loss += value;
  }
  step.loss /= double(end - first_batch);
  if (ddp.size() > 1) {  // the global batch's loss, as one process would log it (shards are equal)
    double sum = 0;
    for (const double loss : dist::allgather_value(ddp.communicator(), step.loss)) sum += loss;
    step.loss = sum / double(ddp.size());
  }
  step.scale = mp.scaler().get_scale();
  step.grad_norm = args_.max_grad_norm > 0 ? accelerator_->clip_grad_norm(args_.max_grad_norm) : 0.0f;
  step.stepped = accelerator_->step();
  ddp.end_step(*model_.dropout_gen);
  ++state_.global_step;
  if (args_.ddp_check_every > 0 && state_.global_step % args_.ddp_check_every == 0) {
    accelerator_->check_replicas(state_.global_step);
  }
  state_.epoch = double(epoch) + double(end) / double(loader.num_batches());
  if (!step.stepped) ++state_.skipped_steps;
  if (std::isfinite(step.loss)) {  // an inf/NaN loss (a step the scaler skips) would poison the means
    state_.loss_sum += step.loss;
    ++state_.loss_steps;
    state_.epoch_loss_sum += step.loss;
    ++state_.epoch_loss_steps;
  }
  return step;
}

// After each optimizer step: callbacks, the log entry every logging_steps, the scaler's health
// warning (once), evaluation and checkpoint, and SIGINT (save the step, stop). Returns whether
// training stops after this step.
bool Trainer::end_step(const StepOutcome& step, bool& interrupted) {
  Parts::Window& window = parts_->window;
  const optim::GradScaler& scaler = accelerator_->mixed_precision().scaler();
  bool stop = false;
  window.loss += step.loss;
  ++window.steps;
  window.wire.merge(accelerator_->ddp().last_reduce().wire);
  if (!step.stepped) ++window.skipped;
  nlohmann::json step_info = {{"step", state_.global_step},
                              {"loss", step.loss},
                              {"scale", step.scale},
                              {"stepped", step.stepped},
                              {"grad_norm", step.grad_norm}};
  if (const dist::DistributedDataParallel& ddp = accelerator_->ddp();
      ddp.size() > 1 && ddp.options().wire != dist::WireFormat::kF32) {
    step_info["ddp_wire"] = wire_counts(ddp.last_reduce().wire);  // this step's cast to the wire format
    step_info["ddp_wire"]["format"] = dist::wire_format_name(ddp.options().wire);
  }
  for (auto& c : callbacks_) {
    c->on_step_end(state_, step_info);
    stop = stop || c->should_stop;
  }
  if (state_.global_step % args_.logging_steps == 0) {
    nlohmann::json entry = {{"loss", window.loss / double(window.steps)},
                            {"learning_rate", parts_->scheduler->last_lr()},
                            {"grad_norm", step.grad_norm},
                            {"loss_scale", scaler.get_scale()},
                            {"skipped_steps", window.skipped}};
    const dist::DistributedDataParallel& ddp = accelerator_->ddp();
    if (ddp.size() > 1) {  // the wire: this rank's bytes per step, and what a 16-bit cast lost
      entry["ddp_bytes_per_step"] = ddp.last_reduce().bytes;
      if (ddp.options().wire != dist::WireFormat::kF32) {
        entry["ddp_wire"] = wire_counts(window.wire);
      }
    }
    log(entry);
    window.loss = 0;
    window.steps = 0;
    window.skipped = 0;
    window.wire = {};
  }
  std::string warning;
  if (!window.warned && !(warning = scaler.health_warning()).empty()) {
    if (!last_anomaly().op.empty()) warning += "; anomaly mode: " + last_anomaly().message();
    warn(warning);
    window.warned = true;
  }
  maybe_evaluate_and_save(false);
  if (sigint_received) {
    interrupted = stop = true;
    if (!io::checkpoint_complete(std::filesystem::path(args_.output_dir) /
                                 ("checkpoint-" + std::to_string(state_.global_step)))) {
      write_checkpoint(/*model_only=*/false);  // what the printed --resume command needs
    }
  }
  for (auto& c : callbacks_) stop = stop || c->should_stop;
  return stop || state_.global_step >= state_.max_steps;
}

// At an epoch's end (or the run's last step): the epoch's evaluation and checkpoint and the
// callbacks. Returns whether a callback stops training.
bool Trainer::end_epoch() {
  maybe_evaluate_and_save(true);
  bool stop = false;
  for (auto& c : callbacks_) {
    c->on_epoch_end(state_);
    stop = stop || c->should_stop;
  }
  return stop;
}

// The best checkpoint's weights back (load_best_model_at_end), the summary, its log entry.
TrainOutput Trainer::end_training(double seconds, int64_t start_step, bool interrupted) {
  if (args_.load_best_model_at_end && !interrupted && !state_.best_model_checkpoint.empty()) {
    load_model_state(accelerator_->mixed_precision(), model_, io::load_checkpoint(state_.best_model_checkpoint),
                     state_.best_model_checkpoint);
  }
  if (!interrupted && state_.global_step > start_step) {
    warn(stalled_loss_warning(state_.epoch_train_loss(), model_.config.classes, state_.global_step, steps_per_epoch()));
  }
  TrainOutput out;
  out.global_step = state_.global_step;
  out.interrupted = interrupted;
  out.training_loss = state_.train_loss();
  out.metrics = {{"train_runtime", seconds},
                 {"train_steps_per_second", double(state_.global_step - start_step) / std::max(seconds, 1e-9)},
                 {"train_loss", out.training_loss},
                 {"skipped_steps", double(state_.skipped_steps)},
                 {"epoch", state_.epoch}};
  nlohmann::json summary(out.metrics);
  summary["threads"] = threads_ ? threads_->summary() : std::to_string(omp_get_max_threads());
  if (interrupted) summary["interrupted"] = true;
  log(summary);
  for (auto& c : callbacks_) c->on_train_end(state_);
  parts_->log_file.close();
  return out;
}

TrainOutput Trainer::train(const std::string& resume_from_checkpoint) {
  struct ReleaseLock {  // at the end of train(), however it ends
    Parts& parts;
    ~ReleaseLock() { parts.lock.reset(); }
  } release{*parts_};
  begin_training(resume_from_checkpoint);
  if (state_.global_step == 0) warn(warmup_warning(parts_->scheduler->warmup_steps(), state_.max_steps));
  if (!resume_from_checkpoint.empty() && state_.global_step >= state_.max_steps && accelerator_->is_main_process()) {
    std::fprintf(stderr,
                 "note: %s is at step %lld, which is not before max_steps %lld (--max-steps or --epochs): "
                 "nothing to train; give a larger --max-steps or --epochs to continue\n",
                 resume_from_checkpoint.c_str(), static_cast<long long>(state_.global_step),
                 static_cast<long long>(state_.max_steps));
  }
  std::unique_ptr<DetectAnomaly> anomaly;
  if (args_.detect_anomaly)
    anomaly =
        std::make_unique<DetectAnomaly>(/*throw_on_anomaly=*/!accelerator_->mixed_precision().scaler().is_enabled());
  for (auto& c : callbacks_) c->on_train_begin(state_, args_);
  const auto start = std::chrono::steady_clock::now();
  const int64_t start_step = state_.global_step, per_epoch = steps_per_epoch();
  bool stop = false, interrupted = false;
  std::optional<SigintGuard> sigint;  // several ranks: mpirun handles Ctrl-C (it ends the job)
  if (accelerator_->num_processes() == 1) sigint.emplace();
  model_.train();
  for (int64_t epoch = state_.global_step / per_epoch; !stop && state_.global_step < state_.max_steps; ++epoch) {
    for (int64_t b = begin_epoch(epoch); b < parts_->loader->num_batches() && !stop;
         b += args_.gradient_accumulation_steps) {
      if (threads_) threads_->before_step();
      const auto step_start = std::chrono::steady_clock::now();
      const StepOutcome step = training_step(epoch, b);
      if (threads_) {
        threads_->after_step(std::chrono::duration<double>(std::chrono::steady_clock::now() - step_start).count());
      }
      stop = end_step(step, interrupted);
    }
    if (!interrupted && (state_.global_step % per_epoch == 0 || state_.global_step >= state_.max_steps)) {
      stop = end_epoch() || stop;
    }
  }
  if (threads_ && threads_->max_threads() > 1) omp_set_num_threads(threads_->best());
  return end_training(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), start_step,
                      interrupted);
}

void Trainer::adapt_threads(AdaptiveThreads policy) {
  check(accelerator_->num_processes() == 1,
        "Trainer: adaptive threads (--threads auto) need one process, this run has ", accelerator_->num_processes(),
        ": under mpirun a step waits for the slowest rank, so its time does not measure "
        "the local team; give --threads N");
  threads_ = std::move(policy);
}

}  // namespace hg::train
