// fp8 training with delayed scaling (halfgrad/autograd/fp8_scaling.h, the fp8 mode of
// halfgrad/optim/mixed_precision.h): the scale update against TE's formula on hand-made amax histories,
// the saturating cast, linear's fp8 GEMMs against a scalar oracle, the recipe's JSON and an old
// checkpoint without it, the Accelerator's "fp8" mode, and a bit-exact resume.
#include <catch2/catch.hpp>
#include <cfloat>
#include <cmath>
#include <limits>
#include <vector>

#include "halfgrad/autograd/autocast.h"
#include "halfgrad/autograd/cast_observer.h"
#include "halfgrad/autograd/fp8_scaling.h"
#include "halfgrad/autograd/all_ops.h"
#include "halfgrad/autograd/tape.h"
#include "halfgrad/data/dataset.h"
#include "halfgrad/io/checkpoint.h"
#include "halfgrad/nn/text_classifier.h"
#include "halfgrad/optim/adam.h"
#include "halfgrad/optim/mixed_precision.h"
#include "halfgrad/optim/param_groups.h"
#include "tests/temp_dir.h"
#include "halfgrad/train/accelerator.h"
#include "halfgrad/train/evaluation.h"
#include "halfgrad/train/trainer.h"
#include "tests/float_specials.h"

namespace hg {
namespace {

constexpr float kE4M3Max = 448;    // S.1111.110 = 1.75 * 2^8
constexpr float kE5M2Max = 57344;  // S.11110.11 = 1.75 * 2^15
using hg::testing::kInf;
using hg::testing::kNaN;

// The rounding of x to `format` as a value: the scalar conversion core (precision/), the oracle.
float rounded(FloatFormat format, double x, RoundingOptions options = {}) {
  return decode(format, encode(format, x, options));
}
float sat(FloatFormat format, double x) { return rounded(format, x, {.saturate = true, .saturate_inf = true}); }

// One tensor's scale state: `scale`, a history of `len` zeros.
Fp8TensorScale fresh(int64_t len) { return {.scale = 1, .amax_history = std::vector<float>(size_t(len), 0.0f)}; }

}  // namespace

TEST_CASE("fp8 scale from an amax: pow2 and exact, margin, and the amaxes that keep the old scale", "[fp8]") {
  const Fp8Recipe pow2, exact{.scale = Fp8Recipe::Scale::kExact};
  // 448 / 3 = 149.3 lies in [2^7, 2^8): the power of two is 2^7.
  CHECK(fp8_scale_from_amax(pow2, 3.0f, 1.0f, kE4M3Max) == 128.0f);
  // 448 / 3.5 = 128 exactly: floor(log2) = 7; one ulp more amax and the ratio is below 2^7.
  CHECK(fp8_scale_from_amax(pow2, 3.5f, 1.0f, kE4M3Max) == 128.0f);
  CHECK(fp8_scale_from_amax(pow2, std::nextafter(3.5f, 4.0f), 1.0f, kE4M3Max) == 64.0f);
  // e5m2: 57344 / 3 = 19114.7 in [2^14, 2^15).
  CHECK(fp8_scale_from_amax(pow2, 3.0f, 1.0f, kE5M2Max) == 16384.0f);
  // Against floor(log2) in double over amaxes spread across f32's range (none lands within
  // 1e-9 of a power-of-two ratio, where the double log2 itself could round across the floor).
  for (double a = 1e-30; a < 1e30; a *= 7.3) {
    const double ratio = kE4M3Max / float(a);
    REQUIRE(std::abs(std::log2(ratio) - std::round(std::log2(ratio))) > 1e-9);
    CHECK(fp8_scale_from_amax(pow2, float(a), 1.0f, kE4M3Max) == std::ldexp(1.0f, int(std::floor(std::log2(ratio)))));
  }
  Fp8Recipe margin2 = pow2;
  margin2.margin = 2;
  CHECK(fp8_scale_from_amax(margin2, 3.0f, 1.0f, kE4M3Max) == 32.0f);  // 2^(7 - 2)
  // exact: one IEEE division, i.e. the real quotient rounded once (448 / 3 in double is within
  // 2^-53 of it, far from a float rounding boundary); with a margin the dividend is halved first.
  CHECK(fp8_scale_from_amax(exact, 3.0f, 1.0f, kE4M3Max) == float(448.0 / 3.0));
  Fp8Recipe exact1 = exact;
  exact1.margin = 1;
  CHECK(fp8_scale_from_amax(exact1, 3.0f, 1.0f, kE4M3Max) == float(224.0 / 3.0));
  for (const Fp8Recipe& r : {pow2, exact}) {
    CHECK(fp8_scale_from_amax(r, 0.0f, 5.0f, kE4M3Max) == 5.0f);  // all zeros: keep
    CHECK(fp8_scale_from_amax(r, kInf, 5.0f, kE4M3Max) == 5.0f);
    CHECK(fp8_scale_from_amax(r, kNaN, 5.0f, kE4M3Max) == 5.0f);
  }
  // A subnormal amax: 448 / 1e-40 = 4.5e42 overflows f32, so exact gives FLT_MAX; pow2 stops at
  // the largest power of two a float holds.
  CHECK(fp8_scale_from_amax(exact, 1e-40f, 1.0f, kE4M3Max) == FLT_MAX);
  CHECK(fp8_scale_from_amax(pow2, 1e-40f, 1.0f, kE4M3Max) == std::ldexp(1.0f, 127));
  CHECK(fp8_scale_from_amax({.scale = Fp8Recipe::Scale::kNone}, 3.0f, 5.0f, kE4M3Max) == 1.0f);
}

TEST_CASE("fp8 amax history: max over the window, most_recent, rotation, and zero, inf and NaN amaxes", "[fp8]") {
  const Fp8Recipe max4{.amax_history_len = 4};  // pow2
  Fp8TensorScale s = fresh(4);
  auto step = [&](Fp8TensorScale& t, const Fp8Recipe& r, float amax) {
    t.amax_history[0] = amax;  // what this step's casts staged
    t.update(r, kE4M3Max);
  };
  step(s, max4, 2.0f);  // 448 / 2 = 224 -> 2^7; [0] moves to the last slot and is cleared
  CHECK(s.scale == 128.0f);
  CHECK(s.amax_history == std::vector<float>{0, 0, 0, 2});
  step(s, max4, 0.5f);  // the window's max is still 2 (most_recent would give 448 / 0.5 -> 2^9)
  CHECK(s.scale == 128.0f);
  CHECK(s.amax_history == std::vector<float>{0, 0, 2, 0.5f});
  step(s, max4, 0.5f);
  step(s, max4, 0.5f);  // the 2 is at [1]: still in the window of 4 (3 past steps and this one)
  CHECK(s.scale == 128.0f);
  CHECK(s.amax_history == std::vector<float>{0, 0.5f, 0.5f, 0.5f});
  step(s, max4, 0.5f);  // the 2 has dropped out
  CHECK(s.scale == 512.0f);

  // A staged amax of 0 (not cast this step, or all zeros): nothing changes, as TE's fused update.
  const Fp8TensorScale before = s;
  step(s, max4, 0.0f);
  CHECK(s == before);

  // inf keeps the scale, and under "max" keeps it while the inf is in the window.
  step(s, max4, kInf);
  CHECK(s.scale == 512.0f);
  for (int i = 0; i < 3; ++i) step(s, max4, 1.0f);
  CHECK(s.scale == 512.0f);
  CHECK(s.amax_history == std::vector<float>{0, 1, 1, 1});
  step(s, max4, 1.0f);  // inf gone: 448 / 1 -> 2^8
  CHECK(s.scale == 256.0f);

  const Fp8Recipe recent{.amax_history_len = 4, .amax_compute_algo = Fp8Recipe::AmaxAlgo::kMostRecent};
  Fp8TensorScale m = fresh(4);
  step(m, recent, 2.0f);
  CHECK(m.scale == 128.0f);
  step(m, recent, 0.5f);
  CHECK(m.scale == 512.0f);
  step(m, recent, kNaN);  // NaN keeps the scale; the history rolls
  CHECK(m.scale == 512.0f);
  CHECK(std::isnan(m.amax_history.back()));
  // Under max a NaN in the window is ignored (fmax), as CUDA's fmaxf ignores NaN elements.
  Fp8TensorScale n = fresh(2);
  step(n, {.amax_history_len = 2}, kNaN);
  step(n, {.amax_history_len = 2}, 3.5f);
  CHECK(n.scale == 128.0f);

  // History length 1: "max" is the most recent amax.
  Fp8TensorScale one = fresh(1);
  step(one, {.amax_history_len = 1}, 2.0f);
  step(one, {.amax_history_len = 1}, 0.5f);
  CHECK(one.scale == 512.0f);
  CHECK(one.amax_history == std::vector<float>{0});

  // No scaling: the scale stays 1, the staged amax is cleared.
  Fp8TensorScale none = fresh(4);
  step(none, {.amax_history_len = 4, .scale = Fp8Recipe::Scale::kNone}, 0.001f);
  CHECK(none == fresh(4));
}

TEST_CASE("fp8 cast: saturating round to nearest even of x * scale, amax of x, what it flushed and saturated",
          "[fp8]") {
  Fp8Scaling fp8({.amax_history_len = 2});
  // e4m3 around the top: the quantum in [256, 448] is 32, so 460 rounds to 448, and 464 (halfway
  // to 480, which would overflow) ties to even 448 (OCP OFP8 rev 1.0, 5.2.1: round to nearest even,
  // then saturate). 1e-4 is below 2^-10, half the smallest subnormal 2^-9: flushed. 0.3 = 1.2 *
  // 2^-2 -> 1.25 * 2^-2 = 0.3125 (3 mantissa bits).
  const std::vector<float> x = {1000, -1000, 1e-4f, 0.3f, kNaN, 460, 464, -kInf, 0};
  Fp8CastObserver observer;
  const Fp8Operand q = fp8.quantize("layer", Fp8Role::kInput, Tensor::from_vector(x, {9}), true);
  const std::vector<float> v = q.values.to_vector();
  CHECK(q.scale_inv == 1.0f);
  CHECK(v[0] == 448.0f);
  CHECK(v[1] == -448.0f);
  CHECK(v[2] == 0.0f);
  CHECK(v[3] == 0.3125f);
  CHECK(std::isnan(v[4]));
  CHECK(v[5] == 448.0f);
  CHECK(v[6] == 448.0f);
  CHECK(v[7] == -448.0f);  // -inf saturates too (OCP's saturating conversion, TE's SATFINITE)
  CHECK(v[8] == 0.0f);
  for (size_t i = 0; i < x.size(); ++i) {
    if (!std::isnan(x[i])) CHECK(v[i] == sat(formats::e4m3, x[i]));
  }
  // amax: the inf (NaN ignored); the cast counts 1e-4 as flushed and +-1000 as saturated (464 and
  // 460 round to 448 without exceeding it; inf inputs are counted apart).
  CHECK(fp8.gemms().at("layer")[size_t(Fp8Role::kInput)].amax_history[0] == kInf);
  const std::vector<Fp8Cast> casts = observer.take();
  REQUIRE(casts.size() == 1);
  CHECK(casts[0].key == "layer");
  CHECK(casts[0].format == formats::e4m3);
  CHECK(casts[0].amax == kInf);
  CHECK(casts[0].stats.underflow == 1);
  CHECK(casts[0].stats.overflow == 2);
  // Evaluation's casts (record_amax false) neither stage an amax nor report.
  fp8.quantize("layer", Fp8Role::kWeight, Tensor::from_vector({5}, {1}), false);
  CHECK(fp8.gemms().at("layer")[size_t(Fp8Role::kWeight)].amax_history[0] == 0.0f);
  CHECK(observer.take().empty());
  // A scale of 4 (loaded): 0.3 * 4 = 1.2 -> 1.25, 1000 * 4 saturates; scale_inv 1/4.
  nlohmann::json state = fp8.state_dict();
  state["layer"]["input"]["scale"] = 4.0;
  state["layer"]["input"]["amax_history"] = {0, 0};
  fp8.load_state_dict(state, "test");
  const Fp8Operand q4 = fp8.quantize("layer", Fp8Role::kInput, Tensor::from_vector({0.3f, 1000, kNaN, 2}, {4}), true);
  CHECK(q4.values.to_vector()[0] == 1.25f);
  CHECK(q4.values.to_vector()[1] == 448.0f);
  CHECK(q4.scale_inv == 0.25f);
  CHECK(fp8.gemms().at("layer")[size_t(Fp8Role::kInput)].amax_history[0] == 1000.0f);  // NaN ignored
  // e5m2 saturates at 57344 (an inf input too) in the hybrid format's backward.
  const Fp8Operand g = fp8.quantize("layer", Fp8Role::kGradOutput, Tensor::from_vector({1e6f, -kInf, 3}, {3}), true);
  CHECK(g.values.to_vector() == std::vector<float>{kE5M2Max, -kE5M2Max, 3});
}

TEST_CASE("linear under fp8 equals a scalar oracle: fp8 operands, exact products, scale_inv, bf16 output", "[fp8]") {
  // Operands whose fp8 values lie in [0.375, 7.5]: products are multiples of 2^-10 below 64 and
  // sums of 4 below 256, so the f32 GEMM is exact in any order and the oracle may sum in double.
  Generator gen(7);
  const int64_t rows = 2, in = 4, out = 3;
  auto signed_uniform = [&](int64_t n, float lo, float hi) {
    std::vector<float> v = Tensor::uniform({n}, gen, lo, hi).to_vector();
    for (size_t i = 0; i < v.size(); i += 2) v[i] = -v[i];
    return v;
  };
  const std::vector<float> xv = signed_uniform(rows * in, 0.2f, 3.0f), wv = signed_uniform(out * in, 0.05f, 0.9f);
  Tensor x = Tensor::from_vector(xv, {rows, in}).set_requires_grad();
  Tensor w = Tensor::from_vector(wv, {out, in}).set_requires_grad().set_name("proj.weight");
  Tensor b = Tensor::from_vector({0.5f, -0.25f, 0.125f}, {out}).set_requires_grad().set_name("proj.bias");
  // dY in bf16, in [0.2, 0.45]: times 1024 in e5m2's [128, 512) binades.
  const std::vector<float> dyv = {0.3f, -0.21f, 0.44f, 0.25f, 0.37f, -0.33f};
  const Tensor dy = Tensor::from_vector(dyv, {rows, out}, DType::bf16);

  auto fp8 = std::make_shared<Fp8Scaling>(Fp8Recipe{.amax_history_len = 2});
  nlohmann::json state = nlohmann::json::object();
  for (const auto& [role, scale] : {std::pair{"input", 2.0}, {"weight", 8.0}, {"grad_output", 1024.0}}) {
    state["proj"][role] = {{"scale", scale}, {"amax_history", {0, 0}}};
  }
  fp8->load_state_dict(state, "test");
  Tensor y;
  {
    Autocast guard({.dtype = DType::bf16, .fp8 = fp8});
    y = linear(x, w, b);
  }
  REQUIRE(y.dtype() == DType::bf16);
  backward(y, dy);

  std::vector<double> qx(xv.size()), qw(wv.size()), g(dyv.size());
  for (size_t i = 0; i < xv.size(); ++i) qx[i] = sat(formats::e4m3, xv[i] * 2.0);
  for (size_t i = 0; i < wv.size(); ++i) qw[i] = sat(formats::e4m3, wv[i] * 8.0);
  const std::vector<float> dy_bf16 = dy.to_vector();
  for (size_t i = 0; i < g.size(); ++i) g[i] = sat(formats::e5m2, dy_bf16[i] * 1024.0);
  const std::vector<float> yv = y.to_vector(), dx = x.grad().to_vector(), dw = w.grad().to_vector(),
                           db = b.grad().to_vector();
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < out; ++c) {
      double acc = 0;
      for (int64_t k = 0; k < in; ++k) acc += qx[r * in + k] * qw[c * in + k];
      // The bias (exact in bf16) adds exactly; the one rounding is into bf16.
      CHECK(yv[r * out + c] == rounded(formats::bf16, acc / 16.0 + b.to_vector()[c]));
    }
  }
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t k = 0; k < in; ++k) {
      double acc = 0;
      for (int64_t c = 0; c < out; ++c) acc += g[r * out + c] * qw[c * in + k];
      CHECK(dx[r * in + k] == float(acc / (1024.0 * 8.0)));  // exact: multiples of 2^-5 below 2^13
    }
  }
  for (int64_t c = 0; c < out; ++c) {
    for (int64_t k = 0; k < in; ++k) {
      double acc = 0;
      for (int64_t r = 0; r < rows; ++r) acc += g[r * out + c] * qx[r * in + k];
      CHECK(dw[c * in + k] == float(acc / (1024.0 * 2.0)));
    }
    // The bias gradient sums the unquantized bf16 dY.
    CHECK(db[c] == float(double(dy_bf16[c]) + double(dy_bf16[out + c])));
  }
  // Each cast staged max |unscaled input|.
  const Fp8Scaling::Gemm& proj = fp8->gemms().at("proj");
  auto absmax = [](const std::vector<float>& v) {
    float m = 0;
    for (float e : v) m = std::max(m, std::abs(e));
    return m;
  };
  CHECK(proj[size_t(Fp8Role::kInput)].amax_history[0] == absmax(xv));
  CHECK(proj[size_t(Fp8Role::kWeight)].amax_history[0] == absmax(wv));
  CHECK(proj[size_t(Fp8Role::kGradOutput)].amax_history[0] == absmax(dy_bf16));
  // An unnamed weight has no key: refused, naming the remedy.
  Autocast guard({.dtype = DType::bf16, .fp8 = fp8});
  REQUIRE_THROWS_WITH(linear(x, Tensor::ones({out, in}), b), Catch::Contains("has no name"));
}

TEST_CASE("fp8 options: parse, JSON round trip, an old checkpoint without the keys, bad values name the key", "[fp8]") {
  using optim::MixedPrecisionOptions;
  using optim::Precision;
  const MixedPrecisionOptions fp8 = optim::parse_mixed_precision("fp8");
  CHECK(fp8.precision == Precision::kFp8);
  CHECK(fp8.fp8 == Fp8Recipe{});  // TE's defaults: hybrid, 1024, max, margin 0 (pow2: halfgrad's)
  CHECK(fp8.resolved().loss_scaling.kind == optim::LossScaling::Kind::kNone);
  CHECK(fp8.resolved().normalization_outputs == NormalizationOutputs::kFloat32);
  const MixedPrecisionOptions custom{.precision = Precision::kFp8,
                                     .fp8 = {.format = Fp8Recipe::Format::kE4M3,
                                             .amax_history_len = 16,
                                             .amax_compute_algo = Fp8Recipe::AmaxAlgo::kMostRecent,
                                             .margin = 3,
                                             .scale = Fp8Recipe::Scale::kExact}};
  for (const MixedPrecisionOptions& o :
       {fp8, custom, {.precision = Precision::kFp8, .fp8 = {.scale = Fp8Recipe::Scale::kNone}}}) {
    const nlohmann::json j = optim::mixed_precision_to_json(o);
    INFO(j.dump());
    CHECK(j.at("fp8") == true);
    CHECK(optim::mixed_precision_from_json(j, "test") == o.resolved());
  }
  CHECK(optim::mixed_precision_to_json(custom).at("fp8_scale") == "exact");
  // Other modes write no fp8 key, and a checkpoint from before fp8 (no keys) reads as before.
  CHECK_FALSE(optim::mixed_precision_to_json({.precision = Precision::kBf16}).contains("fp8"));
  CHECK(optim::mixed_precision_from_json({{"bf16", true}}, "old") ==
        MixedPrecisionOptions{.precision = Precision::kBf16});
  // {"fp8": true} alone: the default recipe.
  CHECK(optim::mixed_precision_from_json({{"fp8", true}}, "f") == fp8);
  REQUIRE_THROWS_WITH(optim::mixed_precision_from_json({{"fp8", true}, {"fp8_scale", "half"}}, "f.json"),
                      "f.json: key 'fp8_scale': unknown value 'half' (expected pow2, exact or none)");
  REQUIRE_THROWS_WITH(optim::mixed_precision_from_json({{"fp8", true}, {"fp8_amax_history_len", 0}}, "f.json"),
                      Catch::Contains("fp8_amax_history_len (--fp8-amax-history-len) must be in [1, 65536], got 0"));
  REQUIRE_THROWS_WITH(optim::mixed_precision_from_json({{"fp8", true}, {"fp8_margin", "2"}}, "f.json"),
                      Catch::Contains("f.json: key 'fp8_margin' has the wrong type"));
  REQUIRE_THROWS_WITH(optim::mixed_precision_from_json({{"fp8", true}, {"bf16", true}}, "f.json"),
                      Catch::Contains("key 'fp8' is true with 'fp16' or 'bf16'"));
  REQUIRE_THROWS_WITH(optim::mixed_precision_from_json({{"bf16", true}, {"fp8_margin", 2}}, "f.json"),
                      Catch::Contains("applies to precision fp8 only"));
}

TEST_CASE("fp8 through the Accelerator: bf16 elsewhere, no loss scaler, scales from the previous step's amaxes",
          "[fp8]") {
  const nn::ClassifierConfig config{
      .vocab = 256, .max_len = 8, .d_model = 16, .heads = 2, .d_ff = 32, .layers = 1, .classes = 3};
  nn::TextClassifier model(config, 1);
  optim::AdamW optimizer(optim::decay_groups(model.named_parameters(), 1e-3f, 0.01f));
  optim::MixedPrecisionOptions options = optim::parse_mixed_precision("fp8");
  options.fp8.amax_history_len = 4;
  train::Accelerator accelerator({.mixed_precision = options});
  auto prepared = accelerator.prepare(model, optimizer);
  CHECK(accelerator.mixed_precision().autocast_dtype() == DType::bf16);
  CHECK_FALSE(accelerator.mixed_precision().scaler().is_enabled());
  const Fp8Scaling& fp8 = *accelerator.mixed_precision().fp8();
  const Indices ids({1, 5, 9, 0, 7, 7, 2, 0}, {2, 4}), mask({1, 1, 1, 0, 1, 1, 1, 0}, {2, 4}), labels({0, 2}, {2});
  for (int step = 0; step < 2; ++step) {
    accelerator.backward(cross_entropy(prepared.forward(ids, mask), labels));
    // Before the update every GEMM tensor has this step's amax staged; the first step casts
    // with scale 1 (no amax seen yet).
    for (const auto& [key, gemm] : fp8.gemms()) {
      for (Fp8Role role : kFp8Roles) {
        INFO(key << " " << fp8_role_name(role) << " step " << step);
        CHECK(gemm[size_t(role)].amax_history[0] > 0);
        if (step == 0) CHECK(gemm[size_t(role)].scale == 1.0f);
      }
    }
    const std::map<std::string, Fp8Scaling::Gemm> staged = fp8.gemms();
    REQUIRE(accelerator.step());
    // After it: each tensor updated once, as on its own (the scale applies from the next step).
    for (const auto& [key, gemm] : fp8.gemms()) {
      for (Fp8Role role : kFp8Roles) {
        Fp8TensorScale expected = staged.at(key)[size_t(role)];
        expected.update(options.fp8, role == Fp8Role::kGradOutput ? kE5M2Max : kE4M3Max);
        CHECK(gemm[size_t(role)] == expected);
      }
    }
  }
  // The classifier's linear layers, each keyed by its module path.
  CHECK(fp8.gemms().count("head") == 1);
  CHECK(fp8.gemms().count("encoder.layers.0.ff.fc1") == 1);
}

TEST_CASE("an fp8 run resumed from a checkpoint continues bit for bit, scales and histories included", "[fp8][train]") {
  const data::Dataset train_set = data::synthetic_dataset(200, 4, 1);
  const nn::ClassifierConfig config{
      .vocab = 256, .max_len = 16, .d_model = 16, .heads = 2, .d_ff = 32, .layers = 1, .classes = 4, .dropout = 0.1f};
  const testing::TempDir full_dir("fp8_resume_full"), part_dir("fp8_resume_part");
  train::TrainingArguments args;
  args.output_dir = full_dir.path.string();
  args.max_steps = 12;
  args.per_device_train_batch_size = 16;
  args.learning_rate = 3e-3f;
  args.warmup_steps = 2;
  args.save_strategy = train::IntervalStrategy::kSteps;
  args.save_steps = 6;
  args.seed = 3;
  // A history of 4 rolls over within the 6 steps, so the saved window is a full one.
  args.mixed_precision = {.precision = optim::Precision::kFp8, .fp8 = {.amax_history_len = 4}};
  nn::TextClassifier uninterrupted(config, 5);
  train::Trainer full(uninterrupted, args, train_set);
  full.train();

  train::TrainingArguments part_args = args;
  part_args.output_dir = part_dir.path.string();
  {
    nn::TextClassifier first(config, 5);
    struct StopAt6 : train::TrainerCallback {
      void on_step_end(const train::TrainerState& s, const nlohmann::json&) override {
        should_stop = s.global_step >= 6;
      }
    };
    train::Trainer(first, part_args, train_set, nullptr, {}, {std::make_shared<StopAt6>()}).train();
  }
  const std::filesystem::path checkpoint = part_dir.path / "checkpoint-6";
  REQUIRE(std::filesystem::exists(checkpoint / io::kFp8File));
  nn::TextClassifier resumed(config, 99);  // other weights: everything must come from the checkpoint
  train::Trainer second(resumed, part_args, train_set);
  second.train(checkpoint.string());
  CHECK(second.state().global_step == 12);
  CHECK(resumed.fingerprint() == uninterrupted.fingerprint());
  CHECK(second.accelerator().mixed_precision().fp8()->state_dict() ==
        full.accelerator().mixed_precision().fp8()->state_dict());
  // A model loaded for inference casts with the saved scales: its logits are the trainer's.
  const train::InferenceModel loaded = train::load_for_inference((full_dir.path / "checkpoint-12").string());
  const train::EvalPrediction reloaded = train::run_evaluation(*loaded.model, train_set, 32, *loaded.mixed_precision);
  CHECK(reloaded.logits == full.predict(train_set).prediction.logits);
  // Without its scale state an fp8 checkpoint is refused, naming the file.
  std::filesystem::remove(checkpoint / io::kFp8File);
  nlohmann::json manifest = nlohmann::json::parse(testing::read_bytes(checkpoint / io::kManifestFile));
  manifest["files"].erase(io::kFp8File);
  testing::write_bytes(checkpoint / io::kManifestFile, manifest.dump());
  nn::TextClassifier third_model(config, 5);
  train::Trainer third(third_model, part_args, train_set);
  REQUIRE_THROWS_WITH(third.train(checkpoint.string()), Catch::Contains("without fp8_scaling.json"));
}

}  // namespace hg
