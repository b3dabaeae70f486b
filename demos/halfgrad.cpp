// halfgrad: train, evaluate and use a transformer text classifier from the command line.
//   halfgrad train [flags]          with no flags: the language-id main job (fp16 O2)
//   halfgrad eval --checkpoint DIR --data FILE.tsv
//   halfgrad predict --checkpoint DIR [TEXT...]   (or one text per stdin line)
//   halfgrad export-langid --out DIR              the language-id split as train.tsv/test.tsv
// Every error is one line on stderr and a non-zero exit code.
#include <omp.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>

#include "autograd/error.h"
#include "autograd/parallel.h"
#include "data/dataset.h"
#include "nn/text_classifier.h"
#include "train/checkpoint.h"
#include "train/evaluation.h"
#include "train/metrics.h"
#include "train/model_config.h"
#include "train/numerics_inspector.h"
#include "train/trainer.h"

namespace {

using namespace hg;
using train::Metrics;

// Progress on stderr (only on a terminal), and a table row on stdout after every evaluation
// (every epoch by default), or every epoch when there is no evaluation data.
class ConsoleCallback : public train::TrainerCallback {
 public:
  explicit ConsoleCallback(bool has_eval) : has_eval_(has_eval) {}

  void on_train_begin(const train::TrainerState& state, const train::TrainingArguments&) override {
    start_ = std::chrono::steady_clock::now();
    first_step_ = state.global_step;
    std::printf("%5s %8s %10s %10s %9s %8s %8s %10s %8s\n", "epoch", "step", "train_loss", "eval_loss", "accuracy",
                "f1", "skipped", "scale", "time");
    std::fflush(stdout);
  }

  void on_step_end(const train::TrainerState& state, const nlohmann::json& info) override {
    epoch_loss_ += info.at("loss").get<double>();
    ++epoch_steps_;
    scale_ = info.at("scale").get<double>();
    if (!info.at("stepped").get<bool>()) ++epoch_skipped_;
    if (!isatty(STDERR_FILENO)) return;
    const double seconds = elapsed();
    const double rate = double(state.global_step - first_step_) / std::max(seconds, 1e-9);
    const double eta = rate > 0 ? double(state.max_steps - state.global_step) / rate : 0;
    const int width = 24, filled = int(width * state.global_step / std::max<int64_t>(1, state.max_steps));
    std::fprintf(stderr, "\r[%s%s] %lld/%lld %.1f steps/s loss %.4f scale %g ETA %d:%02d  ",
                 std::string(size_t(filled), '#').c_str(), std::string(size_t(width - filled), '.').c_str(),
                 static_cast<long long>(state.global_step), static_cast<long long>(state.max_steps), rate,
                 info.at("loss").get<double>(), scale_, int(eta) / 60, int(eta) % 60);
  }

  void on_evaluate(const train::TrainerState& state, const Metrics& m) override {
    row(state, m.at("eval_loss"), m.at("eval_accuracy"), m.at("eval_f1"));
  }

  void on_epoch_end(const train::TrainerState& state) override {
    if (!has_eval_) row(state, NAN, NAN, NAN);  // otherwise on_evaluate prints the row
  }

 private:
  double elapsed() const { return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count(); }
  void row(const train::TrainerState& state, double loss, double accuracy, double f1) {
    if (isatty(STDERR_FILENO)) std::fprintf(stderr, "\r%80s\r", "");
    std::printf("%5.2f %8lld %10.4f %10.4f %8.2f%% %8.4f %8lld %10g %7.0fs\n", state.epoch,
                static_cast<long long>(state.global_step), epoch_loss_ / double(std::max<int64_t>(epoch_steps_, 1)),
                loss, 100 * accuracy, f1, static_cast<long long>(epoch_skipped_), scale_, elapsed());
    std::fflush(stdout);
    epoch_loss_ = 0;
    epoch_steps_ = 0;
    epoch_skipped_ = 0;
  }

  bool has_eval_;
  std::chrono::steady_clock::time_point start_;
  int64_t first_step_ = 0, epoch_steps_ = 0, epoch_skipped_ = 0;
  double epoch_loss_ = 0, scale_ = 1;
};

struct TrainOptions {
  std::string train_file, eval_file, precision = "fp16", opt_level = "O2", resume, pooling = "mean";
  bool fp16 = false, bf16 = false;
  int threads = 0;
  int64_t d_model = 128, heads = 4, layers = 2, d_ff = 512, max_len = 32;
  float dropout = 0.1f;
  int64_t early_stopping = 0;
  int64_t inspect = 0;  // NumericsInspector every N optimizer steps (0: off)
  int64_t train_per_language = 6000, test_per_language = 1000;
  train::TrainingArguments args;
};

void add_train_flags(CLI::App& app, TrainOptions& o) {
  train::TrainingArguments& a = o.args;
  a.output_dir = "halfgrad-output";
  a.num_train_epochs = 8;
  a.learning_rate = 1e-3f;
  a.warmup_steps = 100;
  a.lr_scheduler_type = "cosine";
  a.eval_strategy = "epoch";
  a.save_strategy = "epoch";
  a.save_total_limit = 2;
  a.seed = 0;
  a.logging_steps = 50;
  app.add_option("--train", o.train_file, "training data, label<TAB>text per line (default: the language-id set)")
      ->check(CLI::ExistingFile);
  app.add_option("--eval", o.eval_file, "evaluation data (default with --train: none)")->check(CLI::ExistingFile);
  app.add_option("--precision", o.precision, "fp32 | fp16 | bf16 | pure_fp16")
      ->capture_default_str()
      ->check(CLI::IsMember({"fp32", "fp16", "bf16", "pure_fp16"}));
  app.add_flag("--fp16", o.fp16, "shorthand for --precision fp16");
  app.add_flag("--bf16", o.bf16, "shorthand for --precision bf16");
  app.add_option("--opt-level", o.opt_level, "fp16 master weights: O1 (f32 model) | O2 (f16 model, f32 masters)")
      ->capture_default_str()
      ->check(CLI::IsMember({"O1", "O2"}));
  app.add_option("--loss-scale", a.loss_scale, "dynamic | none | a static scale")->capture_default_str();
  app.add_option("--epochs", a.num_train_epochs, "training epochs")
      ->capture_default_str()
      ->check(CLI::Range(1e-3, 1e6));
  app.add_option("--max-steps", a.max_steps, "optimizer steps (overrides --epochs)")->check(CLI::PositiveNumber);
  app.add_option("--batch-size", a.per_device_train_batch_size, "training batch size")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 20));
  app.add_option("--eval-batch-size", a.per_device_eval_batch_size, "evaluation batch size")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 20));
  app.add_option("--lr", a.learning_rate, "peak learning rate")->capture_default_str();
  app.add_option("--weight-decay", a.weight_decay, "AdamW weight decay (matrices only)")->capture_default_str();
  app.add_option("--warmup-steps", a.warmup_steps, "linear warmup steps")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  app.add_option("--warmup-ratio", a.warmup_ratio, "warmup as a share of all steps");
  app.add_option("--scheduler", a.lr_scheduler_type, "linear | cosine | constant")->capture_default_str();
  app.add_option("--seed", a.seed, "random seed (weights, data order, dropout)")->capture_default_str();
  app.add_option("--threads", o.threads, "OpenMP threads (default: all cores)")->check(CLI::Range(1, 1024));
  app.add_option("--output-dir", a.output_dir, "checkpoints and logs")->capture_default_str();
  app.add_option("--resume", o.resume, "continue from a checkpoint directory")->check(CLI::ExistingDirectory);
  app.add_option("--eval-strategy,--evaluation-strategy", a.eval_strategy, "no | steps | epoch")->capture_default_str();
  app.add_option("--eval-steps", a.eval_steps, "evaluate every N steps (eval-strategy steps)");
  app.add_option("--logging-steps", a.logging_steps, "log every N steps")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--save-strategy", a.save_strategy, "no | steps | epoch")->capture_default_str();
  app.add_option("--save-steps", a.save_steps, "save every N steps (save-strategy steps)")->check(CLI::PositiveNumber);
  app.add_option("--save-total-limit", a.save_total_limit, "keep at most N checkpoints")->capture_default_str();
  app.add_option("--max-grad-norm", a.max_grad_norm, "gradient clipping (0: off)")->capture_default_str();
  app.add_option("--grad-accum", a.gradient_accumulation_steps, "gradient accumulation steps")
      ->check(CLI::PositiveNumber);
  app.add_flag("--load-best", a.load_best_model_at_end, "load the best checkpoint at the end");
  app.add_option("--metric", a.metric_for_best_model, "metric for the best model / early stopping")
      ->capture_default_str();
  app.add_option("--early-stopping", o.early_stopping, "stop after N evaluations without improvement")
      ->check(CLI::PositiveNumber);
  app.add_flag("--detect-anomaly", a.detect_anomaly, "name the first op that produces inf/NaN");
  app.add_option("--inspect", o.inspect,
                 "every N steps print per-tensor fp16 numerics (zeros, underflow, subnormals, headroom) and append "
                 "them to output_dir/numerics.jsonl; a skipped step names its first inf/NaN op")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 40));
  app.add_option("--max-len", o.max_len, "maximum tokens (bytes) per text")
      ->capture_default_str()
      ->check(CLI::Range(1, 4096));
  app.add_option("--d-model", o.d_model, "model width")->capture_default_str()->check(CLI::Range(1, 8192));
  app.add_option("--heads", o.heads, "attention heads (must divide d-model)")
      ->capture_default_str()
      ->check(CLI::Range(1, 256));
  app.add_option("--layers", o.layers, "encoder layers")->capture_default_str()->check(CLI::Range(0, 128));
  app.add_option("--d-ff", o.d_ff, "feed-forward width")->capture_default_str()->check(CLI::Range(1, 65536));
  app.add_option("--dropout", o.dropout, "dropout probability")->capture_default_str()->check(CLI::Range(0.0, 0.99));
  app.add_option("--pooling", o.pooling, "mean | cls")->capture_default_str()->check(CLI::IsMember({"mean", "cls"}));
  app.add_option("--train-per-language", o.train_per_language, "language-id: training words per language")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{1}, int64_t{100000}));
  app.add_option("--test-per-language", o.test_per_language, "language-id: test words per language")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{1}, int64_t{100000}));
}

int run_train(TrainOptions& o) {
  if (o.fp16) o.precision = "fp16";
  if (o.bf16) o.precision = "bf16";
  train::TrainingArguments& a = o.args;
  a.fp16 = o.precision == "fp16";
  a.bf16 = o.precision == "bf16";
  a.fp16_opt_level = o.opt_level;
  check(o.precision != "pure_fp16", "--precision pure_fp16 is for the master_weights demo, not for training runs");
  if (o.threads > 0) omp_set_num_threads(o.threads);

  data::Dataset train_set, eval_set;
  bool has_eval = true;
  if (o.train_file.empty()) {
    check(o.eval_file.empty(), "--eval needs --train (the default language-id set brings its own test split)");
    data::Split split = data::language_id_dataset(
        {.train_per_language = o.train_per_language, .test_per_language = o.test_per_language, .seed = a.seed});
    train_set = std::move(split.train);
    eval_set = std::move(split.test);
  } else {
    train_set = data::read_tsv(o.train_file);
    if (!o.eval_file.empty()) {
      eval_set = data::read_tsv(o.eval_file, &train_set.label_names);
    } else {
      has_eval = false;
      if (a.eval_strategy != "no") a.eval_strategy = "no";
    }
  }
  if (!has_eval && a.load_best_model_at_end) fail("--load-best needs evaluation data (--eval)");
  std::printf("%s\n", train_set.summary().c_str());
  if (has_eval) std::printf("%s\n", eval_set.summary().c_str());

  nn::ClassifierConfig config;
  config.vocab = o.pooling == "cls" ? 257 : 256;
  config.max_len = o.max_len;
  config.d_model = o.d_model;
  config.heads = o.heads;
  config.d_ff = o.d_ff;
  config.layers = o.layers;
  config.classes = int64_t(train_set.label_names.size());
  config.dropout = o.dropout;
  config.pooling = o.pooling == "cls" ? nn::Pooling::kCls : nn::Pooling::kMean;
  nn::TextClassifier model(config, a.seed);
  std::printf(
      "model: %lld parameters (d_model %lld, heads %lld, layers %lld, d_ff %lld, max_len %lld); "
      "precision %s%s; %d threads\n",
      static_cast<long long>(model.parameter_count()), static_cast<long long>(config.d_model),
      static_cast<long long>(config.heads), static_cast<long long>(config.layers), static_cast<long long>(config.d_ff),
      static_cast<long long>(config.max_len), o.precision.c_str(),
      a.fp16 ? (" " + a.fp16_opt_level + ", loss scale " + a.loss_scale).c_str() : "", omp_get_max_threads());

  std::vector<std::shared_ptr<train::TrainerCallback>> callbacks;
  callbacks.push_back(std::make_shared<ConsoleCallback>(has_eval && a.eval_strategy != "no"));
  if (o.early_stopping > 0) callbacks.push_back(std::make_shared<train::EarlyStoppingCallback>(a, o.early_stopping));
  if (o.inspect > 0) callbacks.push_back(std::make_shared<train::InspectorCallback>(o.inspect, a.output_dir));
  train::Trainer trainer(model, a, train_set, has_eval ? &eval_set : nullptr, {}, callbacks);
  const int64_t truncated =
      data::DataLoader(train_set, data::ByteTokenizer(config.pooling == nn::Pooling::kCls), {.max_len = config.max_len})
          .truncated();
  if (truncated > 0) {
    std::printf("note: %lld training texts are longer than max_len %lld and were truncated\n",
                static_cast<long long>(truncated), static_cast<long long>(config.max_len));
  }
  const train::TrainOutput out = trainer.train(o.resume);

  std::printf("\n== summary ==\n");
  std::printf("steps %lld (%lld skipped by the loss scaler), %.1f s, %.2f steps/s, final train loss %.4f\n",
              static_cast<long long>(out.global_step), static_cast<long long>(trainer.state().skipped_steps),
              out.metrics.at("train_runtime"), out.metrics.at("train_steps_per_second"), out.training_loss);
  if (has_eval) {
    const train::PredictionOutput final = trainer.predict(eval_set);
    const train::ClassificationReport report = train::classification_report(
        final.prediction.predictions, final.prediction.label_ids, int64_t(train_set.label_names.size()));
    std::printf("test accuracy %.2f%%, macro-F1 %.4f, loss %.4f\n\n%s", 100 * report.accuracy, report.macro_f1,
                final.prediction.loss, train::format_report(report, train_set.label_names).c_str());
  }
  const auto checkpoints = train::list_checkpoints(a.output_dir);
  if (!checkpoints.empty()) std::printf("\nlatest checkpoint: %s\n", checkpoints.back().string().c_str());
  std::printf("log: %s/log.jsonl\n", a.output_dir.c_str());
  return 0;
}

// A model rebuilt from a checkpoint directory, with the precision it was trained in.
struct Loaded {
  std::unique_ptr<nn::TextClassifier> model;
  std::vector<std::string> labels;
  std::optional<DType> autocast;
};

Loaded load_model(const std::string& dir) {
  const train::Checkpoint c = train::load_checkpoint(dir);
  const train::ModelConfig config = train::model_config_from_json(c.config, dir + "/config.json");
  Loaded l;
  l.model = std::make_unique<nn::TextClassifier>(config.classifier, 0);
  l.labels = config.labels;
  try {
    l.model->load_state_dict(c.model);
  } catch (const Error& e) {
    fail(dir, "/model.safetensors: ", e.what());
  }
  const nlohmann::json args = c.trainer_state.value("training_args", nlohmann::json::object());
  if (args.value("fp16", false)) l.autocast = DType::f16;
  if (args.value("bf16", false)) l.autocast = DType::bf16;
  if (args.value("fp16", false) && args.value("fp16_opt_level", std::string("O1")) == "O2") l.model->to(DType::f16);
  return l;
}

int run_eval(const std::string& checkpoint, const std::string& data_file, int64_t batch_size) {
  Loaded l = load_model(checkpoint);
  const data::Dataset d = data::read_tsv(data_file, &l.labels);
  const train::EvalPrediction p = train::run_evaluation(*l.model, d, batch_size, l.autocast);
  const train::ClassificationReport r =
      train::classification_report(p.predictions, p.label_ids, int64_t(l.labels.size()));
  std::printf("%s\nloss %.4f\n%s", d.summary().c_str(), p.loss, train::format_report(r, l.labels).c_str());
  return 0;
}

int run_predict(const std::string& checkpoint, std::vector<std::string> texts) {
  Loaded l = load_model(checkpoint);
  if (texts.empty()) {
    std::string line;
    while (std::getline(std::cin, line)) {
      if (!line.empty()) texts.push_back(line);
    }
  }
  check(!texts.empty(), "predict: no texts given (as arguments or on stdin)");
  data::Dataset d;
  d.source = "input";
  d.label_names = l.labels;
  for (const std::string& t : texts) {
    check(data::valid_utf8(t), "predict: text '", t, "' is not valid UTF-8");
    d.examples.push_back({t, 0});
  }
  const train::EvalPrediction p = train::run_evaluation(*l.model, d, 256, l.autocast);
  for (size_t i = 0; i < texts.size(); ++i) {
    const std::vector<double> probs = train::probabilities(p.logits, int64_t(i), p.classes);
    std::printf("%s\t%s", texts[i].c_str(), l.labels[size_t(p.predictions[i])].c_str());
    for (size_t k = 0; k < probs.size(); ++k) std::printf("\t%s=%.3f", l.labels[k].c_str(), probs[k]);
    std::printf("\n");
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  hg::use_default_wait_policy(argv);  // before libgomp's threads exist: see autograd/parallel.h
  CLI::App app{"halfgrad: train a transformer text classifier with emulated mixed precision"};
  app.require_subcommand(0, 1);
  TrainOptions train_options;
  CLI::App* train_cmd = app.add_subcommand("train", "train a classifier (no flags: the language-id main job)");
  add_train_flags(*train_cmd, train_options);

  std::string checkpoint, data_file;
  int64_t eval_batch = 256;
  CLI::App* eval_cmd = app.add_subcommand("eval", "evaluate a checkpoint on labelled data");
  eval_cmd->add_option("--checkpoint", checkpoint, "checkpoint directory")->required()->check(CLI::ExistingDirectory);
  eval_cmd->add_option("--data", data_file, "label<TAB>text file")->required()->check(CLI::ExistingFile);
  eval_cmd->add_option("--batch-size", eval_batch, "batch size")->check(CLI::Range(int64_t{1}, int64_t{1} << 20));

  std::vector<std::string> texts;
  CLI::App* predict_cmd = app.add_subcommand("predict", "label texts with a checkpoint");
  predict_cmd->add_option("--checkpoint", checkpoint, "checkpoint directory")
      ->required()
      ->check(CLI::ExistingDirectory);
  predict_cmd->add_option("texts", texts, "texts to label (default: one per stdin line)");

  std::string export_dir;
  uint64_t export_seed = 0;
  CLI::App* export_cmd = app.add_subcommand("export-langid", "write the language-id split as train.tsv and test.tsv");
  export_cmd->add_option("--out", export_dir, "output directory")->required();
  export_cmd->add_option("--seed", export_seed, "split seed (as halfgrad train --seed)");

  CLI11_PARSE(app, argc, argv);
  try {
    if (*eval_cmd) return run_eval(checkpoint, data_file, eval_batch);
    if (*predict_cmd) return run_predict(checkpoint, texts);
    if (*export_cmd) {
      const data::Split split = data::language_id_dataset({.seed = export_seed});
      std::filesystem::create_directories(export_dir);
      data::write_tsv(split.train, export_dir + "/train.tsv");
      data::write_tsv(split.test, export_dir + "/test.tsv");
      std::printf("%s\n%s\nwritten to %s/train.tsv and %s/test.tsv\n", split.train.summary().c_str(),
                  split.test.summary().c_str(), export_dir.c_str(), export_dir.c_str());
      return 0;
    }
    return run_train(train_options);  // `halfgrad` and `halfgrad train` alike
  } catch (const std::exception& e) {
    std::fprintf(stderr, "halfgrad: error: %s\n", e.what());
    return 1;
  }
}
