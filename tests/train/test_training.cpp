// Training end to end: the three API levels agree bit for bit, resume equals an uninterrupted
// run bit for bit, a short run learns the synthetic task, a weight gone inf stops f32 training
// and makes fp16 training skip, count and warn, and the halfgrad command's error paths give
// one-line messages and exit codes.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <regex>

#include "halfgrad/base/error.h"
#include "halfgrad/data/dataset.h"
#include "halfgrad/io/checkpoint.h"
#include "halfgrad/io/digest.h"
#include "halfgrad/io/model_config.h"
#include "halfgrad/nn/text_classifier.h"
#include "halfgrad/optim/mixed_precision.h"
#include "tests/demos/run_program.h"
#include "tests/sweep_stride.h"
#include "tests/temp_dir.h"
#include "halfgrad/train/evaluation.h"
#include "halfgrad/train/trainer.h"

namespace hg::train {
namespace {

namespace fs = std::filesystem;

fs::path temp_path(const std::string& name) {
  return fs::temp_directory_path() / ("halfgrad_test_" + name + "_" + std::to_string(::getpid()));
}

fs::path fresh_dir(const std::string& name) {
  const fs::path dir = temp_path(name);
  fs::remove_all(dir);
  return dir;
}

nn::ClassifierConfig tiny_config(float dropout) {
  return {.vocab = 256,
          .max_len = 16,
          .d_model = 32,
          .heads = 2,
          .d_ff = 64,
          .layers = 1,
          .classes = 4,
          .dropout = dropout};
}

TrainingArguments tiny_args(const fs::path& dir, int64_t steps) {
  TrainingArguments a;
  a.output_dir = dir.string();
  a.max_steps = steps;
  a.per_device_train_batch_size = 32;
  a.learning_rate = 3e-3f;
  a.warmup_steps = 5;
  a.lr_scheduler_type = optim::Schedule::kCosine;
  a.logging_steps = 10;
  a.save_strategy = train::IntervalStrategy::kSteps;
  a.save_steps = 10;
  a.seed = 3;
  return a;
}

std::string fingerprint_line(const std::string& output) {
  std::smatch m;
  const std::regex re("weights fingerprint ([0-9a-f]{16})");
  return std::regex_search(output, m, re) ? m[1].str() : "missing";
}

// Stops a run after `step` optimizer steps, as a kill would (the schedule still spans all).
struct StopAt : TrainerCallback {
  explicit StopAt(int64_t step) : step(step) {}
  void on_step_end(const TrainerState& s, const nlohmann::json&) override { should_stop = s.global_step >= step; }
  int64_t step;
};

}  // namespace

TEST_CASE("manual loop, Accelerator and Trainer train bit-identical weights", "[train][program]") {
  for (const std::string flags : {"--steps 40", "--steps 40 --fp32"}) {
    const auto manual = testing::run_program("manual_loop", flags);
    const auto accelerator = testing::run_program("accelerator_loop", flags);
    const auto trainer = testing::run_program("trainer", flags + " --out " + fresh_dir("levels").string());
    REQUIRE(manual.exit_code == 0);
    REQUIRE(accelerator.exit_code == 0);
    REQUIRE(trainer.exit_code == 0);
    INFO(flags);
    CHECK(fingerprint_line(manual.output) != "missing");
    CHECK(fingerprint_line(manual.output) == fingerprint_line(accelerator.output));
    CHECK(fingerprint_line(manual.output) == fingerprint_line(trainer.output));
  }
}

TEST_CASE(
    "resuming from a checkpoint continues bit for bit (f32, fp16 O2, stochastic rounding, flush to zero, pure bf16 and "
    "fp16)",
    "[train]") {
  const data::Dataset train_set = data::synthetic_dataset(500, 4, 1);
  using optim::Precision;
  const std::vector<optim::MixedPrecisionOptions> modes = {
      {.precision = Precision::kNo},
      {.precision = Precision::kFp16, .opt_level = optim::OptLevel::kO2},
      {.precision = Precision::kFp16, .opt_level = optim::OptLevel::kO2, .rounding = precision::Rounding::kStochastic},
      {.precision = Precision::kBf16, .flush_subnormals = true},
      {.precision = Precision::kBf16,
       .master_weights = optim::MasterWeightsKind::kNone,
       .update_rounding = optim::UpdateRounding::kStochastic},
      {.precision = Precision::kFp16,
       .opt_level = optim::OptLevel::kO2,
       .master_weights = optim::MasterWeightsKind::kNone,
       .update_rounding = optim::UpdateRounding::kKahan}};
  // 30 steps, stopped after 20 (checkpoints every 10); in the sanitized tree (tests/sweep_stride.h)
  // 15 stopped after 10 (every 5), where the six modes took 21 s: a resumed step is a resumed
  // step, however many follow.
  const int64_t total = hg::testing::kSweepStride == 1 ? 30 : 15, stop = total * 2 / 3;
  std::vector<uint64_t> fingerprints;
  for (const optim::MixedPrecisionOptions& mode : modes) {
    INFO(optim::mixed_precision_to_json(mode).dump());
    const fs::path full_dir = fresh_dir("resume_full"), part_dir = fresh_dir("resume_part");
    TrainingArguments full_args = tiny_args(full_dir, total);
    full_args.save_steps = total / 3;
    full_args.mixed_precision = mode;
    nn::TextClassifier uninterrupted(tiny_config(0.1f), 5);
    Trainer(uninterrupted, full_args, train_set).train();

    // Stop after `stop` of the `total` steps (the schedule still spans all), then resume in a new model.
    TrainingArguments part_args = full_args;
    part_args.output_dir = part_dir.string();
    {
      nn::TextClassifier first(tiny_config(0.1f), 5);
      Trainer stopping(first, part_args, train_set, nullptr, {}, {std::make_shared<StopAt>(stop)});
      stopping.train();
    }
    nn::TextClassifier resumed(tiny_config(0.1f), 99);  // other initial weights: all must come from the checkpoint
    Trainer second(resumed, part_args, train_set);
    second.train((part_dir / ("checkpoint-" + std::to_string(stop))).string());
    CHECK(second.state().global_step == total);
    CHECK(resumed.fingerprint() == uninterrupted.fingerprint());
    // Inference reads the run's numerics back from the checkpoint.
    CHECK(
        load_for_inference((part_dir / ("checkpoint-" + std::to_string(total))).string()).mixed_precision->options() ==
        mode.resolved());
    fingerprints.push_back(resumed.fingerprint());
    fs::remove_all(full_dir);
    fs::remove_all(part_dir);
  }
  CHECK(fingerprints[2] != fingerprints[1]);  // stochastic rounding took effect
}

TEST_CASE("a short fp16 run learns the synthetic task", "[train]") {
  const data::Dataset train_set = data::synthetic_dataset(2000, 4, 7), eval_set = data::synthetic_dataset(400, 4, 8);
  const fs::path dir = fresh_dir("learn");
  TrainingArguments args = tiny_args(dir, 150);
  args.mixed_precision = {.precision = optim::Precision::kFp16, .opt_level = optim::OptLevel::kO1};
  args.save_strategy = train::IntervalStrategy::kNo;
  nn::TextClassifier model(tiny_config(0.0f), 1);
  Trainer trainer(model, args, train_set, &eval_set);
  trainer.train();
  const Metrics m = trainer.evaluate();
  // Each class draws 80% of its letters from its own pair, so a bag of letters separates the
  // classes almost perfectly; 150 steps reach it with margin (measured: 100%).
  CHECK(m.at("eval_accuracy") >= 0.95);
  CHECK(fs::exists(dir / "log.jsonl"));
  fs::remove_all(dir);
}

// The token table's own parameter group: at embedding_learning_rate 1e-7, 20 AdamW steps move
// each of its weights by at most 20 x 1e-7 x 3.2 (Adam's bias-corrected step is at most
// (1 - beta1) / sqrt(1 - beta2) = 3.2 times the rate) plus a decay of lr x wd x |w|, so below 1e-5,
// while the head, at 3e-3, moves by more than 1e-3, as the table does without the group. The
// checkpoint's optimizer and scheduler hold the three groups with their decays and rates.
// group_by_length (HF's): 500 texts of 4-12 bytes, batches of 32, 30 steps across an epoch
// boundary (16 steps each). The grouped run trains on other batches than the plain one, writes
// the key in its training args, and a run stopped at step 20 resumes onto the same weights.
TEST_CASE("group_by_length changes the batches, is saved with the run, and resumes bit for bit", "[train][resume]") {
  const data::Dataset train_set = data::synthetic_dataset(500, 4, 1);
  // Trains into `dir` for 30 steps or until `stop`, from `resume_from` when given.
  auto run = [&](const std::string& name, bool grouped, int64_t stop, const std::string& resume_from, uint64_t init) {
    const fs::path dir = fresh_dir(name);
    TrainingArguments args = tiny_args(dir, 30);
    args.group_by_length = grouped;
    nn::TextClassifier model(tiny_config(0.1f), init);
    Trainer(model, args, train_set, nullptr, {}, {std::make_shared<StopAt>(stop)}).train(resume_from);
    return model.fingerprint();
  };
  const uint64_t plain = run("grouped_off", false, 30, "", 5), grouped = run("grouped_on", true, 30, "", 5);
  CHECK(grouped != plain);
  const io::Checkpoint on = io::load_checkpoint(temp_path("grouped_on") / "checkpoint-30");
  const io::Checkpoint off = io::load_checkpoint(temp_path("grouped_off") / "checkpoint-30");
  CHECK(on.trainer_state.at("training_args").at("group_by_length") == true);
  CHECK_FALSE(off.trainer_state.at("training_args").contains("group_by_length"));  // older JSON unchanged
  CHECK(TrainingArguments::from_json(on.trainer_state.at("training_args"), "test").group_by_length);
  run("grouped_stopped", true, 20, "", 5);
  // A model of other initial weights: all of it must come from the checkpoint.
  const uint64_t resumed =
      run("grouped_resumed", true, 30, (temp_path("grouped_stopped") / "checkpoint-20").string(), 99);
  CHECK(resumed == grouped);
  for (const char* name : {"grouped_off", "grouped_on", "grouped_stopped", "grouped_resumed"})
    fs::remove_all(fresh_dir(name));
}

TEST_CASE("embedding_learning_rate trains the token table in a group of its own", "[train]") {
  const data::Dataset train_set = data::synthetic_dataset(400, 4, 7);
  auto largest_change = [](const std::vector<float>& a, const std::vector<float>& b) {
    float m = 0;
    for (size_t i = 0; i < a.size(); ++i) m = std::max(m, std::abs(a[i] - b[i]));
    return m;
  };
  for (const bool own : {true, false}) {
    INFO("own group " << own);
    const fs::path dir = fresh_dir("embedding_group");
    TrainingArguments args = tiny_args(dir, 20);
    args.save_steps = 20;
    if (own) {
      args.embedding_learning_rate = 1e-7f;
      args.weight_decay = 0.5f;  // the table's group keeps the run's weight decay
    }
    nn::TextClassifier model(tiny_config(0.0f), 1);
    const std::vector<float> table = model.token_embedding->weight.to_vector(), head = model.head->weight.to_vector();
    Trainer(model, args, train_set).train();
    CHECK(largest_change(model.head->weight.to_vector(), head) > 1e-3f);
    const float moved = largest_change(model.token_embedding->weight.to_vector(), table);
    const io::Checkpoint c = io::load_checkpoint(dir / "checkpoint-20");
    const nlohmann::json& groups = c.optimizer.meta.at("param_groups");
    if (own) {
      CHECK(moved < 1e-5f);
      REQUIRE(groups.size() == 3);
      CHECK(groups[2].at("params") == 1);
      CHECK(groups[2].at("weight_decay").get<float>() == 0.5f);
      CHECK(groups[0].at("weight_decay").get<float>() == 0.5f);
      CHECK(c.scheduler.at("base_lrs") == nlohmann::json::array({3e-3f, 3e-3f, 1e-7f}));
    } else {
      CHECK(moved > 1e-3f);
      CHECK(groups.size() == 2);
    }
    fs::remove_all(dir);
  }
}

// label_smoothing_factor (HF's) eps: the smoothed loss is least where the label's probability is
// 1 - eps + eps / K, 0.775 for eps 0.3 and K = 4, so the trained model's confidence stays near it;
// without smoothing the same run passes 0.9 on this separable task.
TEST_CASE("label_smoothing_factor caps the trained model's confidence at the smoothed optimum", "[train]") {
  const data::Dataset train_set = data::synthetic_dataset(2000, 4, 7), eval_set = data::synthetic_dataset(400, 4, 8);
  for (const float eps : {0.3f, 0.0f}) {
    INFO("label_smoothing_factor " << eps);
    const fs::path dir = fresh_dir("label_smoothing");
    TrainingArguments args = tiny_args(dir, 150);
    args.save_strategy = train::IntervalStrategy::kNo;
    args.label_smoothing_factor = eps;
    nn::TextClassifier model(tiny_config(0.0f), 1);
    Trainer trainer(model, args, train_set, &eval_set);
    trainer.train();
    const EvalPrediction p = trainer.predict(eval_set).prediction;
    double confidence = 0;  // the mean probability of the predicted class
    for (size_t row = 0; row < p.label_ids.size(); ++row) {
      const float* z = &p.logits[row * 4];
      const float top = *std::max_element(z, z + 4);
      double sum = 0;
      for (int k = 0; k < 4; ++k) sum += std::exp(double(z[k]) - top);
      confidence += 1.0 / sum / double(p.label_ids.size());
    }
    if (eps > 0) {
      CHECK(confidence < 0.8);
      CHECK(confidence > 0.7);
    } else {
      CHECK(confidence > 0.9);
    }
    fs::remove_all(dir);
  }
}

TEST_CASE("load_best_model_at_end puts the best checkpoint's weights back (fp16 O2: masters, then the model)",
          "[train]") {
  const data::Dataset train_set = data::synthetic_dataset(500, 4, 1), eval_set = data::synthetic_dataset(200, 4, 2);
  const fs::path dir = fresh_dir("load_best");
  TrainingArguments args = tiny_args(dir, 30);
  args.mixed_precision = {.precision = optim::Precision::kFp16, .opt_level = optim::OptLevel::kO2};
  args.eval_strategy = train::IntervalStrategy::kSteps;
  args.eval_steps = 10;
  args.load_best_model_at_end = true;
  // "Best" = lowest accuracy, so that the chosen checkpoint is an early one, not the final state.
  args.metric_for_best_model = "accuracy";
  args.greater_is_better = false;
  nn::TextClassifier model(tiny_config(0.0f), 5);
  Trainer trainer(model, args, train_set, &eval_set);
  trainer.train();
  const std::string best_dir = trainer.state().best_model_checkpoint;
  REQUIRE(best_dir != (dir / "checkpoint-30").string());
  const io::Checkpoint best = io::load_checkpoint(best_dir);
  optim::MixedPrecision& mp = trainer.accelerator().mixed_precision();
  for (const auto& [name, master] : mp.optimizer_parameters()) {
    INFO(name);
    CHECK(master.to_vector() == best.model.at(name).to_vector());
  }
  // The f16 model holds the masters rounded once: the same bits as casting the checkpoint's.
  for (const auto& [name, parameter] : model.named_parameters()) {
    INFO(name);
    CHECK(parameter.to_vector() == best.model.at(name).to(parameter.dtype()).to_vector());
  }
  fs::remove_all(dir);
}

namespace {

// Every tensor of `a` and `b` (same names, same bits), as "" or the first that differs.
std::string tensor_difference(const std::map<std::string, Tensor>& a, const std::map<std::string, Tensor>& b) {
  if (a.size() != b.size()) return "sizes " + std::to_string(a.size()) + " and " + std::to_string(b.size());
  for (const auto& [name, t] : a) {
    const auto it = b.find(name);
    if (it == b.end()) return "'" + name + "' missing";
    if (t.dtype() != it->second.dtype() || t.shape() != it->second.shape() || t.nbytes() != it->second.nbytes() ||
        std::memcmp(t.bytes(), it->second.bytes(), t.nbytes()) != 0) {
      return "'" + name + "' differs";
    }
  }
  return "";
}

}  // namespace

TEST_CASE("Accelerator::state_dict is the run's state: what a checkpoint holds, what load_state_dict restores",
          "[train][resume]") {
  const data::Dataset train_set = data::synthetic_dataset(200, 4, 1);
  using optim::Precision;
  for (const optim::MixedPrecisionOptions& mode :
       {optim::MixedPrecisionOptions{.precision = Precision::kFp16, .opt_level = optim::OptLevel::kO2},
        optim::MixedPrecisionOptions{.precision = Precision::kFp8}}) {
    INFO(optim::mixed_precision_to_json(mode).dump());
    const fs::path dir = fresh_dir("state_dict");
    TrainingArguments args = tiny_args(dir, 4);
    args.save_steps = 4;
    args.mixed_precision = mode;
    nn::TextClassifier model(tiny_config(0.1f), 5);
    Trainer trainer(model, args, train_set);
    trainer.train();
    const io::Checkpoint state = trainer.accelerator().state_dict();
    // Every part is there: the masters (O2) or the fp8 scales, optimizer, scheduler, scaler, rng,
    // and the loop's counters and running sums.
    CHECK(state.model.size() == model.named_parameters().size());
    CHECK(state.model.at("head.weight").dtype() == DType::f32);
    CHECK(state.fp8.is_null() == (mode.precision != Precision::kFp8));
    CHECK(state.optimizer.tensors.size() == 2 * state.model.size());         // AdamW's exp_avg, exp_avg_sq
    CHECK(state.scheduler.at("step") == 4 - trainer.state().skipped_steps);  // steps only when the optimizer did
    CHECK(state.scaler.empty() == (mode.precision != Precision::kFp16));     // torch's {} when disabled
    CHECK(state.rng.at("dropout").at("offset") == model.dropout_gen->offset());
    CHECK(state.trainer_state.at("global_step") == 4);
    CHECK(state.trainer_state.at("loss_sum") == trainer.state().loss_sum);
    CHECK(state.trainer_state.at("epoch_loss_steps") == trainer.state().epoch_loss_steps);

    // Every part but the trainer state (compared by each caller) equals the state's.
    auto check_same_parts = [&state](const io::Checkpoint& c) {
      CHECK(tensor_difference(c.model, state.model) == "");
      CHECK(tensor_difference(c.optimizer.tensors, state.optimizer.tensors) == "");
      CHECK(c.optimizer.meta == state.optimizer.meta);
      CHECK(c.scheduler == state.scheduler);
      CHECK(c.scaler == state.scaler);
      CHECK(c.rng == state.rng);
      CHECK(c.fp8 == state.fp8);
    };
    // The checkpoint the run saved holds exactly this state.
    const io::Checkpoint saved = io::load_checkpoint(dir / "checkpoint-4");
    check_same_parts(saved);
    nlohmann::json loop = saved.trainer_state;
    loop.erase("training_args");  // the Trainer's, beside the state
    // After the save, the end of training logged its summary: the saved log is the start of it.
    nlohmann::json now = state.trainer_state;
    const nlohmann::json& log = state.trainer_state.at("log_history");
    REQUIRE(log.size() > loop.at("log_history").size());
    now["log_history"] = nlohmann::json(log.begin(), log.begin() + std::ptrdiff_t(loop.at("log_history").size()));
    CHECK(loop == now);

    // Another model (other initial weights) takes all of it back.
    nn::TextClassifier other(tiny_config(0.1f), 99);
    TrainingArguments other_args = args;
    other_args.output_dir = (dir / "other").string();
    Trainer second(other, other_args, train_set);
    second.accelerator().load_state_dict(state, "memory");
    const io::Checkpoint restored = second.accelerator().state_dict();
    check_same_parts(restored);
    CHECK(restored.trainer_state == state.trainer_state);
    CHECK(second.state().global_step == 4);
    CHECK(other.fingerprint() == model.fingerprint());  // the 16-bit model follows the masters

    // Model only: the model's part and the loop's, which a resume refuses.
    const io::Checkpoint model_only = trainer.accelerator().state_dict(/*model_only=*/true);
    CHECK(tensor_difference(model_only.model, state.model) == "");
    CHECK(model_only.fp8 == state.fp8);
    CHECK(model_only.optimizer.tensors.empty());
    CHECK(model_only.scheduler.is_null());
    CHECK(model_only.scaler.is_null());
    CHECK(model_only.rng.is_null());
    CHECK(model_only.trainer_state == state.trainer_state);
    CHECK_THAT(testing::error_of([&] { second.accelerator().load_state_dict(model_only, "m"); }),
               Catch::StartsWith("m: a --save-only-model checkpoint"));

    // Inference builds only what it uses: the model in the dtype it computes in, no f32 masters,
    // no loss scaler (not a MixedPrecision), and the same logits as the trained model.
    const InferenceModel loaded = load_for_inference((dir / "checkpoint-4").string());
    CHECK(loaded.mixed_precision->masters() == nullptr);
    CHECK(dynamic_cast<const optim::MixedPrecision*>(loaded.mixed_precision.get()) == nullptr);
    CHECK(loaded.model->head->weight.dtype() == model.head->weight.dtype());
    CHECK(loaded.model->fingerprint() == model.fingerprint());
    fs::remove_all(dir);
  }
}

TEST_CASE("a resume whose model differs in pooling, dropout or sparse_embedding is refused, naming the field",
          "[train][bad_input]") {
  const data::Dataset train_set = data::synthetic_dataset(64, 4, 1);
  const fs::path dir = fresh_dir("resume_model");
  TrainingArguments args = tiny_args(dir, 2);
  args.save_steps = 2;
  {
    nn::TextClassifier model(tiny_config(0.1f), 5);
    Trainer(model, args, train_set).train();
  }
  const std::string checkpoint = (dir / "checkpoint-2").string();
  auto resume_error = [&](const nn::ClassifierConfig& config) {
    TrainingArguments resume_args = args;
    resume_args.output_dir = (dir / "resumed").string();
    resume_args.max_steps = 4;
    nn::TextClassifier model(config, 5);
    Trainer trainer(model, resume_args, train_set);
    return testing::error_of([&] { trainer.train(checkpoint); });
  };
  nn::ClassifierConfig cls = tiny_config(0.1f);
  cls.pooling = nn::Pooling::kCls;
  cls.vocab = 257;  // bytes and the CLS token
  CHECK_THAT(resume_error(cls),
             Catch::StartsWith(checkpoint +
                               ": the checkpoint does not match this run: vocab_size: checkpoint 256, "
                               "this run 257 (--buckets); pooling: checkpoint \"mean\", this run \"cls\" (--pooling)"));
  // 0.1f and 0.2f as config.json holds them (the float widened to double, printed shortest).
  CHECK(resume_error(tiny_config(0.2f)) ==
        checkpoint +
            ": the checkpoint does not match this run: dropout: checkpoint 0.10000000149011612, this run "
            "0.20000000298023224 (--dropout)");
  nn::ClassifierConfig sparse = tiny_config(0.1f);
  sparse.sparse_embedding = true;
  CHECK(resume_error(sparse) ==
        checkpoint + ": the checkpoint does not match this run: sparse_embedding: checkpoint false, this run true");
  fs::remove_all(dir);
}

// Sets one element of a trained tensor (the f32 master under O2) to inf after step `at`, as a
// diverging run would, so that every later forward pass produces inf/NaN.
struct PoisonWeightAt : TrainerCallback {
  Trainer* trainer = nullptr;
  int64_t at = 0;
  std::string name;
  void on_step_end(const TrainerState& s, const nlohmann::json&) override {
    if (s.global_step != at) return;
    optim::MixedPrecision& mp = trainer->accelerator().mixed_precision();
    for (const auto& [n, tensor] : mp.optimizer_parameters()) {
      if (n != name) continue;
      std::vector<float> values = tensor.to_vector();
      values[0] = std::numeric_limits<float>::infinity();
      tensor.assign_nearest(values);
    }
    if (optim::MasterWeights* masters = mp.masters()) masters->copy_masters_to_model();
  }
};

TEST_CASE("a weight gone inf: f32 training stops with a message, fp16 skips, counts and warns naming the op",
          "[train]") {
  const data::Dataset train_set = data::synthetic_dataset(500, 4, 1);
  const fs::path dir = fresh_dir("poisoned");
  TrainingArguments args = tiny_args(dir, 40);
  args.save_strategy = train::IntervalStrategy::kNo;
  args.detect_anomaly = true;
  auto poison = std::make_shared<PoisonWeightAt>();
  poison->at = 5;
  poison->name = "head.weight";

  SECTION("f32, no scaler: the first NaN loss stops the run, naming the step and the op") {
    nn::TextClassifier model(tiny_config(0.0f), 5);
    Trainer trainer(model, args, train_set, nullptr, {}, {poison});
    poison->trainer = &trainer;
    // Anomaly mode without a scaler throws at the first op whose output is inf/NaN: the head's
    // linear layer at step 6, before a loss exists.
    CHECK_THROWS_WITH(trainer.train(), Catch::Contains("anomaly: forward of op 'linear'"));
    CHECK(trainer.state().global_step == 5);
  }
  SECTION("f32 without anomaly mode: the loss check stops the run") {
    args.detect_anomaly = false;
    nn::TextClassifier model(tiny_config(0.0f), 5);
    Trainer trainer(model, args, train_set, nullptr, {}, {poison});
    poison->trainer = &trainer;
    CHECK_THROWS_WITH(trainer.train(), Catch::Contains("training loss is NaN at step 6") &&
                                           Catch::Contains("stopping instead of training on garbage"));
  }
  SECTION("fp16 O2 with the scaler: every later step is skipped and counted, and the warning names the op") {
    args.mixed_precision = {.precision = optim::Precision::kFp16, .opt_level = optim::OptLevel::kO2};
    nn::TextClassifier model(tiny_config(0.0f), 5);
    Trainer trainer(model, args, train_set, nullptr, {}, {poison});
    poison->trainer = &trainer;
    trainer.train();
    CHECK(trainer.state().global_step == 40);
    // Steps 6..40 all see inf/NaN gradients: 35 skipped. The scale halves each time from 2^16
    // and falls below 1 at the 17th skip, where the (single) warning is raised.
    CHECK(trainer.state().skipped_steps == 35);
    // The NaN losses of those steps stay out of train_loss, which a checkpoint must store (JSON has
    // no NaN: it would be written as null and refused on resume).
    CHECK(trainer.state().loss_steps == 5);
    CHECK(std::isfinite(trainer.state().train_loss()));
    CHECK(TrainerState::from_json(trainer.state().to_json()).loss_sum == trainer.state().loss_sum);
    std::string warning;
    for (const auto& entry : trainer.state().log_history) {
      if (entry.contains("warning")) warning = entry["warning"];
    }
    CHECK_THAT(warning, Catch::StartsWith("the loss scale fell to 0.5 (below 1") &&
                            Catch::Contains("anomaly mode: anomaly: forward of op 'linear'"));
  }
  fs::remove_all(dir);
}

// Writes dir/train.tsv (600 synthetic texts, 3 classes) and dir/test.tsv (150), then runs
// `halfgrad train` on them with `flags`, writing to dir/out.
testing::ProgramResult train_on_synthetic_tsv(const fs::path& dir, const std::string& flags) {
  fs::create_directories(dir);
  data::write_tsv(data::synthetic_dataset(600, 3, 11), (dir / "train.tsv").string());
  data::write_tsv(data::synthetic_dataset(150, 3, 12), (dir / "test.tsv").string());
  return testing::run_program("halfgrad", "train --train " + (dir / "train.tsv").string() + " --eval " +
                                              (dir / "test.tsv").string() + flags + " --output-dir " +
                                              (dir / "out").string());
}

TEST_CASE("halfgrad command: train on TSV files, then eval and predict with the checkpoint", "[train][cli]") {
  const fs::path dir = fresh_dir("cli_flow");
  const std::string out = (dir / "out").string();
  const auto trained = train_on_synthetic_tsv(
      dir,
      " --tokenizer bytes --epochs 3 --batch-size 32 --lr 3e-3 --warmup-steps 5 --d-model 32 --heads 2 --layers 1"
      " --d-ff 64 --max-len 16");
  INFO(trained.output);
  REQUIRE(trained.exit_code == 0);
  CHECK_THAT(trained.output, Catch::Contains("synthetic") || Catch::Contains("train.tsv: 600 examples, 3 classes"));
  CHECK_THAT(trained.output, Catch::Contains("confusion matrix"));
  const fs::path checkpoint = io::latest_checkpoint(out);
  REQUIRE(!checkpoint.empty());
  CHECK(checkpoint.filename() == "checkpoint-57");  // 3 epochs of ceil(600 / 32) = 19 steps

  const auto evaluated = testing::run_program(
      "halfgrad", "eval --checkpoint " + checkpoint.string() + " --data " + (dir / "test.tsv").string());
  INFO(evaluated.output);
  REQUIRE(evaluated.exit_code == 0);
  std::smatch m;
  REQUIRE(std::regex_search(evaluated.output, m, std::regex(R"(accuracy ([0-9.]+))")));
  CHECK(std::stod(m[1]) > 0.9);

  const auto predicted =
      testing::run_program("halfgrad", "predict --checkpoint " + checkpoint.string() + " aabbab ccdcdd");
  INFO(predicted.output);
  REQUIRE(predicted.exit_code == 0);
  CHECK_THAT(predicted.output, Catch::Contains("aabbab\tclass0") && Catch::Contains("ccdcdd\tclass1"));
  fs::remove_all(dir);
}

TEST_CASE("halfgrad command: a char-ngrams bag model saves its tokenizer, and eval and predict use it",
          "[train][cli][tokenizer]") {
  const fs::path dir = fresh_dir("cli_bag");
  const std::string out = (dir / "out").string();
  const auto trained = train_on_synthetic_tsv(
      dir,
      " --tokenizer char-ngrams --ngram-min 1 --ngram-max 3 --buckets 1000 --epochs 3 --batch-size 32"
      " --lr 1e-2 --warmup-steps 5 --d-model 32 --heads 2 --layers 0 --max-len 64");
  INFO(trained.output);
  REQUIRE(trained.exit_code == 0);
  const fs::path checkpoint = io::latest_checkpoint(out);
  REQUIRE(!checkpoint.empty());
  nlohmann::json config;
  std::ifstream(checkpoint / "config.json") >> config;
  CHECK(config.at("tokenizer") ==
        nlohmann::json{{"type", "char-ngrams"}, {"ngram_min", 1}, {"ngram_max", 3}, {"buckets", 1000}});
  CHECK(config.at("vocab_size") == 1001);
  CHECK(config.at("position_embedding") == "none");
  CHECK(config.at("num_hidden_layers") == 0);

  const auto evaluated = testing::run_program(
      "halfgrad", "eval --checkpoint " + checkpoint.string() + " --data " + (dir / "test.tsv").string());
  INFO(evaluated.output);
  REQUIRE(evaluated.exit_code == 0);
  std::smatch m;
  REQUIRE(std::regex_search(evaluated.output, m, std::regex(R"(accuracy ([0-9.]+))")));
  CHECK(std::stod(m[1]) > 0.9);
  // Texts longer than max_len in bytes: fine, max_len counts n-grams (3 per character here).
  const auto predicted =
      testing::run_program("halfgrad", "predict --checkpoint " + checkpoint.string() + " aabbab ccdcdd eeffef");
  INFO(predicted.output);
  REQUIRE(predicted.exit_code == 0);
  CHECK_THAT(predicted.output, Catch::Contains("aabbab\tclass0") && Catch::Contains("ccdcdd\tclass1") &&
                                   Catch::Contains("eeffef\tclass2"));
  fs::remove_all(dir);
}

TEST_CASE("halfgrad command: a byte-level checkpoint with a config.json from before tokenizers predicts as before",
          "[train][cli][tokenizer]") {
  const fs::path dir = fresh_dir("cli_old_config");
  fs::create_directories(dir);
  data::write_tsv(data::synthetic_dataset(300, 3, 11), (dir / "train.tsv").string());
  const std::string out = (dir / "out").string();
  const auto trained = testing::run_program(
      "halfgrad", "train --train " + (dir / "train.tsv").string() +
                      " --tokenizer bytes --epochs 1 --batch-size 32 --d-model 16 --heads 2 --layers 1 --d-ff 32"
                      " --max-len 16 --output-dir " +
                      out);
  INFO(trained.output);
  REQUIRE(trained.exit_code == 0);
  const fs::path checkpoint = io::latest_checkpoint(out);
  REQUIRE(!checkpoint.empty());
  const std::string predict = "predict --checkpoint " + checkpoint.string() + " aabbab ccdcdd \"h\xC3\xA9llo w\"";
  const auto before = testing::run_program("halfgrad", predict);
  REQUIRE(before.exit_code == 0);

  // Rewrite config.json and trainer_state.json as earlier versions wrote them.
  nlohmann::json config, state;
  std::ifstream(checkpoint / "config.json") >> config;
  std::ifstream(checkpoint / "trainer_state.json") >> state;
  CHECK(config.at("tokenizer") == nlohmann::json{{"type", "bytes"}});
  CHECK(config.at("position_embedding") == "learned");
  config.erase("position_embedding");
  config["tokenizer"] = "bytes";
  state.at("training_args").erase("tokenizer");
  // The manifest records file sizes and SHA-256s; keep it consistent with the rewritten files.
  auto rewrite = [&](const std::string& name, const nlohmann::json& j) {
    std::ofstream(checkpoint / name) << j.dump(2);
    nlohmann::json manifest;
    std::ifstream(checkpoint / io::kManifestFile) >> manifest;
    manifest["files"][name] = {{"size", fs::file_size(checkpoint / name)},
                               {"sha256", io::sha256_file(checkpoint / name)}};
    std::ofstream(checkpoint / io::kManifestFile) << manifest.dump(2);
  };
  rewrite("config.json", config);
  rewrite("trainer_state.json", state);
  const auto after = testing::run_program("halfgrad", predict);
  INFO(after.output);
  REQUIRE(after.exit_code == 0);
  CHECK(after.output == before.output);
  CHECK_THAT(after.output, Catch::Contains("aabbab\t"));

  config.erase("tokenizer");  // no tokenizer at all: bytes too
  rewrite("config.json", config);
  CHECK(testing::run_program("halfgrad", predict).output == before.output);
  // Resuming the rewritten checkpoint with the same (byte) flags is accepted.
  const auto resumed = testing::run_program(
      "halfgrad", "train --train " + (dir / "train.tsv").string() +
                      " --tokenizer bytes --epochs 2 --batch-size 32 --d-model 16 --heads 2 --layers 1 --d-ff 32"
                      " --max-len 16 --output-dir " +
                      out + " --resume " + checkpoint.string());
  INFO(resumed.output);
  CHECK(resumed.exit_code == 0);
  fs::remove_all(dir);
}

TEST_CASE("halfgrad command: bad input gives a one-line error and a non-zero exit code", "[train][cli]") {
  const fs::path dir = fresh_dir("cli");
  fs::create_directories(dir);
  const std::string good = (dir / "good.tsv").string(), bad = (dir / "bad.tsv").string(),
                    empty = (dir / "empty.tsv").string();
  {
    std::ofstream(good) << "a\taaa bbb\nb\tccc ddd\na\tab\nb\tcd\n";
    std::ofstream(bad) << "a\tfine\nno tab on this line\n";
    std::ofstream(empty) << "\n";
  }
  struct Case {
    std::string args, message;
  };
  const std::vector<Case> cases = {
      {"train --train " + good + " --heads 3", "heads (3) must divide d_model (32)"},
      {"train --train " + good + " --ngram-min 4 --ngram-max 2",
       "ngram_min <= ngram_max <= 32, got ngram_min 4, ngram_max 2"},
      {"train --train " + good + " --tokenizer chars", "--tokenizer"},
      {"train --train " + good + " --buckets 0", "--buckets"},
      {"train --train " + good + " --tokenizer words --ngram-min 2",
       "--ngram-min applies to --tokenizer char-ngrams only (this run is words): drop --ngram-min"},
      {"train --train " + good + " --tokenizer bytes --buckets 1024",
       "--buckets applies to the hashed tokenizers only (this run is bytes): drop --buckets"},
      {"train --train " + good + " --tokenizer char-ngrams --pooling cls --layers 0", "pooling cls needs layers >= 1"},
      {"train --train " + bad, "bad.tsv:2: expected 'label<TAB>text', found no tab"},
      {"train --train " + empty, "empty.tsv: the data set is empty"},
      {"train --train /nonexistent/data.tsv", "/nonexistent/data.tsv"},
      {"train --train " + good + " --lr -1", "learning_rate (--lr) must be in (0, 10)"},
      {"train --train " + good + " --precision fp4", "--precision"},
      {"train --train " + good + " --loss-scale banana", "invalid loss scale 'banana'"},
      {"train --train " + good + " --batch-size 0", "--batch-size"},
      {"train --no-such-flag", "no-such-flag"},
      {"eval --checkpoint " + dir.string() + " --data " + good,
       "neither a checkpoint (no checkpoint.json) nor a run's"},
      {"predict --checkpoint /nonexistent/ckpt hello", "/nonexistent/ckpt"},
  };
  for (const Case& c : cases) {
    const bool train = c.args.rfind("train", 0) == 0;
    const testing::ProgramResult r =
        testing::run_program("halfgrad", c.args + (train ? " --output-dir " + (dir / "out").string() : ""));
    INFO("halfgrad " << c.args << "\n" << r.output);
    CHECK(r.exit_code != 0);
    CHECK_THAT(r.output, Catch::Contains(c.message));
    CHECK(std::count(r.output.begin(), r.output.end(), '\n') <= 3);  // short, not a dump
  }
  fs::remove_all(dir);
}

}  // namespace hg::train
