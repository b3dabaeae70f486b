// fp8: the language-id classifier, from one seed, trained with every linear layer's GEMMs on fp8
// operands (e4m3 forward, e5m2 gradients) -- once with every scale 1 and once with Transformer
// Engine's delayed per-tensor scaling -- against bf16 (the same run without fp8 GEMMs) and f32.
// Prints the loss and accuracy of each and, per scaled tensor, the share of values its fp8 cast
// flushed to zero or saturated; writes the loss curves and the per-tensor losses as SVG.
#include <CLI/CLI.hpp>
#include <cmath>
#include <cstdio>

#include "demos/teaching_run.h"
#include "halfgrad/report/svg_plot.h"

using namespace hg;

namespace {

// The share (%) of `role`'s values over every GEMM that the casts flushed (saturated: false) or
// saturated; NaN for a run without fp8 casts.
double lost_share(const demos::RunResult& r, Fp8Role role, bool saturated) {
  uint64_t part = 0, total = 0;
  for (const Fp8Cast& f : r.fp8) {
    if (f.role != role) continue;
    part += saturated ? f.stats.overflow : f.stats.underflow;
    total += f.stats.total();
  }
  return total ? 100.0 * double(part) / double(total) : NAN;
}

// "12.34" or "n/a".
std::string percent(double value) {
  char text[16];
  std::snprintf(text, sizeof text, "%.2f", value);
  return std::isnan(value) ? "n/a" : text;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"fp8: fp8 GEMMs without scaling and with delayed per-tensor scaling, against bf16 and f32"};
  demos::DemoFlags flags{.steps = 300};
  int64_t history = 16, inspect_every = 10;
  demos::add_demo_flags(app, flags);
  app.add_option("--inspect-every", inspect_every, "count what the fp8 casts lost on every n-th step")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--amax-history-len", history, "the delayed-scaling run's amax history (TE's default: 1024)")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{1}, int64_t{65536}));
  CLI11_PARSE(app, argc, argv);
  flags.apply();

  std::printf(
      "fp8 has 8 bits: e4m3 (max 448, smallest subnormal 2^-9) for weights and activations, e5m2\n"
      "(max 57344, smallest 2^-16) for gradients. That range is too narrow to hold a tensor as it is:\n"
      "weights near 0.05 keep 1 or 2 bits, activation gradients near 2^-20 become zero. Transformer\n"
      "Engine multiplies each GEMM operand by its own scale before the cast -- delayed scaling takes it\n"
      "from the largest |x| of the last steps (the amax history), so that the amax lands at the\n"
      "format's max -- and divides the product by both scales afterwards. This demo trains the\n"
      "language-id classifier from one seed (%lld steps of batch 64) four ways: f32; bf16 (f32 weights,\n"
      "bf16 autocast); and the same bf16 run with every linear layer's GEMMs in fp8, once with every\n"
      "scale 1 and once with delayed scaling (history %lld, max, power-of-two scales).\n\n",
      static_cast<long long>(flags.steps), static_cast<long long>(history));
  const data::Split split = demos::language_id_split(flags);
  using optim::Precision;
  const std::vector<demos::RunSpec> specs = {
      {.label = "f32"},
      {.label = "bf16", .mixed_precision = {.precision = Precision::kBf16}},
      {.label = "fp8, no scaling",
       .mixed_precision = {.precision = Precision::kFp8, .fp8 = {.scale = Fp8Recipe::Scale::kNone}}},
      {.label = "fp8, delayed scaling",
       .mixed_precision = {.precision = Precision::kFp8, .fp8 = {.amax_history_len = history}}},
  };
  std::vector<demos::RunResult> runs;
  for (const demos::RunSpec& spec : specs) {
    runs.push_back(demos::train_language_id(
        split, spec, {.steps = flags.steps, .seed = flags.seed, .inspect_every = inspect_every, .model = flags.model}));
    std::printf("  trained %-22s %6.1f s\n", spec.label.c_str(), runs.back().seconds);
    std::fflush(stdout);
  }

  std::printf("\n%-22s %10s %9s %9s %9s %9s %9s\n", "run", "final loss", "test acc", "x ->0%", "W ->0%", "dY ->0%",
              "saturated");
  for (const demos::RunResult& r : runs) {
    double saturated = NAN;
    for (Fp8Role role : kFp8Roles) {
      const double s = lost_share(r, role, true);
      if (!std::isnan(s)) saturated = std::isnan(saturated) ? s : std::max(saturated, s);
    }
    std::printf("%-22s %10.6f %8.2f%% %9s %9s %9s %9s\n", r.label.c_str(), r.final_loss, 100 * r.test_accuracy,
                percent(lost_share(r, Fp8Role::kInput, false)).c_str(),
                percent(lost_share(r, Fp8Role::kWeight, false)).c_str(),
                percent(lost_share(r, Fp8Role::kGradOutput, false)).c_str(), percent(saturated).c_str());
  }
  std::printf(
      "(x, W, dY ->0%%: share of the GEMM inputs, weights and output gradients whose fp8 cast made a\n"
      " nonzero value zero, over every linear layer and the inspected steps (one in %lld, from step 0,\n"
      " where every scale is still 1); saturated: the largest share clamped to the format's max. n/a:\n"
      " no fp8 casts.)\n\n",
      static_cast<long long>(inspect_every));

  const demos::RunResult &bf16 = runs[1], &plain = runs[2], &scaled = runs[3];
  std::printf("per tensor, at the inspected steps (->0%% flushed, sat%% saturated; scale: the last one used)\n");
  std::printf("%-40s %-11s %8s %8s %8s %8s %10s\n", "GEMM", "tensor", "1: ->0%", "1: sat%", "ds: ->0%", "ds: sat%",
              "ds: scale");
  std::vector<std::string> names;
  std::vector<double> plain_dy, scaled_dy;
  for (const Fp8Cast& p : plain.fp8) {
    const Fp8Cast* s = nullptr;
    for (const Fp8Cast& c : scaled.fp8) {
      if (c.key == p.key && c.role == p.role) s = &c;
    }
    if (s == nullptr) continue;
    std::printf("%-40s %-11s %8.2f %8.2f %8.2f %8.2f %10g\n", p.key.c_str(), fp8_role_name(p.role),
                100 * p.flushed_share(), 100 * p.saturated_share(), 100 * s->flushed_share(),
                100 * s->saturated_share(), double(s->scale));
    if (p.role == Fp8Role::kGradOutput) {
      names.push_back(p.key);
      plain_dy.push_back(100 * p.flushed_share());
      scaled_dy.push_back(100 * s->flushed_share());
    }
  }
  std::printf("(1: every scale 1; ds: delayed scaling)\n\n");

  const double plain_loss = lost_share(plain, Fp8Role::kGradOutput, false),
               scaled_loss = lost_share(scaled, Fp8Role::kGradOutput, false);
  std::printf(
      "Finding: without scaling, fp8 flushed %.1f%% of the output gradients to zero and reached %.1f%% test\n"
      "accuracy; delayed per-tensor scaling flushed %.2f%% and reached %.1f%%, against %.1f%% for bf16 (7\n"
      "classes: chance is 14.3%%).\n",
      plain_loss, 100 * plain.test_accuracy, scaled_loss, 100 * scaled.test_accuracy, 100 * bf16.test_accuracy);

  report::SvgPlot losses(
      {.title = "Training loss, language id", .x_label = "step", .y_label = "loss (mean of 25 steps)"});
  for (const demos::RunResult& r : runs) losses.add_line(r.label, r.log_steps, r.losses);
  losses.save(flags.path("fp8-loss.svg"));
  report::SvgPlot lost({.title = "Output gradients flushed to zero by the e5m2 cast, per linear layer",
                        .x_label = "linear layer (backward order)",
                        .y_label = "flushed (%)"});
  lost.set_categories(names);
  lost.add_bars("fp8, no scaling", plain_dy);
  lost.add_bars("fp8, delayed scaling", scaled_dy);
  lost.save(flags.path("fp8-lost.svg"));
  std::printf("\nwrote %s, %s\n", flags.path("fp8-loss.svg").c_str(), flags.path("fp8-lost.svg").c_str());
  return 0;
}
