// master_weights: what the f32 copy of every weight buys, and what replaces it. A 16-bit weight w
// cannot take an update u with |u| < ulp(w)/2 under round-to-nearest: 1 + 2^-9 stays 1 in bf16.
// The classifier is trained at its normal learning rate (AdamW 1e-3, cosine) with bf16 (and fp16)
// weights four ways: f32 masters (the reference), and "pure" 16-bit training -- the optimizer
// writes the 16-bit weights directly -- with round-to-nearest, with stochastic rounding, and with
// Kahan-compensated updates (a 16-bit buffer per weight holds what the weight has not absorbed),
// after Zamirai et al. 2020, "Revisiting BFloat16 Training" (arXiv:2010.06192). Each at several
// seeds; prints accuracy, loss and bytes per parameter, counts the reference's updates that a
// nearest-rounded 16-bit step would lose, and writes the loss curves and that histogram as SVG.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numeric>
#include <sstream>

#include "demos/teaching_run.h"
#include "halfgrad/precision/bfloat16.h"
#include "halfgrad/precision/half.h"
#include "halfgrad/report/svg_plot.h"

using namespace hg;

namespace {

using optim::MasterWeightsKind;
using optim::Precision;
using optim::UpdateRounding;

double mean(const std::vector<double>& v) {
  return v.empty() ? 0.0 : std::accumulate(v.begin(), v.end(), 0.0) / double(v.size());
}

void print_rounding() {
  std::printf("== Small updates to a 16-bit weight (round to nearest even) ==\n");
  std::printf("%-14s %-14s %-12s %-14s %s\n", "w + update", "in bf16", "", "in fp16", "");
  const std::vector<std::pair<const char*, double>> cases = {{"1 + 2^-9", 1.0 + std::ldexp(1.0, -9)},
                                                             {"1 + 1e-3", 1.0 + 1e-3},
                                                             {"1 + 2^-7", 1.0 + std::ldexp(1.0, -7)},
                                                             {"1 + 2^-11", 1.0 + std::ldexp(1.0, -11)},
                                                             {"1 + 2^-10", 1.0 + std::ldexp(1.0, -10)}};
  for (const auto& [name, x] : cases) {
    const double b = bfloat16(float(x)).to_double(), h = half(x).to_double();
    std::printf("%-14s %-14.10g %-12s %-14.10g %s\n", name, b, b == 1.0 ? "update lost" : "update kept", h,
                h == 1.0 ? "update lost" : "update kept");
  }
  std::printf(
      "bf16 keeps 8 significant bits: next to 1 its spacing (ulp) is 2^-7, and an update below half of\n"
      "it, 2^-8 = 3.9e-3, rounds away; for any normal w, ulp(w)/|w| lies in (2^-8, 2^-7], so an update\n"
      "with |u|/|w| < 2^-9 is always lost. fp16 keeps 11 bits: the same bounds are 2^-12 and 2^-11.\n"
      "AdamW at lr 1e-3 moves a weight by about 1e-3 per step at most: a bf16 weight above about\n"
      "2^9 x 1e-3 = 0.5 (LayerNorm gains start at 1) cannot move at all under round-to-nearest, and\n"
      "as the cosine schedule lowers lr, ever smaller weights freeze.\n\n"
      "Stochastic rounding rounds w + u up with probability equal to the discarded fraction: no\n"
      "single step keeps u, but E[w'] = w + u, so the updates add up on average. Kahan summation\n"
      "keeps a 16-bit buffer c per weight: c += u; w' = round(w + c); c -= w' - w, so what the\n"
      "weight did not absorb is carried to the next step.\n\n");
}

constexpr const char* kRoundingShort[] = {"nearest", "stochastic", "Kahan"};  // by UpdateRounding

struct Variant {
  std::string label;
  optim::MixedPrecisionOptions options;
  double bytes;  // per parameter: weights + masters + compensation, as a 16-bit implementation stores them
  const char* memory;
};

std::vector<Variant> variants(Precision precision) {
  const bool bf16 = precision == Precision::kBf16;
  const std::string f = bf16 ? "bf16" : "fp16";
  auto pure = [&](UpdateRounding rounding) {
    return optim::MixedPrecisionOptions{
        .precision = precision, .master_weights = MasterWeightsKind::kNone, .update_rounding = rounding};
  };
  return {
      {f + ", f32 masters",
       {.precision = precision},
       bf16 ? 4.0 : 6.0,
       bf16 ? "f32 weights, cast per op" : "f16 model + f32 master"},
      {"pure " + f + ", nearest", pure(UpdateRounding::kNearest), 2.0, "16-bit weights"},
      {"pure " + f + ", stochastic", pure(UpdateRounding::kStochastic), 2.0, "16-bit weights"},
      {"pure " + f + ", Kahan", pure(UpdateRounding::kKahan), 4.0, "16-bit weights + 16-bit c"},
  };
}

struct Outcome {
  Variant variant;
  std::vector<demos::RunResult> runs;  // one per seed
  double accuracy() const {
    std::vector<double> a;
    for (const demos::RunResult& r : runs) a.push_back(100 * r.test_accuracy);
    return mean(a);
  }
  double loss() const {
    std::vector<double> l;
    for (const demos::RunResult& r : runs) l.push_back(r.final_loss);
    return mean(l);
  }
};

// The share (%) of the tracked f32-master run's nonzero updates below half an ulp of their weight.
double lost_update_percent(const demos::RunResult& r) {
  return r.updates ? 100.0 * double(r.updates_lost_in_f16) / double(r.updates) : 0.0;
}

// The log2 histogram of |u| / |w| of the f32-master run's updates, with the bands of the 16-bit
// format shaded: always lost under nearest rounding, depends on w's mantissa, kept.
void save_ratio_figure(const demos::RunResult& r, int half_ulp_log2, const std::string& format,
                       const std::string& path) {
  const precision::Log2Histogram& h = r.update_ratios;
  std::vector<double> x, y;  // from the first nonempty bin to the last
  for (int e = precision::Log2Histogram::kMinExponent; e <= precision::Log2Histogram::kMaxExponent; ++e) {
    if (h.count(e) == 0 && x.empty()) continue;
    x.push_back(e);
    y.push_back(double(h.count(e)) / double(std::max<int64_t>(1, r.updates)));
  }
  while (!y.empty() && y.back() == 0) x.pop_back(), y.pop_back();
  if (x.empty()) x = {double(half_ulp_log2)}, y = {0};  // no update: every step was skipped
  const double lo = std::min(x.front(), half_ulp_log2 - 4.0), hi = std::max(x.back() + 1, half_ulp_log2 + 4.0);
  const double lost = lost_update_percent(r);
  char title[128];
  std::snprintf(title, sizeof title, "%.0f%% of the updates are below half an ulp of their %s weight", lost,
                format.c_str());
  report::SvgPlot plot({.title = title,
                        .x_label = "log2 (|update| / |" + format + " weight|), f32-master run",
                        .y_label = "share of updates"});
  plot.add_line("updates", x, y, /*steps=*/true);
  plot.set_x_range(lo, hi);
  plot.add_region(lo, half_ulp_log2 - 1, "lost");
  plot.add_region(half_ulp_log2 - 1, half_ulp_log2, "");  // lost or kept, by where w lies in its binade
  plot.add_region(half_ulp_log2, hi, "kept");
  char text[96];
  std::snprintf(text, sizeof text, "%.2f%% round away in %s (counted exactly)", lost, format.c_str());
  plot.add_text(half_ulp_log2 + 0.5, 0.6 * *std::max_element(y.begin(), y.end()), text);
  plot.save(path);
}

// Each variant's mean training loss over the seeds minus the f32-master run's, per logged step:
// the curves themselves lie within a line width of each other, their differences do not. The
// title states the finding.
void save_loss_figure(const std::vector<Outcome>& outcomes, const std::string& title, const std::string& path) {
  report::SvgPlot plot(
      {.title = title, .x_label = "optimizer step", .y_label = "training loss minus f32 masters' (mean of seeds)"});
  auto mean_curve = [](const Outcome& o) {
    std::vector<double> y(o.runs[0].losses.size(), 0.0);
    for (const demos::RunResult& r : o.runs) {
      for (size_t i = 0; i < y.size(); ++i) y[i] += r.losses[i] / double(o.runs.size());
    }
    return y;
  };
  const std::vector<double> reference = mean_curve(outcomes[0]);
  std::vector<demos::Curve> curves;
  for (const Outcome& o : outcomes) {
    std::vector<double> y = mean_curve(o);
    for (size_t i = 0; i < y.size(); ++i) y[i] -= reference[i];
    char name[96];
    std::snprintf(name, sizeof name, "%s (%.1f%%)", o.variant.label.c_str(), o.accuracy());
    curves.push_back({name, o.runs[0].log_steps, y});
  }
  demos::add_curves(plot, curves);
  double lo = 0, hi = 0;
  for (const demos::Curve& c : curves) {
    for (const double v : c.y) lo = std::min(lo, v), hi = std::max(hi, v);
  }
  const double pad = std::max(1e-3, 0.1 * (hi - lo));
  plot.set_y_range(lo - pad, hi + pad);
  plot.save(path);
}

// The runs of one 16-bit format: the f32-master reference and the pure runs whose update rounding
// `updates` names, each at `seeds` seeds from flags.seed.
std::vector<Outcome> train_outcomes(const data::Split& split, Precision precision,
                                    const std::vector<std::string>& updates, const demos::DemoFlags& flags, int seeds,
                                    float lr) {
  std::vector<Outcome> outcomes;
  for (const Variant& v : variants(precision)) {
    const bool wanted = v.options.master_weights == MasterWeightsKind::kF32 ||
                        std::find(updates.begin(), updates.end(),
                                  optim::kUpdateRoundingNames.name(v.options.update_rounding)) != updates.end();
    if (!wanted) continue;
    Outcome o{.variant = v};
    for (int s = 0; s < seeds; ++s) {
      const demos::RunSettings settings{
          .steps = flags.steps, .seed = flags.seed + uint64_t(s), .lr = lr, .model = flags.model};
      const bool reference = v.options.master_weights == MasterWeightsKind::kF32;
      o.runs.push_back(demos::train_language_id(
          split, {.label = v.label, .mixed_precision = v.options, .track_updates = reference && s == 0}, settings));
      std::printf("  trained %-26s seed %d %6.1f s\n", v.label.c_str(), int(flags.seed) + s, o.runs.back().seconds);
      std::fflush(stdout);
    }
    outcomes.push_back(std::move(o));
  }
  return outcomes;
}

// The outcomes' table (outcomes[0], the f32-master run, is the reference), and what the bytes are.
void print_outcomes(const std::vector<Outcome>& outcomes) {
  std::printf("\n%-26s %6s %9s %10s %11s  %s\n", "run", "bytes", "test acc", "final loss", "vs masters",
              "per seed (test acc)");
  const double reference = outcomes[0].accuracy();
  for (const Outcome& o : outcomes) {
    std::ostringstream per_seed;
    for (const demos::RunResult& r : o.runs) {
      char cell[16];
      std::snprintf(cell, sizeof cell, " %.2f%%", 100 * r.test_accuracy);
      per_seed << cell;
    }
    std::printf("%-26s %6.0f %8.2f%% %10.4f %+10.2f  %s\n", o.variant.label.c_str(), o.variant.bytes, o.accuracy(),
                o.loss(), o.accuracy() - reference, per_seed.str().c_str());
  }
  std::printf("(bytes: ");
  for (const Outcome& o : outcomes)
    std::printf("%s%s %.0f", &o == &outcomes[0] ? "" : "; ", o.variant.memory, o.variant.bytes);
  std::printf(")\n");
}

// The share (%) of the tracked f32-master run's nonzero updates that a pure `format` step with
// nearest rounding would lose, printed and returned.
double print_lost_updates(const demos::RunResult& tracked, uint64_t seed, const std::string& format) {
  const double lost = lost_update_percent(tracked);
  std::printf(
      "Of the f32-master run's %lld nonzero updates (seed %llu), %.2f%% are below half an ulp of the %s weight\n"
      "they start from: round(w + u) == w, counted exactly; a pure %s step with nearest rounding loses each.\n\n",
      static_cast<long long>(tracked.updates), static_cast<unsigned long long>(seed), lost, format.c_str(),
      format.c_str());
  return lost;
}

// One format's finding (its lines of the closing paragraph) and its loss figure's title.
struct FormatFinding {
  std::string text, title;
};

FormatFinding format_finding(const std::vector<Outcome>& outcomes, const std::string& format, int seeds, float lr,
                             double lost) {
  const double reference = outcomes[0].accuracy();
  // Each pure run against the reference, in accuracy points and final loss (means over the seeds).
  std::string finding_line = "Finding (" + format + ", mean of " + std::to_string(seeds) + " seeds, f32 masters " +
                             std::to_string(int(outcomes[0].variant.bytes)) + " bytes/param):";
  std::string title = "Pure " + format + " vs f32 masters:";
  for (size_t i = 1; i < outcomes.size(); ++i) {
    const Outcome& o = outcomes[i];
    char part[200];
    std::snprintf(part, sizeof part, "%s%s %+.2f points (loss %+.4f, %.0f bytes/param)", i == 1 ? " " : ";\n  ",
                  o.variant.label.c_str(), o.accuracy() - reference, o.loss() - outcomes[0].loss(), o.variant.bytes);
    finding_line += part;
    std::snprintf(part, sizeof part, "%s %s %+.1f", i == 1 ? "" : ",",
                  kRoundingShort[size_t(o.variant.options.update_rounding)], o.accuracy() - reference);
    title += part;
  }
  std::string finding = finding_line + ".\n";
  if (outcomes.size() > 1 && outcomes[1].variant.options.update_rounding == UpdateRounding::kNearest &&
      outcomes[1].accuracy() - reference > -3.0) {
    char note[400];
    std::snprintf(note, sizeof note,
                  "  Nearest rounding loses %.0f%% of the updates here and yet ends within 3 points: at lr %g the\n"
                  "  updates that cross half an ulp carry most of the learning. A smaller lr (--lr 1e-4) puts\n"
                  "  more of them below it (docs/demos.md).\n",
                  lost, lr);
    finding += note;
  }
  title += " points of test accuracy";
  return {finding, title};
}

// One format's runs, table and figures. Returns its finding.
std::string report_format(const data::Split& split, const std::string& format, const std::vector<std::string>& updates,
                          const demos::DemoFlags& flags, int seeds, float lr) {
  const Precision precision = format == "bf16" ? Precision::kBf16 : Precision::kFp16;
  const int half_ulp_log2 = format == "bf16" ? -8 : -11;  // |u|/|w| >= 2^this: always kept (w normal)
  const std::vector<Outcome> outcomes = train_outcomes(split, precision, updates, flags, seeds, lr);
  print_outcomes(outcomes);
  const demos::RunResult& tracked = outcomes[0].runs[0];
  const double lost = print_lost_updates(tracked, flags.seed, format);
  const FormatFinding finding = format_finding(outcomes, format, seeds, lr, lost);
  const std::string loss_path = flags.path("master_weights-" + format + "-loss.svg");
  const std::string ratio_path = flags.path("master_weights-" + format + "-update-ratio.svg");
  save_loss_figure(outcomes, finding.title, loss_path);
  save_ratio_figure(tracked, half_ulp_log2, format, ratio_path);
  std::printf("wrote %s, %s\n\n", loss_path.c_str(), ratio_path.c_str());
  return finding.text;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"master_weights: pure 16-bit training (nearest, stochastic, Kahan updates) against f32 master weights"};
  demos::DemoFlags flags{.steps = 300};
  float lr = 1e-3f;
  int seeds = 2;
  std::vector<std::string> formats = {"bf16", "fp16"};
  std::vector<std::string> updates = {"nearest", "stochastic", "kahan"};
  demos::add_demo_flags(app, flags);
  app.add_option("--lr", lr, "peak learning rate (AdamW, cosine schedule)")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--seeds", seeds, "seeds of each run: --seed, --seed + 1, ...")
      ->capture_default_str()
      ->check(CLI::Range(1, 16));
  app.add_option("--formats", formats, "16-bit formats to train in")
      ->capture_default_str()
      ->check(CLI::IsMember({"bf16", "fp16"}))
      ->delimiter(',');
  app.add_option("--updates", updates, "pure 16-bit runs beside the f32-master reference (their update rounding)")
      ->capture_default_str()
      ->check(CLI::IsMember({"nearest", "stochastic", "kahan"}))
      ->delimiter(',');
  CLI11_PARSE(app, argc, argv);
  flags.apply();

  print_rounding();
  std::printf(
      "== Training: f32 masters against pure 16-bit weights ==\n"
      "%lld steps of batch 64 from scratch, AdamW lr %g (cosine schedule), seeds %llu to %llu. fp16 runs\n"
      "use dynamic loss scaling, bf16 runs none. Bytes per parameter: weights, masters and Kahan\n"
      "buffer as a 16-bit implementation stores them (AdamW's m and v add 8 bytes, f32, in every run).\n\n",
      static_cast<long long>(flags.steps), lr, static_cast<unsigned long long>(flags.seed),
      static_cast<unsigned long long>(flags.seed + uint64_t(seeds) - 1));
  const data::Split split = demos::language_id_split(flags);
  std::string finding;
  for (const std::string& format : formats) finding += report_format(split, format, updates, flags, seeds, lr);
  std::printf("%s", finding.c_str());
  return 0;
}
