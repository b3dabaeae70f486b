// The `halfgrad` command's outputs (demos/halfgrad.cpp), run as a program on tiny f32 models: a
// --save-steps that selects its strategy, the train_loss column and summary against means
// hand-computed from log.jsonl (with and without a resume), predict --logits against the
// library's own forward pass, and the truncation notes of eval and predict.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <filesystem>
#include <map>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "halfgrad/data/dataset.h"
#include "halfgrad/nn/text_classifier.h"
#include "tests/demos/run_program.h"
#include "tests/temp_dir.h"
#include "halfgrad/io/checkpoint.h"
#include "halfgrad/train/evaluation.h"
#include "halfgrad/io/model_config.h"

namespace hg {
namespace {

namespace fs = std::filesystem;
using testing::TempDir;

// 16 examples in batches of 4: 4 optimizer steps an epoch.
const std::string kTinyF32 =
    " --precision fp32 --d-model 8 --heads 2 --layers 1 --d-ff 16 --max-len 8 --batch-size 4"
    " --threads 1 --logging-steps 1 --tokenizer bytes";

testing::ProgramResult halfgrad(const std::string& args) {
  testing::ProgramResult r = testing::run_program("halfgrad", args);
  INFO("halfgrad " << args << "\n" << r.output);
  REQUIRE(r.exit_code == 0);
  return r;
}

// log.jsonl: the loss of each step (logging_steps 1: each entry's "loss" is one step's), and the
// run's final "train_loss".
struct Log {
  std::map<int64_t, double> step_loss;
  double train_loss = -1;
};

Log read_log(const fs::path& file) {
  Log log;
  std::istringstream lines(testing::read_bytes(file));
  for (std::string line; std::getline(lines, line);) {
    const nlohmann::json j = nlohmann::json::parse(line);
    if (j.contains("loss")) log.step_loss[j.at("step").get<int64_t>()] = j.at("loss").get<double>();
    if (j.contains("train_loss")) log.train_loss = j.at("train_loss").get<double>();
  }
  return log;
}

double mean_of_steps(const Log& log, int64_t first, int64_t last) {
  double sum = 0;
  for (int64_t s = first; s <= last; ++s) {
    REQUIRE(log.step_loss.count(s) == 1);
    sum += log.step_loss.at(s);
  }
  return sum / double(last - first + 1);
}

// The table rows printed at each epoch's end (no evaluation data: epoch, step, train_loss,
// skipped, scale, time): step -> train_loss as printed.
std::map<int64_t, std::string> epoch_rows(const std::string& output) {
  std::map<int64_t, std::string> rows;
  const std::regex row(R"(^\s*[0-9.]+\s+([0-9]+)\s+([0-9.]+)\s+[0-9]+\s+\S+\s+[0-9]+s\s*$)");
  std::istringstream lines(output);
  std::smatch m;
  for (std::string line; std::getline(lines, line);) {
    if (std::regex_search(line, m, row)) rows[std::stoll(m[1])] = m[2];
  }
  return rows;
}

std::string summary_train_loss(const std::string& output) {
  std::smatch m;
  REQUIRE(
      std::regex_search(output, m, std::regex(R"(train_loss ([0-9.]+) \(the mean loss of the ([0-9]+) optimizer)")));
  return m[1];
}

TEST_CASE("halfgrad train --save-steps alone selects the steps save strategy", "[demo][cli]") {
  const TempDir dir("save_steps_selects");
  data::write_tsv(data::synthetic_dataset(16, 2, 3), dir / "train.tsv");
  const testing::ProgramResult r =
      halfgrad("train" + kTinyF32 + " --max-steps 6 --save-steps 3 --save-total-limit 5 --train " + dir / "train.tsv" +
               " --output-dir " + dir / "out");
  CHECK(fs::exists(dir.path / "out/checkpoint-3"));  // under the default epoch strategy: only checkpoint-4
  CHECK(fs::exists(dir.path / "out/checkpoint-6"));
  CHECK_FALSE(fs::exists(dir.path / "out/checkpoint-4"));
}

TEST_CASE("halfgrad train --accumulate reaches the checkpoint and is refused without f16 products",
          "[demo][cli][accumulate]") {
  const TempDir dir("accumulate_flag");
  data::write_tsv(data::synthetic_dataset(16, 2, 3), dir / "train.tsv");
  const std::string data = " --max-steps 2 --save-steps 2 --train " + dir / "train.tsv";
  const testing::ProgramResult refused = testing::run_program(
      "halfgrad", "train" + kTinyF32 + " --accumulate f16" + data + " --output-dir " + dir / "f32");
  CHECK(refused.exit_code == 1);
  CHECK_THAT(refused.output, Catch::Contains("accumulate (--accumulate) f16 applies to fp16 and pure_fp16 only"));
  std::string fp16 = kTinyF32;
  fp16.replace(fp16.find("fp32"), 4, "fp16");
  halfgrad("train" + fp16 + " --accumulate f16-blocked" + data + " --output-dir " + dir / "f16");
  const nlohmann::json state =
      nlohmann::json::parse(testing::read_bytes(dir.path / "f16/checkpoint-2/trainer_state.json"));
  CHECK(state.at("training_args").at("accumulate") == "f16-blocked");
}

TEST_CASE("halfgrad train --bf16-dot reaches the checkpoint and eval, and is refused without bf16 products",
          "[demo][cli][bf16_dot]") {
  const TempDir dir("bf16_dot_flag");
  data::write_tsv(data::synthetic_dataset(16, 2, 3), dir / "train.tsv");
  const std::string data = " --max-steps 2 --save-steps 2 --train " + dir / "train.tsv";
  const testing::ProgramResult refused = testing::run_program(
      "halfgrad", "train" + kTinyF32 + " --bf16-dot exact" + data + " --output-dir " + dir / "f32");
  CHECK(refused.exit_code == 1);
  CHECK_THAT(refused.output, Catch::Contains("bf16_dot (--bf16-dot) exact applies to bf16 and fp8 only"));
  std::string bf16 = kTinyF32;
  bf16.replace(bf16.find("fp32"), 4, "bf16");
  halfgrad("train" + bf16 + " --bf16-dot emulated" + data + " --output-dir " + dir / "bf16");
  const std::string checkpoint = (dir.path / "bf16/checkpoint-2").string();
  const nlohmann::json state = nlohmann::json::parse(testing::read_bytes(checkpoint + "/trainer_state.json"));
  CHECK(state.at("training_args").at("bf16_dot") == "emulated");
  CHECK(train::load_for_inference(checkpoint).mixed_precision->options().bf16_dot == kernels::Bf16Dot::kEmulated);
}

TEST_CASE("the train_loss column and summary are means of the step losses and the same after a resume", "[demo][cli]") {
  const TempDir dir("train_loss_column");
  data::write_tsv(data::synthetic_dataset(16, 2, 3), dir / "train.tsv");
  const std::string flags = "train" + kTinyF32 + " --epochs 2 --save-steps 6 --train " + dir / "train.tsv";
  const testing::ProgramResult whole = halfgrad(flags + " --output-dir " + dir / "whole");
  const Log log = read_log(dir.path / "whole/log.jsonl");
  REQUIRE(log.step_loss.size() == 8);

  // The columns print 4 decimals; the log's train_loss is the double itself.
  const std::map<int64_t, std::string> rows = epoch_rows(whole.output);
  REQUIRE(rows.size() == 2);
  CHECK(std::stod(rows.at(4)) == Approx(mean_of_steps(log, 1, 4)).margin(5.1e-5));
  CHECK(std::stod(rows.at(8)) == Approx(mean_of_steps(log, 5, 8)).margin(5.1e-5));
  CHECK(log.train_loss == Approx(mean_of_steps(log, 1, 8)).epsilon(1e-12));
  CHECK(std::stod(summary_train_loss(whole.output)) == Approx(mean_of_steps(log, 1, 8)).margin(5.1e-5));
  CHECK_THAT(whole.output, Catch::Contains("the mean loss of the 8 optimizer steps"));

  // Resumed from step 6 (mid epoch 2): the epoch-2 row and train_loss cover steps 5-8 and 1-8 again.
  const testing::ProgramResult resumed =
      halfgrad(flags + " --output-dir " + dir / "resumed" + " --resume " + dir / "whole/checkpoint-6");
  const std::map<int64_t, std::string> resumed_rows = epoch_rows(resumed.output);
  REQUIRE(resumed_rows.count(8) == 1);
  CHECK(resumed_rows.at(8) == rows.at(8));
  CHECK(summary_train_loss(resumed.output) == summary_train_loss(whole.output));
  CHECK(read_log(dir.path / "resumed/log.jsonl").train_loss == log.train_loss);
}

TEST_CASE("halfgrad train --precision fp8: the recipe flags, the checkpoint's scales, the inspector's fp8 table",
          "[demo][cli]") {
  const TempDir dir("fp8_flags");
  data::write_tsv(data::synthetic_dataset(16, 2, 3), dir / "train.tsv");
  std::string tiny = kTinyF32;
  tiny.replace(tiny.find("--precision fp32"), 16, "--precision fp8");
  const testing::ProgramResult r =
      halfgrad("train" + tiny +
               " --max-steps 4 --save-steps 4 --inspect 2 --fp8-amax-history-len 8 --fp8-scale exact"
               " --fp8-margin 1 --train " +
               dir / "train.tsv" + " --output-dir " + dir / "out");
  // The inspector's second table: per scaled operand, format, amax, scale, flushed, saturated.
  CHECK(std::regex_search(r.output, std::regex(R"(fp8 operand\s+format\s+amax\s+scale\s+->0%\s+sat%)")));
  CHECK(std::regex_search(r.output, std::regex(R"(\n  head grad_output\s+e5m2\s)")));
  CHECK(std::regex_search(r.output, std::regex(R"(\n  encoder.layers.0.ff.fc1 input\s+e4m3\s)")));
  const fs::path checkpoint = dir.path / "out/checkpoint-4";
  const nlohmann::json args =
      nlohmann::json::parse(testing::read_bytes(checkpoint / "trainer_state.json")).at("training_args");
  CHECK(args.at("fp8") == true);
  CHECK(args.at("fp8_scale") == "exact");
  CHECK(args.at("fp8_margin") == 1);
  CHECK(args.at("fp8_amax_history_len") == 8);
  CHECK(args.at("fp8_format") == "hybrid");
  const nlohmann::json scales = nlohmann::json::parse(testing::read_bytes(checkpoint / io::kFp8File));
  CHECK(scales.at("head").at("grad_output").at("amax_history").size() == 8);
  // exact, margin 1 (max over the window): scale = 448 / 2 / amax, so scale * amax = 224 within
  // the two f32 roundings of the quotient and the product.
  const nlohmann::json& w = scales.at("head").at("weight");
  float amax = 0;
  for (const nlohmann::json& a : w.at("amax_history")) amax = std::max(amax, a.get<float>());
  CHECK(w.at("scale").get<float>() * amax == Approx(224.0).epsilon(1e-6));
  // numerics.jsonl: per operand its format by role (hybrid: e5m2 for grad_output), shares in [0, 1].
  std::istringstream lines(testing::read_bytes(dir.path / "out/numerics.jsonl"));
  std::string first;
  std::getline(lines, first);
  const nlohmann::json inspected = nlohmann::json::parse(first);
  REQUIRE(inspected.contains("fp8"));
  for (const nlohmann::json& f : inspected.at("fp8")) {
    INFO(f.dump());
    CHECK(f.at("format") == (f.at("role") == "grad_output" ? "e5m2" : "e4m3"));
    CHECK(f.at("count").get<int64_t>() > 0);
    CHECK(f.at("flushed").get<double>() >= 0.0);
    CHECK(f.at("flushed").get<double>() <= 1.0);
    CHECK(f.at("saturated").get<double>() >= 0.0);
  }
  // The recipe flags belong to --precision fp8; bad values name the flag.
  for (const auto& [flags, message] : std::vector<std::pair<std::string, std::string>>{
           {" --fp8-margin 2", "--fp8-margin applies to --precision fp8 only (this run is fp32): drop --fp8-margin"},
           {" --precision fp8 --fp8-scale half", "fp8_scale (--fp8-scale): unknown value 'half'"},
           {" --precision fp8 --fp8-amax-history-len 0",
            "fp8_amax_history_len (--fp8-amax-history-len) must be in [1, 65536], got 0"},
           {" --precision fp8 --fp8-amax-compute-algo mean",
            "fp8_amax_compute_algo (--fp8-amax-compute-algo): unknown value 'mean' (expected max or most_recent)"}}) {
    std::string base = kTinyF32;
    if (flags.find("--precision") != std::string::npos) base.replace(base.find("--precision fp32"), 16, "");
    const testing::ProgramResult bad = testing::run_program(
        "halfgrad", "train" + base + flags + " --train " + dir / "train.tsv" + " --output-dir " + dir / "bad");
    INFO(bad.output);
    CHECK(bad.exit_code == 1);
    CHECK_THAT(bad.output, Catch::Contains(message));
  }
}

TEST_CASE(
    "halfgrad predict --logits prints the library's f32 logits as JSON lines and eval and predict note truncation",
    "[demo][cli]") {
  const TempDir dir("predict_logits");
  data::write_tsv(data::synthetic_dataset(48, 3, 3), dir / "train.tsv");
  halfgrad("train" + kTinyF32 + " --max-steps 3 --save-steps 3 --train " + dir / "train.tsv" + " --output-dir " +
           dir / "out");
  const fs::path checkpoint = dir.path / "out/checkpoint-3";
  const std::vector<std::string> texts = {"abab", "cdcdcd", "a \"quoted\" text much longer than eight bytes"};
  const testing::ProgramResult r = halfgrad("predict --logits --checkpoint " + checkpoint.string() +
                                            " abab cdcdcd 'a \"quoted\" text much longer than eight bytes'");
  CHECK_THAT(r.output, Catch::Contains("note: 1 input text is longer than max_len 8 tokens and was truncated"));

  // The same checkpoint through the library.
  const io::Checkpoint c = io::load_checkpoint(checkpoint);
  const io::ModelConfig config = io::model_config_from_json(c.config, "config.json");
  nn::TextClassifier model(config.classifier, 0);
  model.load_state_dict(c.model);
  data::Dataset d;
  d.label_names = config.labels;
  for (const std::string& t : texts) d.examples.push_back({t, 0});
  const optim::MixedPrecision f32(model, {});  // the run's --precision fp32
  const train::EvalPrediction expected = train::run_evaluation(model, d, 256, f32);
  CHECK(expected.truncated == 1);

  std::vector<nlohmann::json> lines;
  std::istringstream output(r.output);
  for (std::string line; std::getline(output, line);) {
    if (!line.empty() && line[0] == '{') lines.push_back(nlohmann::json::parse(line));
  }
  REQUIRE(lines.size() == texts.size());
  for (size_t i = 0; i < texts.size(); ++i) {
    INFO(lines[i].dump());
    CHECK(lines[i].at("text") == texts[i]);
    CHECK(lines[i].at("label") == config.labels[size_t(expected.predictions[i])]);
    const std::vector<double> logits = lines[i].at("logits").get<std::vector<double>>();
    REQUIRE(int64_t(logits.size()) == expected.classes);
    for (int64_t k = 0; k < expected.classes; ++k) {
      CHECK(float(logits[size_t(k)]) == expected.logits[i * size_t(expected.classes) + size_t(k)]);  // bit for bit
    }
  }

  testing::write_bytes(dir.path / "long.tsv",
                       "class0\tlonger than eight\nclass1\tshort\nclass2\talso longer than eight\n");
  const testing::ProgramResult evaluated =
      halfgrad("eval --checkpoint " + checkpoint.string() + " --data " + dir / "long.tsv");
  CHECK_THAT(evaluated.output,
             Catch::Contains("note: 2 evaluation texts are longer than max_len 8 tokens and were truncated"));
}

}  // namespace
}  // namespace hg
