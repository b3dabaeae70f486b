// underflow: what IEEE half precision does to numbers, shown with real values.
//   1. The fp16 format's anatomy and its range, beside bf16 and f32.
//   2. How example values round: exact, rounded, subnormal (precision lost), zero (underflow),
//      inf (overflow).
//   3. A log-normal sample shaped like gradients, cast to fp16 as is and after multiplying by a
//      loss scale: the histogram shows which part of the distribution falls where.
//   4. One real backward pass of the language-id classifier (after --steps of f32 training): the
//      share of its activation and weight gradients fp16 would flush to zero, unscaled and with
//      loss scales 2^8, 2^16, 2^24; the histogram figure (Micikevicius et al. 2018, Figure 3)
//      and the per-layer underflow bars as SVG.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "autograd/generator.h"
#include "autograd/ops.h"
#include "demos/teaching_run.h"
#include "precision/bfloat16.h"
#include "precision/convert.h"
#include "precision/finfo.h"
#include "precision/half.h"
#include "precision/numerics_stats.h"

namespace {

using hg::half;
using namespace hg::precision;

void print_anatomy() {
  std::printf(
      "== The fp16 format (IEEE 754 binary16) ==\n"
      "16 bits: 1 sign | 5 exponent (bias 15) | 10 mantissa.\n"
      "  normal:    (-1)^s * 2^(e-15) * 1.m     for e = 1..30\n"
      "  subnormal: (-1)^s * 2^-14    * 0.m     for e = 0 (gradual underflow, fewer bits)\n"
      "  e = 31:    inf (m = 0) or NaN (m != 0)\n\n");
  const FloatInfo f16 = finfo<half>(), bf16 = finfo<hg::bfloat16>(), f32 = finfo<float>();
  std::printf("%-22s %14s %14s %14s\n", "", "fp16", "bf16", "fp32");
  auto row = [](const char* name, double a, double b, double c) {
    std::printf("%-22s %14.6g %14.6g %14.6g\n", name, a, b, c);
  };
  row("largest finite", f16.max, bf16.max, f32.max);
  row("smallest normal", f16.smallest_normal, bf16.smallest_normal, f32.smallest_normal);
  row("smallest subnormal", f16.smallest_subnormal, bf16.smallest_subnormal, f32.smallest_subnormal);
  row("epsilon (1 to next)", f16.eps, bf16.eps, f32.eps);
  std::printf("%-22s %14d %14d %14d\n\n", "significand bits", f16.mantissa_bits + 1, bf16.mantissa_bits + 1,
              f32.mantissa_bits + 1);
}

std::string fate(double x, half h) {
  const double y = h.to_double();
  if (h.is_inf()) return "overflow -> inf";
  if (y == 0 && x != 0) return "underflow -> 0";
  if (h.is_subnormal()) return y == x ? "subnormal, exact" : "subnormal: precision lost";
  return y == x ? "exact" : "rounded";
}

void print_examples() {
  std::printf("== How values round to fp16 (round to nearest, ties to even) ==\n");
  std::printf("%-14s %-16s %-38s %-11s %s\n", "value", "fp16 value", "bits (sign|exponent|mantissa)", "rel. error",
              "what happened");
  const std::vector<std::pair<const char*, double>> examples = {
      {"1e-8", 1e-8}, {"3e-6", 3e-6},   {"6e-5", 6e-5},   {"1 + 2^-11", 1.0 + std::ldexp(1.0, -11)},
      {"0.1", 0.1},   {"65519", 65519}, {"65520", 65520}, {"1e5", 1e5}};
  for (const auto& [name, x] : examples) {
    const half h(x);
    const double y = h.to_double();
    char error[16];
    if (std::isfinite(y)) {
      std::snprintf(error, sizeof error, "%.2e", std::abs(y - x) / std::abs(x));
    } else {
      std::snprintf(error, sizeof error, "inf");
    }
    std::printf("%-14s %-16.9g 0x%04x = %-27s %-11s %s\n", name, y, unsigned(h.bits()), bit_fields(h).c_str(), error,
                fate(x, h).c_str());
  }
  std::printf(
      "1 + 2^-11 lies exactly halfway between 1 and 1 + 2^-10: the tie goes to the even mantissa, 1.\n"
      "65519 rounds down to 65504, the largest finite value; from 65520 (halfway to the next power) up\n"
      "it becomes inf.\n\n");
}

struct Cast {
  NumericsStats stats;
  std::vector<float> result;
};

Cast cast_to_f16(const std::vector<float>& values) {
  Cast out;
  std::vector<uint16_t> bits(values.size());
  encode(kBinary16, values, bits, {.stats = &out.stats});
  out.result.resize(values.size());
  decode(kBinary16, bits, out.result);
  return out;
}

double percent(uint64_t part, uint64_t whole) { return whole ? 100.0 * double(part) / double(whole) : 0.0; }

void print_sample(int64_t n, double mu, double sigma, double scale, uint64_t seed) {
  std::printf(
      "== A gradient-like sample: |g| = 2^N(%g, %g), %lld values, random signs ==\n"
      "Gradients of real networks are spread over many binary orders of magnitude; fp16 can only hold\n"
      "those between 2^-24 (with reduced precision below 2^-14) and 65504.\n\n",
      mu, sigma, static_cast<long long>(n));
  hg::Generator gen(seed);
  std::vector<float> z(static_cast<size_t>(n)), signs(static_cast<size_t>(n));
  gen.normal(z);
  gen.uniform(signs);
  std::vector<float> sample(z.size()), scaled(z.size());
  for (size_t i = 0; i < z.size(); ++i) {
    sample[i] = float(std::exp2(mu + sigma * double(z[i]))) * (signs[i] < 0.5f ? -1.0f : 1.0f);
    scaled[i] = float(double(sample[i]) * scale);
  }
  const Cast plain = cast_to_f16(sample), with_scale = cast_to_f16(scaled);

  RenderOptions render;
  render.bar_width = 32;
  std::printf("-- Before the cast: where the sample falls in fp16 --\n%s\n",
              render_histogram(plain.stats.input, kBinary16, render).c_str());
  std::printf("-- After casting to fp16 without scaling --\n%s\n",
              render_histogram(log2_histogram(plain.result), kBinary16, render).c_str());
  std::printf("-- Multiplied by the loss scale %g (2^%g) before the cast --\n%s\n", scale, std::log2(scale),
              render_histogram(with_scale.stats.input, kBinary16, render).c_str());

  const uint64_t total = plain.stats.total();
  std::printf("%-26s %12s %12s %12s\n", "cast to fp16", "-> zero", "subnormal", "-> inf");
  std::printf("%-26s %11.2f%% %11.2f%% %11.2f%%\n", "unscaled", percent(plain.stats.underflow, total),
              percent(plain.stats.subnormal, total), percent(plain.stats.overflow, total));
  char label[40];
  std::snprintf(label, sizeof label, "scaled by 2^%g", std::log2(scale));
  std::printf("%-26s %11.2f%% %11.2f%% %11.2f%%\n\n", label, percent(with_scale.stats.underflow, total),
              percent(with_scale.stats.subnormal, total), percent(with_scale.stats.overflow, total));
  std::printf(
      "Without scaling, %.1f%% of these values become exactly zero in fp16: those gradients are lost.\n"
      "Multiplying by %g first moves the distribution up by %g binary orders: %.2f%% underflow, %.2f%%\n"
      "overflow. Loss scaling multiplies the loss (so every gradient) by this factor and divides it out\n"
      "again in f32 before the optimizer step; a dynamic scaler lowers the factor when inf appears.\n",
      percent(plain.stats.underflow, total), scale, std::log2(scale), percent(with_scale.stats.underflow, total),
      percent(with_scale.stats.overflow, total));
}

struct Pass {
  double scale;
  hg::report::StepNumerics numerics;
};

// One forward and backward of `batch` with the loss multiplied by `scale`, the gradients seen
// by an inspector. The model is f32, so each gradient is what an fp16 cast would receive.
Pass inspect_backward(const hg::nn::TextClassifier& model, const hg::data::Batch& batch, double scale) {
  hg::report::NumericsInspector inspector({.activations = false, .name_anomalies = false});
  inspector.begin_step(0);
  const hg::Tensor loss = hg::cross_entropy(model.forward(batch.ids, batch.attention_mask), batch.labels);
  hg::backward(hg::mul_scalar(loss, float(scale)));
  return {scale, *inspector.end_step(false)};
}

void print_real_gradients(const hg::demos::DemoFlags& flags, double figure_scale) {
  using hg::report::TensorKind;
  std::printf(
      "\n== Real gradients: the language-id classifier ==\n"
      "The main job's model, trained %lld steps in f32, then one batch of 64 words through forward and\n"
      "backward in f32 (dropout off). Each gradient is cast to fp16 as an fp16 backward would store it:\n\n",
      static_cast<long long>(flags.steps));
  const hg::data::Split split = hg::demos::language_id_split(flags);
  hg::nn::TextClassifier model(hg::demos::language_id_config(int64_t(split.train.label_names.size()), flags.model), flags.seed);
  const hg::demos::RunResult trained =
      hg::demos::train_language_id(split, {.label = "f32"}, {.steps = flags.steps, .seed = flags.seed, .model = flags.model}, model);
  std::printf("after %lld steps: training loss %.4f, test accuracy %.1f%%\n\n", static_cast<long long>(flags.steps),
              trained.final_loss, 100 * trained.test_accuracy);
  model.eval();
  hg::data::DataLoader loader(split.train, hg::data::Tokenizer(),
                              {.batch_size = 64, .seed = flags.seed, .max_len = model.config.max_len});
  const hg::data::Batch batch = loader.batch(0);
  std::vector<double> scales = {1, 256, 65536, 16777216};
  if (std::find(scales.begin(), scales.end(), figure_scale) == scales.end()) scales.push_back(figure_scale);
  std::vector<Pass> passes;
  for (double s : scales) passes.push_back(inspect_backward(model, batch, s));

  std::printf("%-16s %12s %12s %12s %12s %12s\n", "loss scale", "act.g -> 0", "act.g subn.", "act.g -> inf",
              "weight.g -> 0", "weight.g inf");
  for (const Pass& p : passes) {
    const NumericsStats a = p.numerics.merged(TensorKind::kActivationGrad), w = p.numerics.merged(TensorKind::kParamGrad);
    char label[32];
    std::snprintf(label, sizeof label, "x 2^%g", std::log2(p.scale));
    std::printf("%-16s %11.2f%% %11.2f%% %11.2f%% %11.2f%% %11.2f%%\n", label, percent(a.underflow, a.total()),
                percent(a.subnormal, a.total()), percent(a.overflow, a.total()), percent(w.underflow, w.total()),
                percent(w.overflow, w.total()));
  }
  std::printf(
      "(shares of all gradient elements; act.g: gradients of activations, weight.g: of parameters)\n"
      "Unscaled, the activation gradients that fall below 2^-24 are lost; each factor of 2^8 moves the\n"
      "whole distribution up 8 binary orders, until the largest gradients pass 65504 and become inf:\n"
      "then a dynamic scaler skips the step and halves the scale.\n");

  const Pass& plain = passes[0];
  const Pass& scaled = *std::find_if(passes.begin(), passes.end(), [&](const Pass& p) { return p.scale == figure_scale; });
  const NumericsStats a = plain.numerics.merged(TensorKind::kActivationGrad);
  char scaled_name[48], note[64];
  std::snprintf(scaled_name, sizeof scaled_name, "scaled by 2^%g", std::log2(figure_scale));
  std::snprintf(note, sizeof note, "%.1f%% become zero in fp16", percent(a.underflow, a.total()));
  hg::report::histogram_figure("Activation gradients of the classifier (one batch)", {"unscaled", scaled_name},
                              {a.input, scaled.numerics.merged(TensorKind::kActivationGrad).input}, note)
      .save(flags.path("underflow-histogram.svg"));

  hg::report::SvgPlot bars({.title = "Weight gradients that become zero in fp16, per tensor",
                           .y_label = "share flushed to zero", .height = 640});
  std::vector<std::string> names;
  std::vector<double> unscaled, with_scale;
  for (const hg::report::TensorNumerics& t : plain.numerics.tensors) {
    if (t.kind != TensorKind::kParamGrad) continue;
    names.push_back(t.name);
    unscaled.push_back(t.underflow_share());
    for (const hg::report::TensorNumerics& u : passes[1].numerics.tensors) {
      if (u.kind == t.kind && u.name == t.name) with_scale.push_back(u.underflow_share());
    }
  }
  bars.set_categories(names);
  bars.add_bars("unscaled", unscaled);
  bars.add_bars("scaled by 2^8", with_scale);
  bars.save(flags.path("underflow-layers.svg"));
  std::printf("\nwrote %s, %s\n", flags.path("underflow-histogram.svg").c_str(), flags.path("underflow-layers.svg").c_str());
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"underflow: how IEEE half precision rounds, underflows and overflows, and what loss scaling does"};
  double scale = 65536.0, mu = -20.0, sigma = 4.0;
  int64_t samples = 100000;
  app.add_option("--scale", scale, "loss scale applied to the sample before the cast")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--samples", samples, "size of the log-normal sample")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 26));
  app.add_option("--mu", mu, "mean of log2|g|")->capture_default_str()->check(CLI::Range(-140.0, 120.0));
  app.add_option("--sigma", sigma, "standard deviation of log2|g|")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 30.0));
  hg::demos::DemoFlags flags{.steps = 200};
  hg::demos::add_demo_flags(app, flags);
  CLI11_PARSE(app, argc, argv);
  flags.apply();

  print_anatomy();
  print_examples();
  print_sample(samples, mu, sigma, scale, flags.seed);
  print_real_gradients(flags, scale);
  return 0;
}
