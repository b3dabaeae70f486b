// loss_scaling: the same classifier, from the same seed, trained six ways -- f32; fp16 without
// loss scaling; the same with flush-to-zero (no subnormals, as GPU modes without gradual
// underflow); fp16 with a static loss scale; the dynamic GradScaler; and the dynamic GradScaler
// under flush-to-zero (the recovery) -- and what each run's gradients looked like. Then the
// paper's case without flush-to-zero: the mean loss over a larger batch has gradients that many
// times smaller, below fp16's smallest subnormal 2^-24, trained f32, unscaled fp16 and dynamically
// scaled fp16. Writes the loss curves and log2 of the loss scale per step as SVG.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cmath>
#include <cstdio>

#include "demos/teaching_run.h"
#include "halfgrad/report/svg_plot.h"

using namespace hg;

namespace {

using optim::LossScaling;
constexpr optim::Precision kFp16 = optim::Precision::kFp16;  // O2
const LossScaling kNoScaling{LossScaling::Kind::kNone};

void print_table(const std::vector<demos::RunResult>& runs) {
  std::printf("\n%-26s %10s %9s %11s %11s %11s %8s %11s\n", "run", "final loss", "test acc", "zero grads", "zero act.g",
              "act.g ->0", "skipped", "final scale");
  for (const demos::RunResult& r : runs) {
    std::printf("%-26s %10.6f %8.2f%% %10.3f%% %10.3f%% %10.3f%% %8lld %11g\n", r.label.c_str(), r.final_loss,
                100 * r.test_accuracy, 100 * r.param_grad_zero, 100 * r.act_grad_zero, 100 * r.act_grad_fp16_underflow,
                static_cast<long long>(r.skipped), r.scales.back());
  }
}

std::vector<demos::RunResult> train_runs(const data::Split& split, const std::vector<demos::RunSpec>& specs,
                                         const demos::RunSettings& settings) {
  std::vector<demos::RunResult> runs;
  for (const demos::RunSpec& spec : specs) {
    runs.push_back(demos::train_language_id(split, spec, settings));
    std::printf("  trained %-26s %6.1f s\n", spec.label.c_str(), runs.back().seconds);
    std::fflush(stdout);
  }
  return runs;
}

// log2 of each scaled run's loss scale per step, skipped steps marked; the title states what the
// scales did.
void save_scale_figure(const std::vector<const demos::RunResult*>& runs, const std::string& path) {
  double lo = INFINITY, hi = -INFINITY;
  int64_t skipped = 0;
  for (const demos::RunResult* r : runs) {
    for (const double s : r->scales) lo = std::min(lo, std::log2(s)), hi = std::max(hi, std::log2(s));
    skipped += r->skipped;
  }
  char title[160];
  if (skipped == 0) {
    std::snprintf(title, sizeof title, "Loss scale: no step overflowed, so no scale ever moved (log2 S %g to %g)", lo,
                  hi);
  } else {
    const demos::RunResult* most = runs[0];
    for (const demos::RunResult* r : runs) most = r->skipped > most->skipped ? r : most;
    std::snprintf(title, sizeof title,
                  "Loss scale: %lld overflowing steps skipped, each halving the scale (%s: 2^%g to 2^%g)",
                  static_cast<long long>(skipped), most->label.c_str(), std::log2(most->scales.front()),
                  std::log2(most->scales.back()));
  }
  report::SvgPlot plot({.title = title, .x_label = "optimizer step", .y_label = "log2 (loss scale)"});
  std::vector<demos::Curve> curves;
  for (const demos::RunResult* r : runs) {
    std::vector<double> steps(r->scales.size()), log2s(r->scales.size());
    for (size_t i = 0; i < steps.size(); ++i) steps[i] = double(i), log2s[i] = std::log2(r->scales[i]);
    curves.push_back({r->label, steps, log2s});
  }
  demos::add_curves(plot, curves);
  for (const demos::RunResult* r : runs) {
    char name[96];
    std::snprintf(name, sizeof name, "%s: %lld skipped", r->label.c_str(), static_cast<long long>(r->skipped));
    plot.add_markers(name, r->skipped_steps);
  }
  plot.set_y_range(std::floor(lo) - 2, std::ceil(hi) + 2);  // flat lines stay off the frame
  plot.save(path);
}

void print_scaling_intro(int64_t steps) {
  std::printf(
      "Backward through an fp16 model produces fp16 gradients. Activation gradients are small (often\n"
      "2^-20 to 2^-30) and fp16 holds nothing below 2^-24: without help, part of them becomes zero and\n"
      "that part of the network stops learning. Between 2^-24 and 2^-14 fp16 still has subnormals,\n"
      "with fewer bits. Loss scaling multiplies the loss by S before backward, so every gradient is S\n"
      "times larger while it is fp16, and divides S out in f32 before the update. This demo trains the\n"
      "language-id classifier seven times from one seed (%lld steps of batch 64, fp16 = O2: f16 model,\n"
      "f32 master weights) and compares. The last run starts the dynamic scale at 2^32 (Megatron-LM's\n"
      "initial loss scale) instead of 2^16 (PyTorch's): each overflow skips the step and halves it.\n\n",
      static_cast<long long>(steps));
}

// The seven runs at batch 64: f32, fp16 unscaled (and FTZ), static, dynamic (and FTZ, and from
// 2^32).
std::vector<demos::RunResult> train_batch64_runs(const data::Split& split, const demos::DemoFlags& flags,
                                                 float static_scale) {
  char static_label[64];
  std::snprintf(static_label, sizeof static_label, "fp16, static %g", double(static_scale));
  return train_runs(
      split,
      {
          {.label = "f32"},
          {.label = "fp16, no scaling", .mixed_precision = {.precision = kFp16, .loss_scaling = kNoScaling}},
          {.label = "fp16, no scaling, FTZ",
           .mixed_precision = {.precision = kFp16, .loss_scaling = kNoScaling, .flush_subnormals = true}},
          {.label = static_label,
           .mixed_precision = {.precision = kFp16, .loss_scaling = {LossScaling::Kind::kStatic, static_scale}}},
          {.label = "fp16, dynamic", .mixed_precision = {.precision = kFp16}},
          {.label = "fp16, dynamic, FTZ", .mixed_precision = {.precision = kFp16, .flush_subnormals = true}},
          {.label = "fp16, dynamic from 2^32",
           .mixed_precision = {.precision = kFp16, .loss_scaling = {LossScaling::Kind::kDynamic, 4294967296.0f}}},
      },
      {.steps = flags.steps, .seed = flags.seed, .model = flags.model});
}

// The batch-64 runs' table, first skipped steps, and what unscaled fp16 did with and without
// subnormals.
void report_batch64_runs(const std::vector<demos::RunResult>& runs) {
  print_table(runs);
  std::printf(
      "(zero grads / zero act.g: share of weight / activation gradient elements that were exactly zero,\n"
      " over every 10th step; padding positions and unused token rows are zero in every run. act.g ->0:\n"
      " share of activation gradients a cast to fp16 would flush, where they are still f32.)\n\n");
  for (const demos::RunResult& r : runs) {
    if (!r.first_anomaly.empty()) std::printf("%s, first skipped %s\n", r.label.c_str(), r.first_anomaly.c_str());
  }
  const demos::RunResult &f32 = runs[0], &plain = runs[1], &ftz = runs[2], &ftz_scaled = runs[5];
  std::printf(
      "Without loss scaling, fp16 reached %.1f%% test accuracy (f32: %.1f%%): its small activation gradients\n"
      "survive as subnormals. Flushing them to zero (as GPU modes without gradual underflow do) zeroes\n"
      "%.1f%% instead of %.1f%% of activation gradient elements, the layers below lose their signal, and\n"
      "training ends at %.1f%% (7 classes: chance is 14.3%%). The same flush-to-zero run with the dynamic\n"
      "loss scale reaches %.1f%%: the scale moves the gradients up into fp16's normal range, where\n"
      "flushing subnormals costs nothing.\n",
      100 * plain.test_accuracy, 100 * f32.test_accuracy, 100 * ftz.act_grad_zero, 100 * plain.act_grad_zero,
      100 * ftz.test_accuracy, 100 * ftz_scaled.test_accuracy);
}

// The second part: f32, unscaled and dynamically scaled fp16 at batch `large_batch`, and their
// table.
std::vector<demos::RunResult> train_large_batch_runs(const data::Split& split, const demos::DemoFlags& flags,
                                                     int64_t large_batch, int64_t large_steps) {
  std::printf(
      "\n== Without flush-to-zero: the mean loss over a batch of %lld ==\n"
      "Cross-entropy averaged over B examples gives each example's logits the gradient (p - y) / B:\n"
      "at B = %lld every gradient is %lld times smaller than at 64, and more of them fall below 2^-24,\n"
      "where even gradual underflow holds nothing. %lld steps each, same seed.\n",
      static_cast<long long>(large_batch), static_cast<long long>(large_batch),
      static_cast<long long>(large_batch / 64), static_cast<long long>(large_steps));
  std::vector<demos::RunResult> large = train_runs(
      split,
      {
          {.label = "f32, large batch"},
          {.label = "fp16, no scaling, large", .mixed_precision = {.precision = kFp16, .loss_scaling = kNoScaling}},
          {.label = "fp16, dynamic, large", .mixed_precision = {.precision = kFp16}},
      },
      {.steps = large_steps,
       .seed = flags.seed,
       .batch = large_batch,
       .log_every = std::max<int64_t>(1, large_steps / 10),
       .inspect_every = std::max<int64_t>(1, large_steps / 10),
       .model = flags.model});
  print_table(large);
  return large;
}

// The finding of both parts (`large` empty: the second part was skipped).
void print_scaling_finding(const std::vector<demos::RunResult>& runs, const std::vector<demos::RunResult>& large,
                           int64_t large_batch) {
  const demos::RunResult &f32 = runs[0], &plain = runs[1], &ftz = runs[2], &ftz_scaled = runs[5];
  std::string finding;
  char line[640];
  std::snprintf(line, sizeof line,
                "\nFinding: at batch 64, unscaled fp16 ends at %.1f%% (f32 %.1f%%) because subnormals keep the small\n"
                "gradients; under flush-to-zero it ends at %.1f%%, and the dynamic loss scale recovers %.1f%%.\n",
                100 * plain.test_accuracy, 100 * f32.test_accuracy, 100 * ftz.test_accuracy,
                100 * ftz_scaled.test_accuracy);
  finding = line;
  if (!large.empty()) {
    const double gap = 100 * (large[2].test_accuracy - large[1].test_accuracy);
    std::snprintf(line, sizeof line,
                  "At batch %lld without flush-to-zero, unscaled fp16 flushes %.2f%% of the activation gradients\n"
                  "(of the f32 run's, %.2f%% lie below fp16's range); unscaled fp16 ends at %.1f%%, dynamic scaling "
                  "%.1f%%, f32 %.1f%%: %s.\n",
                  static_cast<long long>(large_batch), 100 * large[1].act_grad_fp16_underflow,
                  100 * large[0].act_grad_fp16_underflow, 100 * large[1].test_accuracy, 100 * large[2].test_accuracy,
                  100 * large[0].test_accuracy,
                  std::fabs(gap) >= 1.0
                      ? "the loss scale matters without flush-to-zero too"
                      : "even there the flushed gradients do not change the result, the model learns from the rest");
    finding += line;
  }
  if (large.empty()) {
    finding +=
        "Without flush-to-zero no failure was found on this model: unscaled fp16 keeps the gradients below\n"
        "2^-14 as subnormals, and too few lie below 2^-24 to matter. A 16 times smaller loss (the mean\n"
        "over batch 1024: --large-batch 1024, several minutes) flushes more of them and still trains as f32\n"
        "does (docs/demos.md has the numbers).\n";
  }
  std::printf("%s", finding.c_str());
}

// The batch-64 runs' loss curves and the scaled runs' loss scales.
void save_scaling_figures(const std::vector<demos::RunResult>& runs, const demos::DemoFlags& flags) {
  const demos::RunResult &ftz = runs[2], &ftz_scaled = runs[5];
  char title[160];
  std::snprintf(title, sizeof title, "fp16 without subnormals (FTZ) collapses to %.0f%%; a loss scale recovers %.0f%%",
                100 * ftz.test_accuracy, 100 * ftz_scaled.test_accuracy);
  report::SvgPlot losses({.title = title, .x_label = "step", .y_label = "loss (mean of 25 steps)"});
  demos::add_loss_curves(losses, runs);
  losses.save(flags.path("loss_scaling-loss.svg"));
  save_scale_figure({&runs[3], &runs[4], &runs[5], &runs[6]}, flags.path("loss_scaling-scale.svg"));
  std::printf("\nwrote %s, %s\n", flags.path("loss_scaling-loss.svg").c_str(),
              flags.path("loss_scaling-scale.svg").c_str());
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"loss_scaling: fp16 training with and without loss scaling, and without subnormals"};
  demos::DemoFlags flags{.steps = 300};
  float static_scale = 1024;
  int64_t large_batch = 0, large_steps = 40;
  demos::add_demo_flags(app, flags);
  app.add_option("--static-scale", static_scale, "the static run's loss scale")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option(
         "--large-batch", large_batch,
         "batch of a second part, whose mean loss has smaller gradients (0: skip it; 1024 was measured, docs/demos.md)")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{0}, int64_t{8192}));
  app.add_option("--large-steps", large_steps, "optimizer steps of the second part")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  CLI11_PARSE(app, argc, argv);
  flags.apply();

  print_scaling_intro(flags.steps);
  const data::Split split = demos::language_id_split(flags);
  const std::vector<demos::RunResult> runs = train_batch64_runs(split, flags, static_scale);
  report_batch64_runs(runs);
  std::vector<demos::RunResult> large;
  if (large_batch > 0) large = train_large_batch_runs(split, flags, large_batch, large_steps);
  print_scaling_finding(runs, large, large_batch);
  save_scaling_figures(runs, flags);
  return 0;
}
