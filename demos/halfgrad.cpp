// halfgrad: train, evaluate and use a transformer text classifier from the command line.
//   halfgrad train [flags]          with no flags: the language-id main job (fp16 O2)
//   halfgrad eval --checkpoint DIR --data FILE.tsv     (DIR: a checkpoint, or a run's: its latest or --best)
//   halfgrad predict --checkpoint DIR [--logits] [--top-k K] [TEXT...]   (or --input FILE, or stdin)
//   halfgrad export-langid --out DIR              the language-id split as train.tsv/test.tsv
// No subcommand prints the usage and exits 2.
// Every error is one line on stderr and exit code 1 (a bad command line: CLI11's codes, 100-127);
// train checks all its flags before it reads data. docs/training.md is the reference.
// Ctrl-C during training saves a checkpoint of the step in progress and exits with 130.
// `mpirun -np N halfgrad train ...` trains data-parallel (docs/distributed.md): rank 0 prints.
#include <omp.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>

#include "halfgrad/base/adaptive_threads.h"
#include "halfgrad/base/error.h"
#include "halfgrad/base/parallel.h"
#include "halfgrad/data/dataset.h"
#include "halfgrad/dist/communicator.h"
#include "demos/halfgrad_cli.h"
#include "halfgrad/version.h"
#include "halfgrad/io/checkpoint.h"
#include "halfgrad/io/model_config.h"
#include "halfgrad/io/output_lock.h"
#include "halfgrad/nn/text_classifier.h"
#include "halfgrad/report/html_report.h"
#include "halfgrad/report/numerics_inspector.h"
#include "halfgrad/train/evaluation.h"
#include "halfgrad/train/metrics.h"
#include "halfgrad/train/trainer.h"

namespace {

using namespace hg;
using train::Metrics;

// Progress on stderr (only on a terminal), and a table row on stdout after every evaluation
// (every epoch by default), or every epoch when there is no evaluation data (then without the
// eval_loss, accuracy and f1 columns). The row's
// train_loss is the mean loss of the current epoch's optimizer steps so far (at an epoch's end:
// the epoch's mean), from the TrainerState, so a resumed run prints the same numbers.
class ConsoleCallback : public train::TrainerCallback {
 public:
  explicit ConsoleCallback(bool has_eval) : has_eval_(has_eval) {}

  void on_train_begin(const train::TrainerState& state, const train::TrainingArguments&) override {
    start_ = std::chrono::steady_clock::now();
    first_step_ = state.global_step;
    std::printf("%5s %8s %10s", "epoch", "step", "train_loss");
    if (has_eval_) std::printf(" %10s %9s %8s", "eval_loss", "accuracy", "f1");
    std::printf(" %8s %10s %8s\n", "skipped", "scale", "time");
    std::fflush(stdout);
  }

  void on_step_end(const train::TrainerState& state, const nlohmann::json& info) override {
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
    std::printf("%5.2f %8lld %10.4f", state.epoch, static_cast<long long>(state.global_step), state.epoch_train_loss());
    if (has_eval_) std::printf(" %10.4f %8.2f%% %8.4f", loss, 100 * accuracy, f1);
    std::printf(" %8lld %10g %7.0fs\n", static_cast<long long>(epoch_skipped_), scale_, elapsed());
    std::fflush(stdout);
    epoch_skipped_ = 0;
  }

  bool has_eval_;
  std::chrono::steady_clock::time_point start_;
  int64_t first_step_ = 0, epoch_skipped_ = 0;
  double scale_ = 1;
};

// The one wording of "texts were cut to max_len tokens", for train, eval and predict.
std::string truncation_note(int64_t truncated, const std::string& kind, int64_t max_len) {
  return "note: " + std::to_string(truncated) + " " + kind + (truncated == 1 ? " text is" : " texts are") +
         " longer than max_len " + std::to_string(max_len) + " tokens and " + (truncated == 1 ? "was" : "were") +
         " truncated\n";
}

// --tokenizer sentencepiece --resume DIR: the checkpoint's model, which must be of the type and
// size this run asks for.
void resume_spm_model(const std::string& dir, data::TokenizerConfig& tokenizer) {
  const data::TokenizerConfig saved = io::model_config_from_checkpoint(io::load_checkpoint(dir), dir).tokenizer;
  check(saved.kind == data::TokenizerKind::kSentencePiece, dir, ": the checkpoint was trained with the ",
        data::kTokenizerKindNames.name(saved.kind), " tokenizer, not sentencepiece");
  check(saved.spm_type == tokenizer.spm_type && saved.spm_vocab_size == tokenizer.spm_vocab_size, dir,
        ": the checkpoint's sentencepiece model is ", data::kSpmTypeNames.name(saved.spm_type), " with vocab_size ",
        saved.spm_vocab_size, "; this run asks for ", data::kSpmTypeNames.name(tokenizer.spm_type), " with ",
        tokenizer.spm_vocab_size, " (--spm-type, --vocab-size)");
  tokenizer = saved;
}

// Trains the sentencepiece model on the training texts (every rank alike: one thread, so the
// same bytes; the Trainer compares the ranks' config.json, which holds their fingerprint).
void train_spm_model(dist::Communicator& world, const data::Dataset& train_set, data::TokenizerConfig& tokenizer) {
  const auto start = std::chrono::steady_clock::now();
  std::vector<std::string> texts;
  texts.reserve(train_set.examples.size());
  for (const data::Example& e : train_set.examples) texts.push_back(e.text);
  dist::agree(world, [&] {
    try {
      tokenizer.train_spm_model(texts);
    } catch (const Error& e) {  // for example too large a vocabulary for the texts
      fail(e.what(), " (--spm-type, --vocab-size)");
    }
  });
  std::printf("tokenizer: sentencepiece %s model of %lld pieces trained on %zu texts in %.1f s\n",
              data::kSpmTypeNames.name(tokenizer.spm_type).data(), static_cast<long long>(tokenizer.spm_vocab_size),
              texts.size(), std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
}

// The checkpoint that --checkpoint DIR names: DIR itself when it is one (it has a manifest, or
// the files of one, which load_checkpoint then checks), else
// DIR is a run's output directory and the answer is its latest complete checkpoint-N (the
// largest N, transformers' get_last_checkpoint) or, with `best`, the checkpoint that the latest
// one's trainer_state.json records as best_model_checkpoint (looked up in DIR, wherever the run
// wrote it). Which one is said on stderr (with `note`). `train --resume` takes the latest too
// (HF's resume_from_checkpoint=True).
std::string resolve_checkpoint(const std::string& dir, bool best, bool note = true,
                               const std::string& flag = "--checkpoint") {
  namespace fs = std::filesystem;
  const bool checkpoint =
      fs::exists(fs::path(dir) / io::kManifestFile) || fs::exists(fs::path(dir) / "config.json") ||
      fs::exists(fs::path(dir) / "model.safetensors");  // a damaged one: the loader says what is wrong
  if (checkpoint) {
    check(!best,
          "--best picks among a run's checkpoints: give the run's output directory (the folder of its "
          "checkpoint-N), not the checkpoint ",
          dir);
    return dir;
  }
  const fs::path latest = io::latest_checkpoint(dir);
  check(!latest.empty(), flag, " ", dir, ": neither a checkpoint (no ", io::kManifestFile,
        ") nor a run's output directory holding a complete checkpoint-N");
  fs::path chosen = latest;
  if (best) {
    std::ifstream file(latest / "trainer_state.json");
    const nlohmann::json state = nlohmann::json::parse(file, nullptr, /*allow_exceptions=*/false);
    check(state.is_object(), (latest / "trainer_state.json").string(), ": not a JSON object");
    const auto recorded = state.find("best_model_checkpoint");
    check(recorded != state.end() && recorded->is_string() && !recorded->get<std::string>().empty(), dir,
          ": the run recorded no best checkpoint (it needs evaluation data, and an evaluation at a step it saved): "
          "drop --best for the latest, ",
          latest.string());
    chosen = fs::path(dir) / fs::path(recorded->get<std::string>()).filename();
    check(io::checkpoint_complete(chosen), dir, ": the best checkpoint, ", chosen.string(),
          ", is missing or incomplete");
  }
  if (note) {
    std::fprintf(stderr, "note: %s is a run's output directory: using its %s checkpoint, %s\n", dir.c_str(),
                 best ? "best" : "latest", chosen.string().c_str());
  }
  return chosen.string();
}

// Every flag and file checked before the data is read (resolve_train_options,
// ClassifierConfig::validate, the checkpoint to resume, the output directory), on every rank
// alike: a flag or file that fails on one rank fails on every rank with its message
// (dist::agree), before the Trainer compares the ranks' settings and anything waits for a failed
// rank. Returns the model's config but for its classes (the data's).
nn::ClassifierConfig check_train_flags(dist::Communicator& world, const CLI::App& cmd, cli::TrainOptions& o) {
  train::TrainingArguments& a = o.args;
  nn::ClassifierConfig config;
  dist::agree(world, [&] {
    cli::resolve_train_options(cmd, o);
    for (const char* flag : {"--ddp-comm", "--ddp-check-every"}) {
      check(world.size() > 1 || cmd.get_option(flag)->count() == 0, flag,
            " applies to data-parallel runs (mpirun -np N with N >= 2): drop it");
    }
    check(world.size() == 1 || o.threads != "auto",
          "--threads auto times one process's steps; under mpirun they wait for the slowest rank: give --threads N, "
          "or leave it out for the cores divided among the ranks");
    if (!o.resume.empty())
      o.resume = resolve_checkpoint(o.resume, /*best=*/false, /*note=*/world.rank() == 0, "--resume");
    if (!o.spm_model.empty()) a.tokenizer.set_spm_model(data::read_spm_model_file(o.spm_model), o.spm_model);
    if (!o.resume.empty() && a.tokenizer.kind == data::TokenizerKind::kSentencePiece && o.spm_model.empty()) {
      resume_spm_model(o.resume, a.tokenizer);  // the checkpoint's model, not a new one trained again
    }
    config.position_embedding = nn::parse_position_embedding(o.positions, "--positions");
    config.max_len = o.max_len;
    config.d_model = o.d_model;
    config.heads = o.heads;
    config.d_ff = o.d_ff;
    config.layers = o.layers;
    config.dropout = o.dropout;
    config.pooling = o.pooling == "cls" ? nn::Pooling::kCls : nn::Pooling::kMean;
    config.bag_skip = o.bag_skip;
    config.encoder_drop_path = o.encoder_drop_path;
    io::fit_to_tokenizer(config, a.tokenizer);  // vocab (with CLS) and sparse_embedding
    config.validate();
    if (!o.resume.empty()) {  // a broken checkpoint fails now, not after the data is read (restore reads it again)
      const io::Checkpoint c = io::load_checkpoint(o.resume);
      train::check_resumable(c, o.resume);
      io::model_config_from_checkpoint(c, o.resume);
    }
    if (world.rank() == 0) {  // one writer per output dir: a live run's lock fails now (the Trainer takes it)
      io::check_output_dir_unlocked(a.output_dir);
      const std::vector<std::filesystem::path> earlier = io::list_checkpoints(a.output_dir);
      check(!o.resume.empty() || o.overwrite_output_dir || earlier.empty(), "--output-dir ", a.output_dir,
            " holds checkpoints of an earlier run (", earlier.empty() ? "" : earlier.back().filename().string(),
            "): give --resume ", earlier.empty() ? "" : earlier.back().string(),
            " to continue it, --overwrite-output-dir to train over it, or another --output-dir");
    }
  });
  return config;
}

// The team: a count given is kept. "auto", and by default one process without OMP_NUM_THREADS,
// times the steps and runs each at all cores or 1, whichever is faster (halfgrad/base/adaptive_threads.h).
// Under mpirun the ranks on one machine share its cores (OMPI_COMM_WORLD_LOCAL_SIZE: how many).
// Returns whether the team adapts.
bool set_threads(const std::string& threads, int world_size) {
  const bool no_env = std::getenv("OMP_NUM_THREADS") == nullptr;
  const bool adapt = threads == "auto" || (threads.empty() && world_size == 1 && no_env);
  if (!threads.empty() && !adapt) {
    omp_set_num_threads(std::stoi(threads));  // CLI11 checked it: 1..1024
  } else if (world_size > 1 && no_env) {
    const char* local = std::getenv("OMPI_COMM_WORLD_LOCAL_SIZE");
    omp_set_num_threads(std::max(1, omp_get_num_procs() / std::max(1, local ? std::atoi(local) : 1)));
  }
  return adapt;
}

// The training and evaluation sets: --train and --eval, or the language-id set's split.
void read_train_data(dist::Communicator& world, const cli::TrainOptions& o, bool has_eval, data::Dataset& train_set,
                     data::Dataset& eval_set) {
  dist::agree(world, [&] {
    if (o.train_file.empty()) {
      data::Split split = data::language_id_dataset(
          {.train_per_language = o.train_per_language, .test_per_language = o.test_per_language, .seed = o.args.seed});
      train_set = std::move(split.train);
      eval_set = std::move(split.test);
    } else {
      const data::ReadOptions read = cli::read_options(o.input_format, o.header, o.no_header);
      std::vector<std::string> notes;
      train_set = data::read_tsv(o.train_file, nullptr, read, &notes);
      if (has_eval) eval_set = data::read_tsv(o.eval_file, &train_set.label_names, read, &notes);
      for (const std::string& note : notes) std::printf("note: %s\n", note.c_str());
    }
  });
  std::printf("%s\n", train_set.summary().c_str());
  if (has_eval) std::printf("%s\n", eval_set.summary().c_str());
}

// "model: N parameters (...); precision ...; T threads", printed and in the HTML report.
std::string model_line(const nn::TextClassifier& model, const cli::TrainOptions& o, bool adapt, int world_size) {
  const train::TrainingArguments& a = o.args;
  const nn::ClassifierConfig& config = model.config;
  const int max_threads = omp_get_max_threads();
  const std::string team = adapt && max_threads > 1
                               ? "threads auto (" + std::to_string(max_threads) + " or 1, by step time)"
                               : std::to_string(max_threads) + " threads";
  const std::string tokenizer =
      o.tokenizer + (a.tokenizer.hashed() ? " over " + std::to_string(a.tokenizer.buckets) + " buckets" : "");
  char text[512];
  std::snprintf(
      text, sizeof text,
      "model: %lld parameters (d_model %lld, heads %lld, layers %lld, d_ff %lld, max_len %lld, tokenizer %s, "
      "positions %s%s); precision %s%s; %s%s",
      static_cast<long long>(model.parameter_count()), static_cast<long long>(config.d_model),
      static_cast<long long>(config.heads), static_cast<long long>(config.layers), static_cast<long long>(config.d_ff),
      static_cast<long long>(config.max_len), tokenizer.c_str(), o.positions.c_str(),
      config.bag_skip ? (config.encoder_drop_path > 0.0f ? ", bag skip, encoder drop path" : ", bag skip") : "",
      o.precision.c_str(),
      a.mixed_precision.precision == optim::Precision::kFp16
          ? (" " + o.opt_level + ", loss scale " + o.loss_scale).c_str()
          : "",
      team.c_str(),
      world_size > 1 ? (" x " + std::to_string(world_size) + " processes, --ddp-comm " + o.ddp_comm).c_str() : "");
  return text;
}

bool reports_to(const train::TrainingArguments& a, const char* to) {
  return std::find(a.report_to.begin(), a.report_to.end(), to) != a.report_to.end();
}

// The console and the inspector print and write files: rank 0's job. Early stopping decides
// from metrics every rank holds alike (the Trainer gathers them), so every rank runs it.
std::vector<std::shared_ptr<train::TrainerCallback>> train_callbacks(int rank, const cli::TrainOptions& o,
                                                                     bool has_eval,
                                                                     const std::vector<std::string>& report_lines) {
  const train::TrainingArguments& a = o.args;
  std::vector<std::shared_ptr<train::TrainerCallback>> callbacks;
  if (rank == 0) {
    callbacks.push_back(std::make_shared<ConsoleCallback>(has_eval && a.eval_strategy != train::IntervalStrategy::kNo));
  }
  if (o.early_stopping > 0) callbacks.push_back(std::make_shared<train::EarlyStoppingCallback>(a, o.early_stopping));
  std::shared_ptr<report::InspectorCallback> inspector;
  if (o.inspect > 0 && rank == 0) {
    inspector = std::make_shared<report::InspectorCallback>(
        report::InspectorOptions{.every = o.inspect, .mx = o.inspect_mx}, a.output_dir);
    callbacks.push_back(inspector);
  }
  if (reports_to(a, "html") && rank == 0) {  // after the inspector: it reads its steps at the end
    callbacks.push_back(std::make_shared<report::HtmlReportCallback>(a.output_dir, "halfgrad train: " + a.output_dir,
                                                                     report_lines, inspector));
  }
  return callbacks;
}

// A step count past the end of the run would silently do nothing (known now that the data is).
void check_step_counts(dist::Communicator& world, const train::TrainingArguments& a, int64_t steps) {
  const int64_t eval_every = a.eval_steps > 0 ? a.eval_steps : a.logging_steps;
  dist::agree(world, [&] {  // the same on every rank; agreed, so rank 0 alone prints it
    check(a.save_strategy != train::IntervalStrategy::kSteps || a.save_steps <= steps, "--save-steps ", a.save_steps,
          " is more than the run's ", steps,
          " optimizer steps: no checkpoint would be saved; give --save-steps <= ", steps, " or --save-strategy epoch");
    check(a.eval_strategy != train::IntervalStrategy::kSteps || eval_every <= steps,
          a.eval_steps > 0 ? "--eval-steps " : "--logging-steps ", eval_every, " is more than the run's ", steps,
          " optimizer steps: nothing would be evaluated; give at most ", steps);
  });
}

// The end of a run: steps, time, train_loss, the final test report, where the files are.
void print_summary(train::Trainer& trainer, const train::TrainOutput& out, const train::TrainingArguments& a,
                   const data::Dataset& train_set, const data::Dataset* eval_set, int rank) {
  std::printf("\n== summary ==\n");
  std::printf("steps %lld (%lld skipped by the loss scaler), %.1f s, %.2f steps/s\n",
              static_cast<long long>(out.global_step), static_cast<long long>(trainer.state().skipped_steps),
              out.metrics.at("train_runtime"), out.metrics.at("train_steps_per_second"));
  if (const AdaptiveThreads* threads = trainer.adaptive_threads(); threads && threads->max_threads() > 1) {
    std::printf("threads %s\n", threads->summary().c_str());
  }
  const train::TrainerState& state = trainer.state();
  std::printf("train_loss %.4f (the mean loss of the %lld optimizer steps%s, as Hugging Face's train_loss)\n",
              out.training_loss, static_cast<long long>(state.loss_steps),
              state.loss_steps < state.global_step ? " with a finite loss" : "");
  if (eval_set != nullptr) {
    const train::PredictionOutput final = trainer.predict(*eval_set);
    const train::ClassificationReport report = train::classification_report(
        final.prediction.predictions, final.prediction.label_ids, int64_t(train_set.label_names.size()));
    std::printf("test accuracy %.2f%%, macro-F1 %.4f, loss %.4f\n\n%s", 100 * report.accuracy, report.macro_f1,
                final.prediction.loss, train::format_report(report, train_set.label_names).c_str());
  }
  const auto checkpoints = io::list_checkpoints(a.output_dir);
  if (!checkpoints.empty()) std::printf("\nlatest checkpoint: %s\n", checkpoints.back().string().c_str());
  if (reports_to(a, "jsonl")) std::printf("log: %s/log.jsonl\n", a.output_dir.c_str());
  if (reports_to(a, "html") && rank == 0) std::printf("report: %s/report.html\n", a.output_dir.c_str());
}

// Every flag is checked (check_train_flags) before the data is read or the model built.
int run_train(const CLI::App& cmd, cli::TrainOptions& o) {
  dist::Communicator& world = dist::world();
  // Every other rank computes what rank 0 prints: it keeps quiet (its errors still reach stderr).
  if (world.rank() != 0 && std::freopen("/dev/null", "w", stdout) == nullptr) fail("cannot silence stdout");
  train::TrainingArguments& a = o.args;
  nn::ClassifierConfig config = check_train_flags(world, cmd, o);
  const bool adapt = set_threads(o.threads, world.size());
  data::Dataset train_set, eval_set;
  const bool has_eval = o.train_file.empty() || !o.eval_file.empty();
  read_train_data(world, o, has_eval, train_set, eval_set);
  if (a.tokenizer.kind == data::TokenizerKind::kSentencePiece && a.tokenizer.spm_model.empty()) {
    train_spm_model(world, train_set, a.tokenizer);
  }
  // Without --buckets a hashed tokenizer gets as many rows as the training data's n-grams need
  // (data::default_buckets; the main job's 2^18); the tokenizer, and so config.json, records them.
  if (a.tokenizer.hashed() && cmd.get_option("--buckets")->count() == 0) {
    a.tokenizer.buckets = data::default_buckets(train_set, a.tokenizer);
    io::fit_to_tokenizer(config, a.tokenizer);
  }
  config.classes = int64_t(train_set.label_names.size());
  nn::TextClassifier model(config, a.seed);
  const int max_threads = omp_get_max_threads();
  const std::string line = model_line(model, o, adapt, world.size());
  std::printf("%s\n", line.c_str());
  const std::vector<std::string> report_lines = {train_set.summary(),
                                                 has_eval ? eval_set.summary() : "no evaluation data", line};
  train::Trainer trainer(model, a, train_set, has_eval ? &eval_set : nullptr, {},
                         train_callbacks(world.rank(), o, has_eval, report_lines));
  if (adapt) trainer.adapt_threads(AdaptiveThreads(max_threads));
  check_step_counts(world, a, trainer.state().max_steps);
  const int64_t truncated = trainer.truncated_train_texts();
  if (truncated > 0) std::printf("%s", truncation_note(truncated, "training", config.max_len).c_str());
  const train::TrainOutput out = trainer.train(o.resume);
  if (out.interrupted) {  // Ctrl-C: exit as shells report a SIGINT death, but with the step saved
    const std::string saved = io::latest_checkpoint(a.output_dir).string();
    std::printf("\ninterrupted at step %lld; checkpoint %s (continue with --resume %s)\n",
                static_cast<long long>(out.global_step), saved.c_str(), saved.c_str());
    return 130;
  }
  print_summary(trainer, out, a, train_set, has_eval ? &eval_set : nullptr, world.rank());
  return 0;
}

int run_eval(const cli::CommandLine& cl) {
  const train::InferenceModel l = train::load_for_inference(resolve_checkpoint(cl.checkpoint, cl.best));
  std::vector<std::string> notes;
  const data::Dataset d =
      data::read_tsv(cl.data_file, &l.labels, cli::read_options(cl.input_format, cl.header, cl.no_header), &notes);
  for (const std::string& note : notes) std::printf("note: %s\n", note.c_str());
  const train::EvalPrediction p = train::run_evaluation(*l.model, d, cl.eval_batch, *l.mixed_precision, l.tokenizer);
  const train::ClassificationReport r =
      train::classification_report(p.predictions, p.label_ids, int64_t(l.labels.size()));
  std::printf("%s\n", d.summary().c_str());
  if (p.truncated > 0) {
    std::printf("%s", truncation_note(p.truncated, "evaluation", l.model->config.max_len).c_str());
  }
  std::printf("loss %.4f\n%s", p.loss, train::format_report(r, l.labels).c_str());
  return 0;
}

// predict's texts: the arguments, or the lines of --input (a file, or - for stdin), or of stdin.
// Blank (empty or whitespace-only) ones are skipped, and counted in one warning on stderr.
std::vector<std::string> predict_inputs(const cli::CommandLine& cl) {
  check(cl.input_file.empty() || cl.texts.empty(), "predict: texts given both as arguments and with --input: give one");
  std::vector<std::string> all = cl.texts;
  const bool from_stdin = cl.texts.empty() && (cl.input_file.empty() || cl.input_file == "-");
  const std::string source = !cl.texts.empty() ? "argument" : from_stdin ? "stdin line" : cl.input_file + " line";
  if (cl.texts.empty()) {  // bounded: an endless stream fails at the limit (halfgrad/data/dataset.h)
    data::LineReader lines(from_stdin ? "-" : cl.input_file);
    for (std::string line; lines.next(line);) all.push_back(std::move(line));
  }
  std::vector<std::string> texts;
  std::string skipped;
  int64_t blank = 0;
  for (size_t i = 0; i < all.size(); ++i) {
    if (all[i].find_first_not_of(" \t\r\n\v\f") != std::string::npos) {
      texts.push_back(std::move(all[i]));
    } else if (++blank <= 5) {
      skipped += (blank > 1 ? ", " : " ") + std::to_string(i + 1);
    }
  }
  if (blank > 0) {
    std::fprintf(stderr, "warning: predict: skipped %lld blank %s%s:%s%s\n", static_cast<long long>(blank),
                 source.c_str(), blank > 1 ? "s" : "", skipped.c_str(), blank > 5 ? ", ..." : "");
  }
  check(!texts.empty(), "predict: no texts given (as arguments, with --input or on stdin)");
  return texts;
}

// One line per text: "text<TAB>label<TAB>label=probability..." (every label in label order, or
// with --top-k K the K most probable, most probable first), or with --logits a JSON object
// {"text", "label", "logits"} whose logits (f32, %.9g) read back to the same floats.
int run_predict(const cli::CommandLine& cl) {
  check(cl.top_k == 0 || !cl.logits, "predict: --top-k ranks probabilities and --logits prints every logit: give one");
  const train::InferenceModel l = train::load_for_inference(resolve_checkpoint(cl.checkpoint, cl.best));
  const std::vector<std::string> texts = predict_inputs(cl);
  data::Dataset d;
  d.source = "input";
  d.label_names = l.labels;
  for (const std::string& t : texts) {
    check(data::valid_utf8(t), "predict: text '", t, "' is not valid UTF-8");
    d.examples.push_back({t, 0});
  }
  const train::EvalPrediction p = train::run_evaluation(*l.model, d, 256, *l.mixed_precision, l.tokenizer);
  if (p.truncated > 0) {  // stderr: stdout stays the predictions alone
    std::fprintf(stderr, "%s", truncation_note(p.truncated, "input", l.model->config.max_len).c_str());
  }
  for (size_t i = 0; i < texts.size(); ++i) {
    const std::string& label = l.labels[size_t(p.predictions[i])];
    if (cl.logits) {
      std::string row = "{\"text\": " + nlohmann::json(texts[i]).dump() +
                        ", \"label\": " + nlohmann::json(label).dump() + ", \"logits\": [";
      char number[32];
      for (int64_t k = 0; k < p.classes; ++k) {
        std::snprintf(number, sizeof number, "%s%.9g", k ? ", " : "",
                      double(p.logits[size_t(int64_t(i) * p.classes + k)]));
        row += number;
      }
      std::printf("%s]}\n", row.c_str());
      continue;
    }
    const std::vector<double> probs = train::probabilities(p.logits, int64_t(i), p.classes);
    std::vector<size_t> order(probs.size());
    for (size_t k = 0; k < order.size(); ++k) order[k] = k;
    if (cl.top_k > 0) {  // most probable first; ties in label order
      std::stable_sort(order.begin(), order.end(), [&](size_t x, size_t y) { return probs[x] > probs[y]; });
      order.resize(std::min(order.size(), size_t(cl.top_k)));
    }
    std::printf("%s\t%s", texts[i].c_str(), label.c_str());
    for (const size_t k : order) std::printf("\t%s=%.3f", l.labels[k].c_str(), probs[k]);
    std::printf("\n");
  }
  return 0;
}

// One line on stderr, exit code 1. Under several ranks: an error every rank agreed on
// (dist::agree, the Trainer's checks) is printed by rank 0 and every rank exits; an error on one
// rank alone, while the others may wait in a collective, names the rank and aborts the job.
int report_error(const std::exception& e) {
  dist::Communicator* world = nullptr;
  try {
    world = &dist::world();
  } catch (const std::exception&) {  // e is that error: built without MPI, launched by mpirun
  }
  if (world == nullptr || world->size() == 1) {
    std::fprintf(stderr, "halfgrad: error: %s\n", e.what());
    return 1;
  }
  if (world->failure_agreed()) {
    if (world->rank() == 0) std::fprintf(stderr, "halfgrad: error: %s\n", e.what());
    return 1;
  }
  std::fprintf(stderr, "halfgrad: error on rank %d of %d: %s\n", world->rank(), world->size(), e.what());
  world->abort(1);
  return 1;  // not reached (abort is [[noreturn]], which a virtual call does not carry)
}

}  // namespace

int main(int argc, char** argv) {
  hg::use_default_wait_policy(argv);  // before libgomp's threads exist: see halfgrad/base/parallel.h
  CLI::App app{"halfgrad: train a transformer text classifier with emulated mixed precision"};
  cli::CommandLine cl;
  cli::setup_command_line(app, cl);
  app.set_version_flag("--version", "halfgrad " HALFGRAD_VERSION);  // prints it and exits 0
  CLI11_PARSE(app, argc, argv);
  if (app.get_subcommands().empty()) {  // as git and fastText: the usage, not the main job
    std::fprintf(stderr, "%s\nhalfgrad: no command given; the main job is `halfgrad train`\n", app.help().c_str());
    return 2;
  }
  try {
    if (*cl.eval_cmd) return run_eval(cl);
    if (*cl.predict_cmd) return run_predict(cl);
    if (*cl.export_cmd) {
      const std::string& export_dir = cl.export_dir;
      const data::Split split = data::language_id_dataset({.seed = cl.export_seed});
      std::filesystem::create_directories(export_dir);
      data::write_tsv(split.train, export_dir + "/train.tsv");
      data::write_tsv(split.test, export_dir + "/test.tsv");
      std::printf("%s\n%s\nwritten to %s/train.tsv and %s/test.tsv\n", split.train.summary().c_str(),
                  split.test.summary().c_str(), export_dir.c_str(), export_dir.c_str());
      return 0;
    }
    return run_train(*cl.train_cmd, cl.train);
  } catch (const std::exception& e) {
    return report_error(e);
  }
}
