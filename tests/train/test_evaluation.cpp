// Evaluation runs the numerics training ran: under fp16 O2 the Trainer's predict() (and so
// run_evaluation), and a checkpoint loaded as the `halfgrad` command loads it
// (load_for_inference), give the logits of the training forward pass in eval mode bit for bit --
// with softmax and layer-norm outputs stored in f16, as training stores them. (Before evaluation
// took the MixedPrecision, it ran O2 with those outputs in f32, and the first test failed.)
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "halfgrad/autograd/all_ops.h"
#include "halfgrad/autograd/autocast.h"
#include "halfgrad/autograd/tape.h"
#include "halfgrad/data/data_loader.h"
#include "halfgrad/data/dataset.h"
#include "halfgrad/nn/text_classifier.h"
#include "tests/demos/run_program.h"
#include "tests/temp_dir.h"
#include "halfgrad/optim/adam.h"
#include "halfgrad/train/accelerator.h"
#include "halfgrad/train/evaluation.h"
#include "halfgrad/train/trainer.h"

namespace hg::train {
namespace {

std::vector<uint32_t> bits_of(const std::vector<float>& values) {
  std::vector<uint32_t> bits(values.size());
  std::memcpy(bits.data(), values.data(), values.size() * sizeof(float));
  return bits;
}

// A 1-layer encoder with mean pooling: the final layer norm's outputs are averaged by the pooling
// (a kPromote/kFloat32 path, not a matrix product that would round them to f16 anyway), so
// storing them in f32 instead of f16 changes the logits.
nn::ClassifierConfig small_config() {
  return {
      .vocab = 256, .max_len = 16, .d_model = 32, .heads = 2, .d_ff = 64, .layers = 1, .classes = 4, .dropout = 0.1f};
}

TrainingArguments o2_args(const testing::TempDir& dir) {
  TrainingArguments a;
  a.output_dir = dir.path.string();
  a.max_steps = 5;
  a.per_device_train_batch_size = 16;
  a.per_device_eval_batch_size = 16;
  a.learning_rate = 3e-3f;
  a.save_strategy = train::IntervalStrategy::kNo;
  a.seed = 3;
  a.mixed_precision = {.precision = optim::Precision::kFp16, .opt_level = optim::OptLevel::kO2};
  return a;
}

// The logits of the model's training forward (under the accelerator's autocast, as Trainer::train
// runs it) in eval mode (dropout off), batch by batch as run_evaluation batches the dataset.
std::vector<float> training_forward_logits(Trainer& trainer, nn::TextClassifier& model, const data::Dataset& dataset,
                                           int64_t batch_size) {
  const data::Tokenizer tokenizer(trainer.args().tokenizer, model.config.pooling == nn::Pooling::kCls);
  data::DataLoader loader(dataset, tokenizer, {batch_size, false, false, 0, model.config.max_len});
  std::vector<float> logits;
  model.eval();
  NoGrad no_grad;
  for (int64_t b = 0; b < loader.num_batches(); ++b) {
    const data::Batch batch = loader.batch(b);
    Autocast guard = trainer.accelerator().autocast();
    const std::vector<float> values = model.forward(batch.ids, batch.attention_mask).to_vector();
    logits.insert(logits.end(), values.begin(), values.end());
  }
  model.train();
  return logits;
}

}  // namespace

TEST_CASE("fp16 O2: evaluation logits equal the training forward's in eval mode bit for bit", "[train][eval]") {
  const testing::TempDir dir("eval_numerics");
  const data::Dataset train_set = data::synthetic_dataset(200, 4, 1), eval_set = data::synthetic_dataset(40, 4, 2);
  nn::TextClassifier model(small_config(), 5);
  Trainer trainer(model, o2_args(dir), train_set, &eval_set);
  trainer.train();
  const std::vector<float> expected = training_forward_logits(trainer, model, eval_set, 16);
  const PredictionOutput out = trainer.predict(eval_set);
  REQUIRE(out.prediction.logits.size() == expected.size());
  CHECK(bits_of(out.prediction.logits) == bits_of(expected));
}

TEST_CASE("fp16 O2: a saved checkpoint, loaded for inference, evaluates to the training forward's logits bit for bit",
          "[train][eval]") {
  const testing::TempDir dir("eval_checkpoint");
  const data::Dataset train_set = data::synthetic_dataset(200, 4, 1), eval_set = data::synthetic_dataset(40, 4, 2);
  nn::TextClassifier model(small_config(), 5);
  Trainer trainer(model, o2_args(dir), train_set, &eval_set);
  trainer.train();
  const std::string checkpoint = trainer.save_checkpoint();
  const std::vector<float> expected = training_forward_logits(trainer, model, eval_set, 16);

  // The checkpoint holds the f32 masters and the mode; loading rounds the masters to the f16 model
  // that training ran (the masters were rounded into it after the last step) and runs its autocast.
  const InferenceModel loaded = load_for_inference(checkpoint);
  CHECK(loaded.mixed_precision->options() == trainer.accelerator().mixed_precision().options());
  CHECK(loaded.model->head->weight.dtype() == DType::f16);
  const EvalPrediction p = run_evaluation(*loaded.model, eval_set, 16, *loaded.mixed_precision, loaded.tokenizer);
  REQUIRE(p.logits.size() == expected.size());
  CHECK(bits_of(p.logits) == bits_of(expected));

  // The command prints the logits of the same function, for texts given on its command line.
  data::Dataset texts;
  texts.label_names = eval_set.label_names;
  std::string arguments = "predict --logits --checkpoint " + checkpoint;
  for (size_t i = 0; i < 3; ++i) {
    texts.examples.push_back({eval_set.examples[i].text, 0});
    arguments += " '" + eval_set.examples[i].text + "'";  // synthetic texts: letters and spaces
  }
  const EvalPrediction library = run_evaluation(*loaded.model, texts, 256, *loaded.mixed_precision, loaded.tokenizer);
  const testing::ProgramResult r = testing::run_program("halfgrad", arguments);
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  std::vector<float> printed;
  std::istringstream lines(r.output);
  for (std::string line; std::getline(lines, line);) {
    if (line.empty() || line[0] != '{') continue;
    const nlohmann::json row = nlohmann::json::parse(line);
    for (const double v : row.at("logits")) printed.push_back(float(v));  // %.9g reads back exactly
  }
  CHECK(bits_of(printed) == bits_of(library.logits));
}

TEST_CASE("load_checked_weights: the one weight check, for an Accelerator-prepared fp16 O2 model too", "[eval]") {
  nn::TextClassifier source(small_config(), 5);
  const nn::StateDict saved = source.state_dict();  // f32, as an O2 checkpoint holds its masters
  nn::TextClassifier model(small_config(), 6);
  optim::AdamW optimizer({{model.parameters(), 1e-3f, 0.0f}});
  Accelerator acc({.mixed_precision = {.precision = optim::Precision::kFp16, .opt_level = optim::OptLevel::kO2}});
  acc.prepare(model, optimizer);
  REQUIRE(model.head->weight.dtype() == DType::f16);

  auto with = [&](const std::string& name, float value) {
    nn::StateDict weights = saved;
    std::vector<float> values = weights.at(name).to_vector();
    values[3] = value;
    weights[name] = Tensor::from_vector(values, weights.at(name).shape());
    return weights;
  };
  using testing::error_of;
  // 65520 is 65504 + half an ulp (ulp 32 in [2^15, 2^16)): the tie rounds to even, 2^16, which
  // overflows; 65519 rounds down to 65504 and loads.
  CHECK(error_of([&] { load_checked_weights(acc.mixed_precision(), model, with("head.weight", 65520.0f), "m"); }) ==
        "m: tensor 'head.weight' element 3 holds 65520, which is inf in f16 (the dtype this model computes in; "
        "largest finite 65504)");
  CHECK(error_of([&] { load_checked_weights(acc.mixed_precision(), model, with("norm.bias", -INFINITY), "m"); }) ==
        "m: tensor 'norm.bias' holds inf or NaN");
  nn::StateDict extra = saved;
  extra["head.scale"] = Tensor::zeros({1});
  CHECK_THAT(error_of([&] { load_checked_weights(acc.mixed_precision(), model, extra, "m"); }),
             Catch::Contains("m: tensor 'head.scale' (shape (1,)) is not a parameter of this model"));
  nn::StateDict missing = saved;
  missing.erase("head.bias");
  CHECK(error_of([&] { load_checked_weights(acc.mixed_precision(), model, missing, "m"); }) ==
        "m: missing tensor 'head.bias'");

  load_checked_weights(acc.mixed_precision(), model, with("head.weight", 65519.0f), "m");
  // The masters hold the saved f32 values exactly, the f16 model their rounding.
  for (const auto& [name, master] : acc.mixed_precision().optimizer_parameters()) {
    INFO(name);
    CHECK(master.dtype() == DType::f32);
    if (name != "head.weight") CHECK(bits_of(master.to_vector()) == bits_of(saved.at(name).to_vector()));
  }
  CHECK(model.head->weight.to_vector()[3] == 65504.0f);
}

}  // namespace hg::train

namespace hg::train {
namespace {

// The loss of `dataset` with the cross entropy computed inside (or outside) the autocast guard.
double guarded_loss(nn::TextClassifier& model, const optim::MixedPrecision& mp, const data::Dataset& dataset,
                    bool inside) {
  const data::Tokenizer tokenizer(data::TokenizerConfig{}, false);
  data::DataLoader loader(dataset, tokenizer, {16, false, false, 0, model.config.max_len});
  NoGrad no_grad;
  model.eval();
  double sum = 0;
  for (int64_t b = 0; b < loader.num_batches(); ++b) {
    const data::Batch batch = loader.batch(b);
    Tensor logits, loss;
    {
      Autocast guard = mp.autocast();
      logits = model.forward(batch.ids, batch.attention_mask);
      if (inside) loss = cross_entropy(logits, batch.labels);
    }
    if (!inside) loss = cross_entropy(logits, batch.labels);
    sum += double(loss.item()) * double(batch.size());
  }
  model.train();
  return sum / double(dataset.size());
}

}  // namespace

TEST_CASE("evaluation computes its loss under the autocast guard: f16 accumulation sums it in f16 as training does",
          "[train][eval]") {
  nn::TextClassifier model(small_config(), 5);
  const optim::MixedPrecision mp(
      model,
      {.precision = optim::Precision::kFp16, .opt_level = optim::OptLevel::kO2, .accumulation = Accumulation::kF16});
  const data::Dataset d = data::synthetic_dataset(48, 4, 7);
  const double inside = guarded_loss(model, mp, d, true), outside = guarded_loss(model, mp, d, false);
  const EvalPrediction p = run_evaluation(model, d, 16, mp, data::TokenizerConfig{});
  CHECK(p.loss == inside);
  CHECK(inside != outside);  // the guard's f16 sums differ from f32 ones on this data: the check above can fail
}

}  // namespace hg::train
