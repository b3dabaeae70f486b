// The `halfgrad` command line: its subcommands and flags, bound to plain option structs, and how
// the train flags combine (resolve_train_options); nothing here reads data or trains.
// demos/halfgrad.cpp runs what was parsed; fuzz/cli_parser.cpp feeds the same parser arbitrary
// argument lists without training anything. docs/training.md is the reference.
#pragma once

#include <CLI/CLI.hpp>
#include <charconv>
#include <cstdint>
#include <filesystem>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include "halfgrad/base/error.h"
#include "halfgrad/io/model_config.h"
#include "halfgrad/data/dataset.h"
#include "halfgrad/optim/mixed_precision.h"
#include "halfgrad/train/training_arguments.h"

namespace hg::cli {

// The recipe's defaults per model kind, for the flags the user did not give (docs/classifier.md):
// a bag (--layers 0) keeps the main job's recipe ("The recipe: sweep and defaults"); a model with
// encoder layers takes the transformer's ("Transformer recipe"), applied in resolve_train_options.
struct RecipeDefaults {
  float dropout, weight_decay, learning_rate;
  double epochs;
  int64_t batch_size;
  const char* pooling;
};
inline constexpr RecipeDefaults kBagRecipe{
    .dropout = 0.5f, .weight_decay = 0.01f, .learning_rate = 1e-2f, .epochs = 5, .batch_size = 256, .pooling = "mean"};
inline constexpr RecipeDefaults kTransformerRecipe{
    .dropout = 0.1f, .weight_decay = 0.01f, .learning_rate = 3e-3f, .epochs = 10, .batch_size = 64, .pooling = "cls"};

// "<what> (default V for a bag, --layers 0; W with --layers >= 1)" for the help of a recipe flag.
template <typename T>
std::string recipe_help(const std::string& what, T bag, T transformer) {
  std::ostringstream s;
  s << what << " (default " << bag << " for a bag, --layers 0; " << transformer << " with --layers >= 1)";
  return s.str();
}

struct TrainOptions {
  std::string train_file, eval_file, resume, pooling = kBagRecipe.pooling;
  // Parsed into args.mixed_precision once, by resolve_train_options.
  std::string precision = "fp16", opt_level = "O2", loss_scale = "dynamic";
  std::string accumulate = "f32";    // --accumulate, into args.mixed_precision.accumulation
  std::string rounding = "nearest";  // --rounding, into args.mixed_precision.rounding
  bool flush_subnormals = false;     // --flush-subnormals, into args.mixed_precision.flush_subnormals
  std::string master_weights = "f32", update_rounding = "nearest";  // --master-weights, --update-rounding
  std::string bf16_dot = "auto";                                    // --bf16-dot, into args.mixed_precision.bf16_dot
  bool fp16 = false, bf16 = false;
  // --precision fp8's delayed-scaling recipe (Fp8Recipe's fields, TE's defaults).
  std::string fp8_format = "hybrid", fp8_amax_compute_algo = "max", fp8_scale = "pow2";
  int64_t fp8_amax_history_len = 1024, fp8_margin = 0;
  // --threads: a count (fixed), "auto" (chosen by timing the steps: halfgrad/base/adaptive_threads.h), or
  // empty: auto for one process on several cores without OMP_NUM_THREADS (demos/halfgrad.cpp).
  std::string threads;
  // The main job's recipe (docs/classifier.md, the sweep): a fastText-like bag of hashed char
  // 1..5-grams over 2^18 buckets (sparse row gradients make their size cost nothing per step),
  // d_model 32, no encoder layers, batch 256, lr 1e-2, dropout 0.5 (the bag overfits: train loss
  // -> 0.005 without), 5 epochs.
  int64_t d_model = 32, heads = 4, layers = 0, d_ff = 512, max_len = 128;
  std::string tokenizer = "char-ngrams";  // the kind; its sizes go straight into args.tokenizer
  // --positions; empty until resolve_train_options: learned for bytes, and for words and
  // sentencepiece under encoder layers (ordered tokens); none otherwise (a bag).
  std::string positions;
  std::string spm_type = "unigram", spm_model;  // --spm-type, --spm-model (a .model file's path)
  bool bag_skip = false;                        // --bag-skip: ClassifierConfig::bag_skip (needs --layers >= 1)
  float encoder_drop_path = 0.0f;  // --encoder-drop-path: ClassifierConfig::encoder_drop_path (needs --bag-skip)
  float dropout = kBagRecipe.dropout;
  int64_t early_stopping = 0;
  int64_t inspect = 0;                // NumericsInspector every N optimizer steps (0: off)
  bool inspect_mx = false;            // the inspector also measures MXFP8/MXFP4 block quantization
  bool overwrite_output_dir = false;  // train into an output dir holding an earlier run's checkpoints
  int64_t train_per_language = 6000, test_per_language = 1000;
  std::string input_format = "auto";  // --input-format, of --train and --eval
  // Parsed into args by resolve_train_options (kScheduleNames, kIntervalStrategyNames, kWireFormatNames).
  std::string scheduler = "cosine", eval_strategy = "epoch", save_strategy = "epoch", ddp_comm = "f32";
  bool header = false, no_header = false;  // --header, --no-header (neither: detected)
  train::TrainingArguments args;
};

// Step counts and seeds: CLI::PositiveNumber would print its bound, 1.8e308, in full (310 digits).
inline const CLI::Range kStepCount(int64_t{1}, int64_t{1} << 40);
// A seed is a uint64 in decimal digits: CLI11 would read "-1" as 2^64 - 1 and 2^64 as 2^64 - 1.
inline const CLI::Validator kSeedRange(
    [](std::string& text) {
      uint64_t value = 0;
      const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
      const bool digits = !text.empty() && text.find_first_not_of("0123456789") == std::string::npos;
      return digits && error == std::errc() && end == text.data() + text.size()
                 ? std::string()
                 : "Value " + text + " is not a seed: an integer in 0 to 18446744073709551615";
    },
    "UINT64");

// --input-format, --header and --no-header, on train and eval: how the data files are read.
inline void add_read_flags(CLI::App& app, std::string& format, bool& header, bool& no_header) {
  app.add_option("--input-format", format,
                 data::kDataFormatNames.listed() +
                     " (label<TAB>text, or fastText's __label__X text; auto: fasttext when the first line starts with "
                     "__label__, with a note)")
      ->capture_default_str()
      ->check(CLI::IsMember(data::kDataFormatNames.names()));
  app.add_flag("--header", header, "the first line is a header (label<TAB>text): skip it");
  app.add_flag("--no-header", no_header,
               "the first line is data (default: a first line whose label is a column name, such as 'label', "
               "that no other line has, is skipped with a note)");
}

// The data::ReadOptions of those flags; both --header and --no-header is an hg::Error.
inline data::ReadOptions read_options(const std::string& format, bool header, bool no_header) {
  check(!(header && no_header), "--header and --no-header both given: give one");
  return {.format = data::kDataFormatNames.parse(format, "--input-format"),
          .header = header      ? data::HeaderMode::kYes
                    : no_header ? data::HeaderMode::kNo
                                : data::HeaderMode::kAuto};
}

// --precision and the flags that complete the mixed-precision mode (resolve_train_options parses them).
inline void add_precision_flags(CLI::App& app, TrainOptions& o) {
  // pure_fp16 (O2 without master weights) is the library's and the master_weights demo's only.
  app.add_option("--precision", o.precision, optim::kPrecisionNames.listed())
      ->capture_default_str()
      ->check(CLI::IsMember(optim::kPrecisionNames.names()));
  app.add_flag("--fp16", o.fp16, "shorthand for --precision fp16");
  app.add_flag("--bf16", o.bf16, "shorthand for --precision bf16");
  app.add_option("--opt-level", o.opt_level,
                 optim::kOptLevelNames.listed() + " (fp16: O1 keeps an f32 model, O2 an f16 model with f32 masters)")
      ->capture_default_str()
      ->check(CLI::IsMember(optim::kOptLevelNames.names()));
  app.add_option("--loss-scale", o.loss_scale, "dynamic | none | N (fp16: a static scale N)")->capture_default_str();
  app.add_option("--accumulate", o.accumulate,
                 optim::kAccumulationNames.listed() + " (fp16: what GEMMs and sums accumulate in)")
      ->capture_default_str()
      ->check(CLI::IsMember(optim::kAccumulationNames.names()));
  app.add_option("--rounding", o.rounding,
                 optim::kRoundingNames.listed() + " (how op outputs and gradients round to f16/bf16)")
      ->capture_default_str()
      ->check(CLI::IsMember(optim::kRoundingNames.names()));
  app.add_flag("--flush-subnormals", o.flush_subnormals,
               "op outputs and gradients that would be f16/bf16 subnormals become zero (GPU flush-to-zero)");
  app.add_option("--master-weights", o.master_weights,
                 optim::kMasterWeightsNames.listed() +
                     " (f32: the optimizer updates f32 copies; none: pure fp16 O2 or pure bf16, it updates the 16-bit "
                     "weights)")
      ->capture_default_str()
      ->check(CLI::IsMember(optim::kMasterWeightsNames.names()));
  app.add_option("--update-rounding", o.update_rounding,
                 optim::kUpdateRoundingNames.listed() +
                     " (with --master-weights none: how each updated 16-bit weight is written)")
      ->capture_default_str()
      ->check(CLI::IsMember(optim::kUpdateRoundingNames.names()));
  app.add_option("--bf16-dot", o.bf16_dot,
                 optim::kBf16DotNames.listed() +
                     " (bf16, fp8: bf16 GEMMs on VDPBF16PS where the CPU has it, the exact f32 chain, or the "
                     "instruction's bits emulated)")
      ->capture_default_str()
      ->check(CLI::IsMember(optim::kBf16DotNames.names()));
  app.add_option("--fp8-format", o.fp8_format,
                 kFp8FormatNames.listed() + " (fp8: e4m3 forward and e5m2 gradients, or e4m3 for both)")
      ->capture_default_str();
  app.add_option("--fp8-amax-history-len", o.fp8_amax_history_len, "fp8: amax history length per tensor")
      ->capture_default_str();
  app.add_option("--fp8-amax-compute-algo", o.fp8_amax_compute_algo,
                 kFp8AmaxAlgoNames.listed() + " (fp8: the history's largest amax, or the last)")
      ->capture_default_str();
  app.add_option("--fp8-margin", o.fp8_margin, "fp8: scales are divided by 2^margin")->capture_default_str();
  app.add_option("--fp8-scale", o.fp8_scale,
                 kFp8ScaleNames.listed() + " (fp8: a power of two, exact to apply; fp8_max / amax; 1)")
      ->capture_default_str();
}

// The optimization: length, batch, learning rate and its schedule, seed, threads.
inline void add_optimization_flags(CLI::App& app, TrainOptions& o) {
  train::TrainingArguments& a = o.args;
  app.add_option("--epochs", a.num_train_epochs,
                 recipe_help("training epochs", kBagRecipe.epochs, kTransformerRecipe.epochs))
      ->check(CLI::Range(1e-3, 1e6));
  app.add_option("--max-steps", a.max_steps, "optimizer steps (instead of --epochs: give one)")->check(kStepCount);
  app.add_option("--batch-size", a.per_device_train_batch_size,
                 recipe_help("training batch size", kBagRecipe.batch_size, kTransformerRecipe.batch_size))
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 20));
  app.add_option("--eval-batch-size", a.per_device_eval_batch_size, "evaluation batch size")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 20));
  app.add_option("--lr", a.learning_rate,
                 recipe_help("peak learning rate", kBagRecipe.learning_rate, kTransformerRecipe.learning_rate));
  app.add_option(
      "--weight-decay", a.weight_decay,
      recipe_help("AdamW weight decay (matrices only)", kBagRecipe.weight_decay, kTransformerRecipe.weight_decay));
  app.add_option("--embedding-lr", a.embedding_learning_rate,
                 "the token table's own peak learning rate, under the same schedule (default: --lr)");
  app.add_option("--label-smoothing", a.label_smoothing_factor,
                 "label smoothing of the training loss, in [0, 1) (HF's label_smoothing_factor)")
      ->capture_default_str();
  app.add_option("--warmup-steps", a.warmup_steps, "linear warmup steps (instead of --warmup-ratio: give one)")
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 40));
  app.add_option(
         "--warmup-ratio", a.warmup_ratio,
         "linear warmup over this share of all steps, in [0, 1), rounded up (instead of --warmup-steps: give one)")
      ->capture_default_str();
  app.add_option("--scheduler", o.scheduler, optim::kScheduleNames.listed())->capture_default_str();
  app.add_option("--seed", a.seed, "random seed (weights, data order, dropout)")
      ->capture_default_str()
      ->check(kSeedRange);
  app.add_flag("--group-by-length", a.group_by_length,
               "training batches of texts of similar length (HF's group_by_length): less padding, so a "
               "transformer's steps cost less (the data order changes with it)");
  app.add_option("--threads", o.threads,
                 "OpenMP threads: N, or auto (all cores or 1, whichever runs the steps faster, measured as it "
                 "trains; the default for one process without OMP_NUM_THREADS)")
      ->check(CLI::IsMember({"auto"}) | CLI::Range(1, 1024));
}

// Output, checkpoints, evaluation and logging strategies, clipping, early stopping, data-parallel checks.
inline void add_run_flags(CLI::App& app, TrainOptions& o) {
  train::TrainingArguments& a = o.args;
  app.add_option("--output-dir", a.output_dir, "checkpoints and logs")->capture_default_str();
  app.add_flag("--overwrite-output-dir", o.overwrite_output_dir,
               "train into an output dir that holds checkpoints of an earlier run (never one a live run holds)");
  app.add_option("--resume", o.resume,
                 "continue from a checkpoint, or a run's output directory (its latest checkpoint)")
      ->check(CLI::ExistingDirectory);
  app.add_option("--eval-strategy,--evaluation-strategy", o.eval_strategy, train::kIntervalStrategyNames.listed())
      ->capture_default_str();
  app.add_option("--eval-steps", a.eval_steps, "evaluate every N steps (selects --eval-strategy steps)")
      ->check(kStepCount);
  app.add_option("--logging-steps", a.logging_steps, "log every N steps")->capture_default_str()->check(kStepCount);
  app.add_option("--save-strategy", o.save_strategy, train::kIntervalStrategyNames.listed())->capture_default_str();
  app.add_option("--save-steps", a.save_steps, "save every N steps (selects --save-strategy steps)")->check(kStepCount);
  app.add_option("--save-total-limit", a.save_total_limit, "keep the newest N checkpoints and the best (-1: all)")
      ->capture_default_str();
  app.add_flag("--save-only-model", a.save_only_model,
               "checkpoints without the optimizer, scheduler, scaler and RNG state (HF's save_only_model): a third "
               "of the size; eval and predict take them, --resume does not");
  app.add_option("--max-grad-norm", a.max_grad_norm, "gradient clipping (0: off)")->capture_default_str();
  app.add_option("--grad-accum", a.gradient_accumulation_steps, "gradient accumulation steps")->check(kStepCount);
  app.add_flag("--load-best", a.load_best_model_at_end, "load the best checkpoint at the end");
  app.add_option("--metric", a.metric_for_best_model, "loss | accuracy | f1 (for --load-best and --early-stopping)")
      ->capture_default_str();
  app.add_option("--early-stopping", o.early_stopping, "stop after N evaluations without improvement")
      ->check(kStepCount);
  app.add_flag("--detect-anomaly", a.detect_anomaly, "name the first op that produces inf/NaN");
  app.add_option("--ddp-comm", o.ddp_comm,
                 "under mpirun: the gradients' wire format, " + dist::kWireFormatNames.listed() +
                     " (16-bit: cast while still loss-scaled; docs/distributed.md)")
      ->capture_default_str()
      ->check(CLI::IsMember(dist::kWireFormatNames.names()));
  app.add_option("--ddp-check-every", a.ddp_check_every,
                 "under mpirun: every N steps compare every rank's parameters, masters and optimizer state, "
                 "stopping at the first that differs")
      ->check(kStepCount);
}

// The inspector, the tokenizer and the model architecture, and how data files are read.
inline void add_model_flags(CLI::App& app, TrainOptions& o) {
  train::TrainingArguments& a = o.args;
  app.add_option("--inspect", o.inspect,
                 "every N steps print per-tensor fp16 numerics (zeros, underflow, subnormals, headroom) and append "
                 "them to output_dir/numerics.jsonl; a skipped step names its first inf/NaN op")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 40));
  app.add_flag("--inspect-mx", o.inspect_mx,
               "with --inspect: also show what MXFP8 (e4m3) and MXFP4 block quantization would keep of each "
               "tensor (docs/formats.md)");
  app.add_option("--max-len", o.max_len, "maximum tokens per text (longer texts are truncated, and counted)")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{1}, io::ArchitectureCaps::kMaxLen));
  app.add_option("--tokenizer", o.tokenizer,
                 data::kTokenizerKindNames.listed() + " (sentencepiece: trained on --train, or --spm-model)")
      ->capture_default_str()
      ->check(CLI::IsMember(data::kTokenizerKindNames.names()));
  app.add_option(
         "--positions", o.positions,
         "learned | none (a bag); default learned for bytes, and for words and sentencepiece with --layers >= 1 "
         "(then words drops its bigrams), else none")
      ->check(CLI::IsMember({"learned", "none"}));
  // The types halfgrad trains (kSpmTypeNames' first two; a --spm-model may be of any).
  const std::vector<std::string> trained_types = {std::string(data::kSpmTypeNames.name(data::SpmType::kUnigram)),
                                                  std::string(data::kSpmTypeNames.name(data::SpmType::kBpe))};
  app.add_option("--spm-type", o.spm_type,
                 "sentencepiece: the model to train, " + trained_types[0] + " | " + trained_types[1])
      ->capture_default_str()
      ->check(CLI::IsMember(trained_types));
  app.add_option("--vocab-size", a.tokenizer.spm_vocab_size, "sentencepiece: pieces of the model to train")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 24));
  app.add_option("--spm-model", o.spm_model, "sentencepiece: use this trained .model file instead of training one")
      ->check(CLI::ExistingFile);
  app.add_option("--ngram-min", a.tokenizer.ngram_min, "char-ngrams: shortest n-gram (characters)")
      ->capture_default_str()
      ->check(CLI::Range(1, 32));
  app.add_option("--ngram-max", a.tokenizer.ngram_max, "char-ngrams: longest n-gram (characters)")
      ->capture_default_str()
      ->check(CLI::Range(1, 32));
  app.add_option("--buckets", a.tokenizer.buckets,
                 "char-ngrams, words: hash buckets, the embedding rows (default: min(2^18, a power of two >= 4 x the "
                 "training data's distinct n-grams), 2^18 for the main job)")
      ->check(CLI::Range(int64_t{1}, io::ArchitectureCaps::kBuckets));
  app.add_option("--d-model", o.d_model, "model width")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{1}, io::ArchitectureCaps::kDModel));
  app.add_option("--heads", o.heads, "attention heads (must divide d-model)")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{1}, io::ArchitectureCaps::kHeads));
  app.add_option("--layers", o.layers, "encoder layers")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{0}, io::ArchitectureCaps::kLayers));
  app.add_option("--d-ff", o.d_ff, "feed-forward width")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{1}, io::ArchitectureCaps::kDFf));
  app.add_option("--dropout", o.dropout,
                 recipe_help("dropout probability", kBagRecipe.dropout, kTransformerRecipe.dropout))
      ->check(CLI::Range(0.0, 0.99));
  app.add_option("--pooling", o.pooling,
                 recipe_help("mean | cls", std::string(kBagRecipe.pooling), std::string(kTransformerRecipe.pooling)))
      ->check(CLI::IsMember({"mean", "cls"}));
  app.add_flag("--bag-skip", o.bag_skip,
               "with --layers >= 1: add the bag's representation (the mean of the layer-normed token embeddings) to "
               "the pooled encoder output, before the head");
  app.add_option("--encoder-drop-path", o.encoder_drop_path,
                 "with --bag-skip: in training, drop each example's pooled encoder output with this probability "
                 "(the bag path then classifies it alone; default 0: off)")
      ->check(CLI::Range(0.0f, 0.99f));
  add_read_flags(app, o.input_format, o.header, o.no_header);
}

inline void add_train_flags(CLI::App& app, TrainOptions& o) {
  train::TrainingArguments& a = o.args;
  a.output_dir = "halfgrad-output";
  a.num_train_epochs = kBagRecipe.epochs;
  a.per_device_train_batch_size = kBagRecipe.batch_size;
  a.learning_rate = kBagRecipe.learning_rate;
  a.weight_decay = kBagRecipe.weight_decay;
  a.warmup_ratio = 0.1;  // HF's warmup_ratio: no run is all warmup, however short
  a.save_total_limit = 2;
  a.seed = 0;
  a.logging_steps = 50;
  a.tokenizer.buckets = int64_t{1} << 18;  // without --buckets: data::default_buckets, once the data is read
  app.add_option("--train", o.train_file,
                 "training data, label<TAB>text (or __label__X text) per line (default: the language-id set)")
      ->check(CLI::ExistingFile);
  app.add_option("--eval", o.eval_file, "evaluation data (default with --train: none)")->check(CLI::ExistingFile);
  add_precision_flags(app, o);
  add_optimization_flags(app, o);
  add_run_flags(app, o);
  add_model_flags(app, o);
  app.add_option("--report-to", a.report_to,
                 "none | jsonl | html, one or more (HF's report_to): jsonl appends output_dir/log.jsonl, html writes "
                 "output_dir/report.html at the end (loss, metrics, learning rate, loss scale; with --inspect the "
                 "flushed shares)")
      ->capture_default_str()
      ->check(CLI::IsMember({"none", "jsonl", "html"}));
  app.add_option("--train-per-language", o.train_per_language, "language-id: training words per language")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{1}, int64_t{100000}));
  app.add_option("--test-per-language", o.test_per_language, "language-id: test words per language")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{1}, int64_t{100000}));
}

// Whether the command line gave `flag` (the resolve_* steps below).
struct GivenFlags {
  const CLI::App& cmd;
  bool operator()(const std::string& flag) const { return cmd.get_option(flag)->count() > 0; }
};

// --precision (or --fp16/--bf16) and the flags that complete it, into args.mixed_precision.
inline void resolve_precision(const GivenFlags& given, TrainOptions& o) {
  train::TrainingArguments& a = o.args;
  check(!(o.fp16 && o.bf16), "--fp16 and --bf16 are exclusive: give one (or --precision)");
  check(!((o.fp16 || o.bf16) && given("--precision")), "--fp16/--bf16 and --precision both given: give one");
  if (o.fp16) o.precision = "fp16";
  if (o.bf16) o.precision = "bf16";
  for (const char* flag : {"--loss-scale", "--opt-level"}) {
    check(o.precision == "fp16" || !given(flag), flag, " applies to --precision fp16 only (this run is ", o.precision,
          "): drop ", flag);
  }
  a.mixed_precision = optim::parse_mixed_precision(o.precision, o.opt_level, o.loss_scale);
  for (const char* flag :
       {"--fp8-format", "--fp8-amax-history-len", "--fp8-amax-compute-algo", "--fp8-margin", "--fp8-scale"}) {
    check(o.precision == "fp8" || !given(flag), flag, " applies to --precision fp8 only (this run is ", o.precision,
          "): drop ", flag);
  }
  if (o.precision == "fp8") {
    Fp8Recipe& r = a.mixed_precision.fp8;
    r.format = kFp8FormatNames.parse(o.fp8_format, "fp8_format (--fp8-format)");
    r.amax_history_len = o.fp8_amax_history_len;
    r.amax_compute_algo =
        kFp8AmaxAlgoNames.parse(o.fp8_amax_compute_algo, "fp8_amax_compute_algo (--fp8-amax-compute-algo)");
    r.margin = o.fp8_margin;
    r.scale = kFp8ScaleNames.parse(o.fp8_scale, "fp8_scale (--fp8-scale)");
    a.mixed_precision.validate();
  }
  // --accumulate: validate() names the flag when the precision has no f16 products to accumulate.
  a.mixed_precision.accumulation = optim::kAccumulationNames.parse(o.accumulate, "accumulate (--accumulate)");
  a.mixed_precision.rounding = optim::kRoundingNames.parse(o.rounding, "rounding (--rounding)");
  a.mixed_precision.flush_subnormals = o.flush_subnormals;
  a.mixed_precision.master_weights =
      optim::kMasterWeightsNames.parse(o.master_weights, "master_weights (--master-weights)");
  a.mixed_precision.update_rounding =
      optim::kUpdateRoundingNames.parse(o.update_rounding, "update_rounding (--update-rounding)");
  a.mixed_precision.bf16_dot = optim::kBf16DotNames.parse(o.bf16_dot, "bf16_dot (--bf16-dot)");
  a.mixed_precision.validate();
}

// The strategies (a step count selects its own), the flags that need evaluation data, and the
// flags that would have no effect together.
inline void resolve_strategies(const GivenFlags& given, TrainOptions& o) {
  train::TrainingArguments& a = o.args;
  // A step count selects its strategy; under another explicit strategy it would be ignored.
  using Strategy = train::IntervalStrategy;
  for (const auto& [steps, strategy_flag, field, text, strategy] :
       {std::tuple{"--save-steps", "--save-strategy", "save_strategy (--save-strategy)", &o.save_strategy,
                   &a.save_strategy},
        std::tuple{"--eval-steps", "--eval-strategy", "eval_strategy (--eval-strategy)", &o.eval_strategy,
                   &a.eval_strategy}}) {
    *strategy = train::kIntervalStrategyNames.parse(*text, field);
    if (!given(steps)) continue;
    check(!given(strategy_flag) || *strategy == Strategy::kSteps, steps, " has no effect with ", strategy_flag, " ",
          *text, ": drop ", strategy_flag, " (", steps, " selects ", strategy_flag, " steps) or drop ", steps);
    *strategy = Strategy::kSteps;
  }
  const bool has_eval = o.train_file.empty() || !o.eval_file.empty();  // the language-id set has a test split
  check(o.train_file.empty() || !(given("--train-per-language") || given("--test-per-language")),
        "--train-per-language and --test-per-language size the default language-id set: drop them with --train");
  check(o.eval_file.empty() || !o.train_file.empty(),
        "--eval needs --train (the default language-id set brings its own test split)");
  if (!has_eval) {
    check(!given("--eval-steps"), "--eval-steps needs evaluation data: add --eval FILE");
    const bool evaluates = a.eval_strategy != Strategy::kNo;
    check(!given("--eval-strategy") || !evaluates, "--eval-strategy ", o.eval_strategy,
          " needs evaluation data: add --eval FILE");
    check(!a.load_best_model_at_end, "--load-best needs evaluation data: add --eval FILE");
    check(o.early_stopping == 0, "--early-stopping needs evaluation data: add --eval FILE");
    if (evaluates) a.eval_strategy = Strategy::kNo;  // the default, epoch, without data to evaluate
  }
  check(o.early_stopping == 0 || a.eval_strategy != Strategy::kNo,
        "--early-stopping needs evaluations: drop --eval-strategy no");
  check(!given("--metric") || a.load_best_model_at_end || o.early_stopping > 0,
        "--metric has no effect without --load-best or --early-stopping");
  read_options(o.input_format, o.header, o.no_header);  // both --header and --no-header: an error now
  check(!o.train_file.empty() || !(given("--input-format") || given("--header") || given("--no-header")),
        "--input-format, --header and --no-header read --train and --eval files: drop them without --train");
  check(!o.inspect_mx || o.inspect > 0, "--inspect-mx adds columns to --inspect: give --inspect N too");
  check(!given("--save-total-limit") || a.save_strategy != Strategy::kNo,
        "--save-total-limit has no effect with --save-strategy no");
  check(!a.save_only_model || a.save_strategy != Strategy::kNo,
        "--save-only-model has no effect with --save-strategy no");
  check(!(given("--epochs") && given("--max-steps")),
        "--epochs and --max-steps both given: --max-steps would override --epochs; give one");
  check(!(given("--warmup-ratio") && given("--warmup-steps")),
        "--warmup-ratio and --warmup-steps both given: --warmup-steps would override --warmup-ratio; give one");
}

// --tokenizer and the flags of one kind, the positions, and the transformer's recipe defaults.
inline void resolve_model(const GivenFlags& given, TrainOptions& o) {
  train::TrainingArguments& a = o.args;
  a.tokenizer.kind = data::kTokenizerKindNames.parse(o.tokenizer, "tokenizer (--tokenizer)");
  for (const char* flag : {"--ngram-min", "--ngram-max"}) {
    check(a.tokenizer.kind == data::TokenizerKind::kCharNgrams || !given(flag), flag,
          " applies to --tokenizer char-ngrams only (this run is ", o.tokenizer, "): drop ", flag);
  }
  const bool spm = a.tokenizer.kind == data::TokenizerKind::kSentencePiece;
  check(!(a.tokenizer.kind == data::TokenizerKind::kBytes || spm) || !given("--buckets"),
        "--buckets applies to the hashed tokenizers only (this run is ", o.tokenizer, "): drop --buckets");
  for (const char* flag : {"--spm-type", "--vocab-size", "--spm-model"}) {
    check(spm || !given(flag), flag, " applies to --tokenizer sentencepiece only (this run is ", o.tokenizer,
          "): drop ", flag);
  }
  check(!given("--spm-model") || !(given("--spm-type") || given("--vocab-size")),
        "--spm-model brings its own model type and vocabulary: drop --spm-type and --vocab-size");
  a.tokenizer.spm_type = data::kSpmTypeNames.parse(o.spm_type, "--spm-type");
  check(!o.bag_skip || o.layers > 0,
        "--bag-skip needs --layers >= 1: with --layers 0 the model is a bag already, it has nothing to skip");
  check(o.encoder_drop_path == 0.0f || o.bag_skip,
        "--encoder-drop-path needs --bag-skip: without the bag path a dropped example has nothing left to classify");
  if (o.positions.empty()) {  // ordered tokens under an encoder; the hashed n-grams stay a bag
    const bool ordered = a.tokenizer.kind == data::TokenizerKind::kWords || spm;
    o.positions = a.tokenizer.kind == data::TokenizerKind::kBytes || (ordered && o.layers > 0) ? "learned" : "none";
  }
  if (o.layers > 0) {  // the transformer's recipe, for every recipe flag the user did not give
    const RecipeDefaults& r = kTransformerRecipe;
    if (!given("--dropout")) o.dropout = r.dropout;
    if (!given("--weight-decay")) a.weight_decay = r.weight_decay;
    if (!given("--lr")) a.learning_rate = r.learning_rate;
    if (!given("--epochs")) a.num_train_epochs = r.epochs;
    if (!given("--batch-size")) a.per_device_train_batch_size = r.batch_size;
    if (!given("--pooling")) o.pooling = r.pooling;
  }
  // With positions, words is the sequence of words: bigrams appended after them would take
  // positions that are not theirs.
  a.tokenizer.word_ngrams = o.positions == "learned" ? 1 : 2;
}

// Completes `o` after `cmd` (the train subcommand) parsed it, before any data is read: parses
// --precision (or --fp16/--bf16), --opt-level, --loss-scale, --accumulate, --rounding,
// --flush-subnormals and the --fp8-* recipe into args.mixed_precision, lets a
// flag that only works under one strategy select it (--save-steps selects --save-strategy steps,
// --eval-steps --eval-strategy steps), and rejects a flag that would have
// no effect (a conflicting explicit strategy, --eval-strategy without evaluation data, both
// --epochs and --max-steps, ...) with an hg::Error naming the flag to change. Then validates
// every value (TrainingArguments::validate, which the Trainer runs again).
inline void resolve_train_options(const CLI::App& cmd, TrainOptions& o) {
  const GivenFlags given{cmd};
  train::TrainingArguments& a = o.args;
  resolve_precision(given, o);
  a.lr_scheduler_type = optim::kScheduleNames.parse(o.scheduler, "lr_scheduler_type (--scheduler)");
  a.ddp_comm = dist::kWireFormatNames.parse(o.ddp_comm, "ddp_comm (--ddp-comm)");
  resolve_strategies(given, o);
  resolve_model(given, o);
  a.validate();
  check(!std::filesystem::exists(a.output_dir) || std::filesystem::is_directory(a.output_dir), "--output-dir ",
        a.output_dir, " exists and is not a directory");
}

// Every subcommand's options; CommandLine must outlive the CLI::App it is bound to.
struct CommandLine {
  TrainOptions train;
  std::string checkpoint, data_file;  // eval, predict
  bool best = false;                  // eval, predict --best: the run folder's best checkpoint
  int64_t eval_batch = 256;
  std::string input_format = "auto";       // eval --input-format
  bool header = false, no_header = false;  // eval --header, --no-header
  std::vector<std::string> texts;          // predict
  std::string input_file;                  // predict --input
  int64_t top_k = 0;                       // predict --top-k (0: every label, in label order)
  bool logits = false;                     // predict --logits
  std::string export_dir;                  // export-langid
  uint64_t export_seed = 0;
  CLI::App *train_cmd = nullptr, *eval_cmd = nullptr, *predict_cmd = nullptr, *export_cmd = nullptr;
};

// Adds the subcommands train, eval, predict and export-langid to `app`. None given: main()
// prints the usage and exits 2 (as git does); the main job is `halfgrad train`.
inline void setup_command_line(CLI::App& app, CommandLine& cl) {
  app.require_subcommand(0, 1);
  cl.train_cmd = app.add_subcommand("train", "train a classifier (no flags: the language-id main job)");
  add_train_flags(*cl.train_cmd, cl.train);

  cl.eval_cmd = app.add_subcommand("eval", "evaluate a checkpoint on labelled data");
  const char* checkpoint_help =
      "a checkpoint directory, or a run's output directory: its latest checkpoint (or --best)";
  const char* best_help = "with a run's output directory: its best checkpoint (the best metric of the evaluations)";
  cl.eval_cmd->add_option("--checkpoint", cl.checkpoint, checkpoint_help)->required()->check(CLI::ExistingDirectory);
  cl.eval_cmd->add_flag("--best", cl.best, best_help);
  cl.eval_cmd->add_option("--data", cl.data_file, "label<TAB>text (or __label__X text) file")
      ->required()
      ->check(CLI::ExistingFile);
  add_read_flags(*cl.eval_cmd, cl.input_format, cl.header, cl.no_header);
  cl.eval_cmd->add_option("--batch-size", cl.eval_batch, "batch size")->check(CLI::Range(int64_t{1}, int64_t{1} << 20));

  cl.predict_cmd = app.add_subcommand("predict", "label texts with a checkpoint");
  cl.predict_cmd->add_option("--checkpoint", cl.checkpoint, checkpoint_help)->required()->check(CLI::ExistingDirectory);
  cl.predict_cmd->add_flag("--best", cl.best, best_help);
  cl.predict_cmd->add_option("texts", cl.texts, "texts to label (default: one per line of --input, or of stdin)");
  cl.predict_cmd
      ->add_option("--input", cl.input_file, "a file of texts, one per line (- : stdin); blank lines are skipped")
      ->check(CLI::ExistingFile | CLI::IsMember({"-"}));
  cl.predict_cmd->add_option("--top-k", cl.top_k, "print the K most probable labels, most probable first")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 20));
  cl.predict_cmd->add_flag("--logits", cl.logits,
                           "print JSON lines {\"text\", \"label\", \"logits\"} with the f32 logits (%.9g: they "
                           "read back to the same floats) instead of probabilities");

  cl.export_cmd = app.add_subcommand("export-langid", "write the language-id split as train.tsv and test.tsv");
  cl.export_cmd->add_option("--out", cl.export_dir, "output directory")->required();
  cl.export_cmd->add_option("--seed", cl.export_seed, "split seed (as halfgrad train --seed)")->check(kSeedRange);
}

}  // namespace hg::cli
