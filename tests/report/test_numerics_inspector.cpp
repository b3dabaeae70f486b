// NumericsInspector on graphs whose numbers are known by hand: which tensors it sees (parameter
// gradients by name, activations as "<op>#k", their gradients under the same name), the shares
// it reports against values chosen on either side of fp16's limits, what the casts of an fp16 O2
// step flushed, the every-N schedule, the op it names when a step overflows, and the train::Trainer
// callback's files.
#include <catch2/catch.hpp>

#include <cmath>
#include <filesystem>
#include <sstream>

#include "halfgrad/autograd/autocast.h"
#include "halfgrad/autograd/all_ops.h"
#include "halfgrad/data/dataset.h"
#include "halfgrad/optim/mixed_precision.h"
#include "halfgrad/precision/convert.h"
#include "tests/temp_dir.h"
#include "halfgrad/report/numerics_inspector.h"

namespace hg::report {
namespace {

const TensorNumerics& find(const StepNumerics& step, const std::string& name, TensorKind kind) {
  const TensorNumerics* t = step.find(kind, name);
  if (t == nullptr) FAIL("no tensor " << name << " of kind " << kind_name(kind));
  return *t;
}

// One inspected step of L = sum(w * 1e-8), w = {1e-9, 1, 0, 3e-6} named "w": the graph whose
// numbers the tests below derive by hand.
StepNumerics inspect_scaled_sum(InspectorOptions options) {
  NumericsInspector inspector(options);
  Tensor w = Tensor::from_vector({1e-9f, 1.0f, 0.0f, 3e-6f}, {4}).set_requires_grad();
  w.set_name("w");
  inspector.begin_step(0);
  backward(sum(mul_scalar(w, 1e-8f)));
  const StepNumerics* step = inspector.end_step(false);
  REQUIRE(step != nullptr);
  return *step;
}

}  // namespace

TEST_CASE("NumericsInspector reports parameter gradients, activations and activation gradients", "[inspector]") {
  // y = w * 1e-8: {1e-17, 1e-8, 0, 3e-14}; dL/dy = 1; dL/dw = 1e-8 everywhere.
  const StepNumerics inspected = inspect_scaled_sum({.every = 1, .name_anomalies = false});
  const StepNumerics* step = &inspected;

  // 1e-8 < 2^-25 (half the smallest fp16 subnormal): every gradient element underflows.
  const TensorNumerics& grad = find(*step, "w", TensorKind::kParamGrad);
  CHECK(grad.count() == 4);
  CHECK(grad.underflow_share() == 1.0);
  CHECK(grad.zero_share() == 0.0);
  CHECK(grad.abs_max == Approx(1e-8).epsilon(1e-6));
  CHECK(grad.stats.input.count(-27) == 4);  // 2^-27 <= 1e-8 < 2^-26
  CHECK(grad.headroom_log2() == Approx(std::log2(65504 / 1e-8)).epsilon(1e-6));

  // The activation: one exact zero, three nonzero values all below 2^-25.
  const TensorNumerics& act = find(*step, "mul_scalar#0", TensorKind::kActivation);
  CHECK(act.zero_share() == 0.25);
  CHECK(act.underflow_share() == 0.75);
  CHECK(act.abs_min_nonzero == Approx(1e-17).epsilon(1e-6));

  // Its gradient (ones, from sum's backward) keeps the activation's name; 1 is far from the limits.
  const TensorNumerics& act_grad = find(*step, "mul_scalar#0", TensorKind::kActivationGrad);
  CHECK(act_grad.op == "sum");
  CHECK(act_grad.abs_max == 1.0);
  CHECK(act_grad.underflow_share() == 0.0);
  CHECK(act_grad.headroom_log2() == Approx(std::log2(65504.0)));

  const precision::NumericsStats merged = step->merged(TensorKind::kParamGrad);
  CHECK(merged.underflow == 4);
  const std::string table = numerics_table(*step);
  CHECK_THAT(table, Catch::Contains("numerics at step 0, gradients scaled by the loss scale 1\n"));
  CHECK_THAT(table, Catch::Contains("->0%: nonzero values its cast") && Catch::Contains("headroom: doublings"));
  CHECK_THAT(table, Catch::Contains("mul_scalar#0"));
  CHECK_THAT(table, !Catch::Contains("mx8"));  // MX figures are opt-in
  CHECK_FALSE(grad.mxfp8.has_value());
  const nlohmann::json j = numerics_json(*step);
  CHECK(j.at("tensors").size() == step->tensors.size());
  CHECK(j.at("tensors").at(0).contains("histogram"));
  CHECK(j.at("loss_scale") == 1.0);
  StepNumerics scaled = *step;  // as the Trainer's callback notes it from the step's info
  scaled.loss_scale = 1024;
  CHECK_THAT(numerics_table(scaled), Catch::Contains("gradients scaled by the loss scale 1024\n"));
  CHECK(numerics_json(scaled).at("loss_scale") == 1024.0);
}

TEST_CASE("NumericsInspector with mx reports what MXFP8 and MXFP4 blocks would keep", "[inspector][mx]") {
  const StepNumerics inspected = inspect_scaled_sum({.every = 1, .name_anomalies = false, .mx = true});
  const StepNumerics* step = &inspected;

  // dL/dw = 1e-8 (as f32: g = 9.99999994e-9) four times, one block: fp16 flushes all of it, but
  // MXFP8 e4m3 takes X = floor(log2 g) - 8 = -27 - 8 = -35, g / 2^-35 = 343.6 rounds to 352
  // (quantum 32 in [256, 512)); MXFP4 takes X = -27 - 2 = -29, g / 2^-29 = 5.37 rounds to 6.
  const TensorNumerics& grad = find(*step, "w", TensorKind::kParamGrad);
  CHECK(grad.underflow_share() == 1.0);
  REQUIRE(grad.mxfp8.has_value());
  REQUIRE(grad.mxfp4.has_value());
  const double g = double(1e-8f);
  CHECK(grad.mxfp8->count == 4);
  CHECK(grad.mxfp8->flushed_fraction == 0.0);
  CHECK(grad.mxfp8->rms_relative_error == Approx(std::ldexp(352.0, -35) / g - 1).epsilon(1e-9));
  CHECK(grad.mxfp4->rms_relative_error == Approx(std::ldexp(6.0, -29) / g - 1).epsilon(1e-9));
  // The activation {1e-17, 1e-8, 0, 3e-14}, one block with amax 1e-8: in MXFP8, 1e-17 / 2^-35 is far
  // below e4m3's smallest subnormal 2^-9 (flushed) while 3e-14 / 2^-35 = 1.03e-3 is above half of it
  // (kept); in MXFP4, 3e-14 / 2^-29 = 1.6e-5 is flushed too.
  const TensorNumerics& act = find(*step, "mul_scalar#0", TensorKind::kActivation);
  CHECK(act.mxfp8->count == 3);
  CHECK(act.mxfp8->flushed_fraction == Approx(1.0 / 3));
  CHECK(act.mxfp4->flushed_fraction == Approx(2.0 / 3));

  CHECK_THAT(numerics_table(*step), Catch::Contains("mx8 err"));
  const nlohmann::json j = numerics_json(*step);
  CHECK(j.at("tensors").at(0).at("mxfp8").contains("rms_relative_error"));
  CHECK(j.at("tensors").at(0).at("mxfp4").contains("flushed"));
}

TEST_CASE("NumericsInspector reports what the casts of an fp16 O2 step flushed", "[inspector]") {
  // A loss multiplied by 2^-20 without loss scaling: many f16 gradients fall below 2^-25 and the
  // ops that round them to f16 flush them. Stored, they are plain zeros: a cast of the stored f16
  // values (what a tape observer alone can do) is exact and flushes nothing. The inspector counts
  // the rounding itself, so stored zeros = zeros before the cast + flushed by it, per tensor.
  nn::ClassifierConfig config{
      .vocab = 32, .max_len = 8, .d_model = 16, .heads = 2, .d_ff = 32, .layers = 1, .classes = 2, .dropout = 0.0f};
  nn::TextClassifier model(config, 5);
  optim::MixedPrecision mp(model, {.precision = optim::Precision::kFp16,
                                   .opt_level = optim::OptLevel::kO2,
                                   .loss_scaling = {optim::LossScaling::Kind::kNone}});
  const Indices x({1, 5, 9, 2, 7, 3, 30, 4, 11, 6, 8, 12, 13, 14, 15, 16}, {2, 8}),
      m(std::vector<int32_t>(16, 1), {2, 8});
  NumericsInspector inspector({.name_anomalies = false});
  uint64_t stored_zeros = 0;  // in the f16 activation gradients, as stored
  precision::NumericsStats recast;
  const int id = add_grad_observer([&](std::string_view, const Tensor& tensor, const Tensor& grad) {
    if (tensor.is_leaf() || grad.dtype() != DType::f16) return;
    const std::vector<float> v = grad.to_vector();
    for (float g : v) stored_zeros += g == 0.0f;
    std::vector<uint16_t> bits(v.size());
    precision::encode(precision::kBinary16, v, bits, {.stats = &recast});
  });
  inspector.begin_step(0);
  {
    Autocast ac = mp.autocast();
    backward(mp.scale(mul_scalar(cross_entropy(model.forward(x, m), Indices({0, 1}, {2})), 0x1.0p-20f)));
  }
  const StepNumerics* step = inspector.end_step(false);
  remove_grad_observer(id);
  REQUIRE(step != nullptr);

  precision::NumericsStats act_grads;
  for (const TensorNumerics& t : step->tensors) {
    if (t.kind == TensorKind::kActivationGrad && t.dtype == DType::f16) act_grads.merge(t.stats);
  }
  INFO(numerics_table(*step));
  CHECK(recast.underflow == 0);
  CHECK(act_grads.underflow > 0);
  CHECK(act_grads.total() == recast.total());
  CHECK(act_grads.input.zero + act_grads.underflow == stored_zeros);
  const TensorNumerics* flushed = nullptr;
  for (const TensorNumerics& t : step->tensors) {
    if (t.kind == TensorKind::kActivationGrad && t.underflow_share() > 0) flushed = &t;
  }
  REQUIRE(flushed != nullptr);
  CHECK(flushed->dtype == DType::f16);
  CHECK_THAT(numerics_table(*step), Catch::Contains(flushed->name));
  CHECK(cast_observer() == nullptr);  // the inspector holds it only while inspecting a step
}

TEST_CASE("NumericsInspector inspects every N-th step and keeps a subnormal share", "[inspector]") {
  NumericsInspector inspector({.every = 2, .activations = false, .name_anomalies = false});
  Tensor w = Tensor::from_vector({1.0f, 1.0f}, {2}).set_requires_grad();
  w.set_name("w");
  inspector.begin_step(1);
  CHECK_FALSE(inspector.inspecting());
  backward(sum(mul_scalar(w, 1e-6f)));
  CHECK(inspector.end_step(false) == nullptr);
  inspector.begin_step(2);
  backward(sum(mul_scalar(w, 1e-6f)));  // 1e-6 is an fp16 subnormal (below 2^-14)
  const StepNumerics* step = inspector.end_step(false);
  REQUIRE(step != nullptr);
  CHECK(inspector.steps().size() == 1);
  const TensorNumerics& grad = find(*step, "w", TensorKind::kParamGrad);
  CHECK(grad.subnormal_share() == 1.0);
  CHECK(grad.underflow_share() == 0.0);
  for (const TensorNumerics& t : step->tensors) CHECK(t.kind != TensorKind::kActivation);
}

TEST_CASE("NumericsInspector names the op that first produced inf when a step is skipped", "[inspector]") {
  NumericsInspector inspector;
  Tensor w = Tensor::from_vector({1e30f, 1.0f}, {2}).set_requires_grad();
  inspector.begin_step(0);
  const Tensor big = mul_scalar(w, 1e9f);  // 1e39 > f32 max: inf, the first anomaly
  backward(sum(exp(big)));
  const StepNumerics* step = inspector.end_step(true);
  REQUIRE(step != nullptr);
  CHECK(step->skipped);
  CHECK_THAT(step->anomaly, Catch::Contains("forward of op 'mul_scalar'"));
  CHECK(find(*step, "mul_scalar#0", TensorKind::kActivation).nonfinite_share() == 0.5);
  CHECK_THAT(numerics_table(*step), Catch::Contains("first inf/NaN: anomaly: forward of op 'mul_scalar'"));
  CHECK(inspector.anomaly() == step->anomaly);

  // A step that is not inspected still names its overflow; a clean one names nothing.
  NumericsInspector every_other({.every = 2});
  every_other.begin_step(1);
  backward(sum(exp(mul_scalar(w, 1e9f))));
  CHECK(every_other.end_step(true) == nullptr);
  CHECK_THAT(every_other.anomaly(), Catch::Contains("forward of op 'mul_scalar'"));
  every_other.begin_step(3);
  backward(sum(mul_scalar(w, 1.0f)));
  every_other.end_step(false);
  CHECK(every_other.anomaly().empty());
}

TEST_CASE("InspectorCallback writes a JSONL line per inspected step and the histogram figure", "[inspector]") {
  testing::TempDir dir("inspector_callback");
  const data::Dataset train_set = data::synthetic_dataset(256, 2, 0);
  nn::ClassifierConfig config{
      .vocab = 256, .max_len = 16, .d_model = 16, .heads = 2, .d_ff = 32, .layers = 1, .classes = 2, .dropout = 0.0f};
  nn::TextClassifier model(config, 0);
  train::TrainingArguments args;
  args.output_dir = dir.path.string();
  args.max_steps = 3;  // steps 1-3; step 2 is inspected, and step 4 is opened but never runs
  args.per_device_train_batch_size = 16;
  args.save_strategy = train::IntervalStrategy::kNo;
  args.mixed_precision = {.precision = optim::Precision::kFp16, .opt_level = optim::OptLevel::kO1};
  train::Trainer trainer(model, args, train_set, nullptr, {},
                         {std::make_shared<InspectorCallback>(InspectorOptions{.every = 2}, args.output_dir)});
  trainer.train();
  std::istringstream lines(testing::read_bytes(dir.path / "numerics.jsonl"));
  std::vector<int64_t> steps;
  for (std::string line; std::getline(lines, line);) {
    const nlohmann::json j = nlohmann::json::parse(line);
    steps.push_back(j.at("step"));
    bool has_head_grad = false;
    for (const auto& t : j.at("tensors")) has_head_grad = has_head_grad || t.at("name") == "head.weight";
    CHECK(has_head_grad);
  }
  CHECK(steps == std::vector<int64_t>{2});
  const std::string svg = testing::read_bytes(dir.path / "numerics-grad-histogram.svg");
  CHECK_THAT(svg, Catch::Contains("Activation gradients at step 2, scaled by S = "));
  CHECK_THAT(svg, Catch::Contains("</svg>"));
  CHECK_THAT(svg, Catch::Contains("exactly zero"));
}

}  // namespace hg::report

namespace hg::report {

TEST_CASE("NumericsInspector sees a sparse embedding's gradient as its stored rows", "[inspector][sparse]") {
  // Ids {2, 2, 5}: rows 2 and 5 hold 2e-8 and 1e-8 in each of 3 columns; the other 7 rows are not
  // stored, so the inspector counts 6 elements, all of which fp16 would flush to zero.
  NumericsInspector inspector({.every = 1, .name_anomalies = false});
  Tensor table = Tensor::zeros({9, 3}).set_requires_grad();
  table.set_name("tok.weight");
  inspector.begin_step(0);
  backward(sum(mul_scalar(embedding(Indices({2, 2, 5}, {3}), table, -1, /*sparse=*/true), 1e-8f)));
  const StepNumerics* step = inspector.end_step(false);
  REQUIRE(step != nullptr);
  REQUIRE(table.sparse_grad() != nullptr);
  const TensorNumerics* grad = step->find(TensorKind::kParamGrad, "tok.weight");
  REQUIRE(grad != nullptr);
  CHECK(grad->op == "embedding");
  CHECK(grad->shape == Shape({2, 3}));
  CHECK(grad->count() == 6);
  CHECK(grad->underflow_share() == 1.0);
  CHECK(grad->abs_max == Approx(2e-8).epsilon(1e-6));
}

}  // namespace hg::report
