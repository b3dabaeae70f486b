// master_weights: why fp16 training keeps an f32 copy of every weight. An fp16 weight w cannot
// take an update u with |u| < ulp(w)/2: 1 + 2^-11 and 1 + 1e-4 both round back to 1. The same
// classifier is trained from one seed in "pure" fp16 (the optimizer updates the f16 weights
// directly) and in O2 (it updates f32 masters that are rounded into the f16 model after each
// step), with AdamW at a small learning rate (1e-5, BERT's fine-tuning rate, against weights
// initialised like BERT's, std 0.02): Adam moves every weight by at most about lr per step, so
// in f16 a weight with |w| > 2^12 lr cannot move at all. The demo prints both runs' loss and
// accuracy, measures every update of O2 against the f16 weight it starts from (a log2 histogram
// of |u| / |w| against 2^-11, and the exact count of those f16 would round away), and writes the
// loss curves and the histogram as SVG.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numeric>

#include "demos/teaching_run.h"
#include "halfgrad/precision/half.h"
#include "halfgrad/report/svg_plot.h"

using namespace hg;

namespace {

double mean(const std::vector<double>& v) { return v.empty() ? 0.0 : std::accumulate(v.begin(), v.end(), 0.0) / double(v.size()); }

void print_rounding() {
  std::printf("== Small updates to an fp16 weight ==\n");
  std::printf("%-26s %-14s %s\n", "w + update", "in fp16", "");
  const std::vector<std::pair<const char*, double>> cases = {{"1 + 2^-11", 1.0 + std::ldexp(1.0, -11)},
                                                             {"1 + 1e-4", 1.0 + 1e-4},
                                                             {"1 + 2^-10", 1.0 + std::ldexp(1.0, -10)},
                                                             {"0.02 + 1e-6", 0.02 + 1e-6}};
  for (const auto& [name, x] : cases) {
    const half h(x);
    const double base = std::string(name).starts_with("0.02") ? half(0.02).to_double() : 1.0;
    std::printf("%-26s %-14.10g %s\n", name, h.to_double(), h.to_double() == base ? "update lost" : "update kept");
  }
  std::printf(
      "Next to 1, fp16's spacing (ulp) is 2^-10 = 9.8e-4: an update below half of it, 4.9e-4, rounds\n"
      "away (1 + 2^-11 is exactly half: a tie, and the even neighbour is 1). Near 0.02 the ulp is\n"
      "2^-16 = 1.5e-5. For any normal w, ulp(w)/|w| lies in (2^-11, 2^-10]: an update with\n"
      "|u|/|w| < 2^-12 is always lost, one with |u|/|w| >= 2^-11 always kept, and in between it\n"
      "depends on where w lies in its binade.\n\n");
}

// Shares of O2's nonzero updates per band of |u| / |w|, and the share lost counted exactly.
struct Bands {
  double below_12 = 0, between = 0, above_11 = 0, to_zero_weight = 0, lost = 0;
};

Bands bands(const demos::RunResult& r) {
  const precision::Log2Histogram& h = r.update_ratios;
  Bands b;
  if (r.updates == 0) return b;
  const double n = double(r.updates);
  for (int e = precision::Log2Histogram::kMinExponent; e <= precision::Log2Histogram::kMaxExponent; ++e) {
    (e < -12 ? b.below_12 : e == -12 ? b.between : b.above_11) += double(h.count(e)) / n;
  }
  b.to_zero_weight = double(h.inf) / n;
  b.lost = double(r.updates_lost_in_f16) / n;
  return b;
}

// The log2 histogram of |u| / |w| with the bands shaded: lost, depends on w's mantissa, kept.
void save_ratio_figure(const demos::RunResult& r, const std::string& path) {
  const precision::Log2Histogram& h = r.update_ratios;
  std::vector<double> x, y;  // from the first nonempty bin to the last
  for (int e = precision::Log2Histogram::kMinExponent; e <= precision::Log2Histogram::kMaxExponent; ++e) {
    if (h.count(e) == 0 && x.empty()) continue;
    x.push_back(e);
    y.push_back(double(h.count(e)) / double(r.updates));
  }
  while (!y.empty() && y.back() == 0) x.pop_back(), y.pop_back();
  if (x.empty()) x = {-12}, y = {0};  // no update: every step was skipped
  const double lo = std::min(x.front(), -16.0), hi = std::max(x.back() + 1, -8.0);
  report::SvgPlot plot({.title = "O2's updates, each against the f16 weight it started from",
                        .x_label = "log2 (|update| / |f16 weight|)",
                        .y_label = "share of updates"});
  plot.add_line("updates", x, y, /*steps=*/true);
  plot.set_x_range(lo, hi);
  plot.add_region(lo, -12, "lost in f16");
  plot.add_region(-12, -11, "");  // lost or kept, by where w lies in its binade
  plot.add_region(-11, hi, "kept");
  plot.add_markers("2^-11", {-11.0});
  char text[96];
  std::snprintf(text, sizeof text, "%.2f%% round away in f16 (counted exactly)", 100 * bands(r).lost);
  plot.add_text(-10.5, 0.6 * *std::max_element(y.begin(), y.end()), text);
  plot.save(path);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"master_weights: pure fp16 training against f32 master weights (O2)"};
  demos::DemoFlags flags{.steps = 400};
  float lr = 1e-5f;
  demos::add_demo_flags(app, flags);
  app.add_option("--lr", lr, "peak learning rate (AdamW, cosine schedule)")->capture_default_str()->check(CLI::PositiveNumber);
  CLI11_PARSE(app, argc, argv);
  flags.apply();

  print_rounding();
  std::printf(
      "== Training: pure fp16 (no masters) against O2 (f32 masters) ==\n"
      "Both keep the model in fp16 and use dynamic loss scaling; only where the optimizer's update\n"
      "lands differs. %lld steps of batch 64 from scratch, AdamW lr %g (cosine schedule): Adam moves\n"
      "each weight by at most about lr per step, so in fp16 a weight with |w| > 2^12 lr = %.3g cannot\n"
      "move at all, and one above 2^11 lr = %.3g may not. The weights start at std 0.02.\n\n",
      static_cast<long long>(flags.steps), lr, std::ldexp(double(lr), 12), std::ldexp(double(lr), 11));
  const data::Split split = demos::language_id_split(flags);
  const demos::RunSettings settings{.steps = flags.steps, .seed = flags.seed, .lr = lr, .model = flags.model};
  std::vector<demos::RunResult> runs;
  for (const demos::RunSpec& spec :
       {demos::RunSpec{.label = "pure fp16",
                       .mixed_precision = {.precision = optim::Precision::kFp16, .master_weights = optim::MasterWeightsKind::kNone},
                       .track_weight_changes = true},
        demos::RunSpec{.label = "O2, f32 masters",
                       .mixed_precision = {.precision = optim::Precision::kFp16},
                       .track_weight_changes = true,
                       .track_updates = true}}) {
    runs.push_back(demos::train_language_id(split, spec, settings));
    std::printf("  trained %-18s %6.1f s\n", spec.label.c_str(), runs.back().seconds);
    std::fflush(stdout);
  }
  const demos::RunResult &pure = runs[0], &o2 = runs[1];
  std::printf("\n%-18s %10s %9s %26s\n", "run", "final loss", "test acc", "f16 weights unchanged/step");
  for (const demos::RunResult& r : runs) {
    std::printf("%-18s %10.4f %8.2f%% %25.2f%%\n", r.label.c_str(), r.final_loss, 100 * r.test_accuracy,
                100 * mean(r.weights_unchanged));
  }
  const Bands b = bands(o2);
  std::printf(
      "\n== O2's updates over the run, each u against the f16 weight w it started from ==\n"
      "(%lld nonzero updates; lost: f16(w + u) == w, what a pure fp16 step does with them; a\n"
      "subnormal w, |w| < 2^-14, has a wider relative ulp: the exact count includes it)\n"
      "%-34s %9s\n%-34s %8.2f%%\n%-34s %8.2f%%\n%-34s %8.2f%%\n%-34s %8.2f%%\n%-34s %8.2f%%\n",
      static_cast<long long>(o2.updates), "|u|/|w|", "share", "below 2^-12 (always lost)",
      100 * b.below_12, "2^-12 to 2^-11 (either)", 100 * b.between, "2^-11 and above (kept, w normal)",
      100 * b.above_11, "w = 0", 100 * b.to_zero_weight, "lost in f16, counted exactly", 100 * b.lost);

  const double gap = 100 * (o2.test_accuracy - pure.test_accuracy);
  std::printf(
      "\nIn pure fp16 an unchanged weight is an update lost for good; in O2 the f32 master took it and\n"
      "the f16 copy moves once the accumulated updates cross half an ulp.\n"
      "Finding: at AdamW lr %g, %.2f%% of O2's updates are below half an ulp of their f16 weight, and\n"
      "pure fp16, which drops every such update, ends %.2f accuracy points %s O2 after %lld steps\n"
      "(loss %.4f against %.4f).\n",
      lr, 100 * b.lost, std::fabs(gap), gap >= 0 ? "below" : "above", static_cast<long long>(flags.steps),
      pure.final_loss, o2.final_loss);

  char title[80];
  std::snprintf(title, sizeof title, "Training loss at AdamW lr %g: pure fp16 against O2", lr);
  report::SvgPlot loss({.title = title, .x_label = "optimizer step", .y_label = "mean training loss"});
  double low = pure.losses.front(), high = low;
  for (const demos::RunResult& r : runs) {
    loss.add_line(r.label, r.log_steps, r.losses);
    low = std::min(low, *std::min_element(r.losses.begin(), r.losses.end()));
    high = std::max(high, *std::max_element(r.losses.begin(), r.losses.end()));
  }
  loss.set_y_range(low - 0.05 * (high - low), high + 0.05 * (high - low));  // not from 0: the gap is a tenth of the loss
  loss.save(flags.path("master_weights-loss.svg"));
  save_ratio_figure(o2, flags.path("master_weights-update-ratio.svg"));
  std::printf("\nwrote %s, %s\n", flags.path("master_weights-loss.svg").c_str(),
              flags.path("master_weights-update-ratio.svg").c_str());
  return 0;
}
