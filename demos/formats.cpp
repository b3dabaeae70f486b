// formats: fp32, fp16, bf16 and the two OCP fp8 formats side by side -- range, precision and
// what a few concrete values become in each, and what each format (also the MX fp6/fp4 elements
// and the OCP MX block formats) keeps of a gradient-like vector -- then the same classifier
// trained briefly under every autocast dtype halfgrad supports (none = f32, fp16 O2 with dynamic
// loss scaling, bf16).
// fp8 is a storage and conversion format here: there is no fp8 autocast, so it is not trained.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "demos/teaching_run.h"
#include "halfgrad/precision/bfloat16.h"
#include "halfgrad/precision/fidelity.h"
#include "halfgrad/precision/finfo.h"
#include "halfgrad/precision/float8.h"
#include "halfgrad/precision/half.h"
#include "halfgrad/precision/mx.h"
#include "halfgrad/report/svg_plot.h"

using namespace hg;
using namespace hg::precision;

namespace {

struct Format {
  const char* name;
  FloatInfo info;
  double (*round)(double);  // the value after a cast (round to nearest even)
};

template <class T>
double round_to(double x) {
  return T(x).to_double();
}

void print_formats() {
  const std::vector<Format> formats = {{"fp32", finfo<float>(), [](double x) { return double(float(x)); }},
                                       {"fp16", finfo<half>(), round_to<half>},
                                       {"bf16", finfo<bfloat16>(), round_to<bfloat16>},
                                       {"fp8 e4m3", finfo<float8_e4m3>(), round_to<float8_e4m3>},
                                       {"fp8 e5m2", finfo<float8_e5m2>(), round_to<float8_e5m2>}};
  std::printf("== Five formats ==\n%-20s", "");
  for (const Format& f : formats) std::printf(" %12s", f.name);
  std::printf("\n");
  auto row = [&](const char* label, auto value) {
    std::printf("%-20s", label);
    for (const Format& f : formats) std::printf(" %12.4g", double(value(f)));
    std::printf("\n");
  };
  row("largest finite", [](const Format& f) { return f.info.max; });
  row("smallest normal", [](const Format& f) { return f.info.smallest_normal; });
  row("smallest subnormal", [](const Format& f) { return f.info.smallest_subnormal; });
  row("epsilon", [](const Format& f) { return f.info.eps; });
  row("significand bits", [](const Format& f) { return f.info.mantissa_bits + 1; });
  std::printf("\n== What values become (round to nearest even; e4m3 has no inf: NaN) ==\n%-20s", "value");
  for (const Format& f : formats) std::printf(" %12s", f.name);
  std::printf("\n");
  for (double x : {1e-8, 1e-5, 3.14159, 70000.0}) {
    std::printf("%-20g", x);
    for (const Format& f : formats) std::printf(" %12.6g", f.round(x));
    std::printf("\n");
  }
  std::printf(
      "fp16 has 11 significant bits but only 5 exponent bits: 1e-8 is below its range (0) and 70000\n"
      "above it (inf). bf16 keeps fp32's 8 exponent bits, so every value stays in range, with 8\n"
      "significant bits (3.14159 -> 3.140625). The fp8 formats trade even more: e4m3 has 4 bits of\n"
      "precision up to 448, e5m2 has fp16's range with 3 bits.\n\n");
}

// A gradient-like vector: random signs, log-normal magnitudes around 1e-3 spanning ~7 decades
// (sigma = 2.5 in ln), fixed seed so the table is reproducible.
std::vector<float> gradient_like_sample() {
  std::mt19937 rng(2026);
  std::lognormal_distribution<float> magnitude(std::log(1e-3f), 2.5f);
  std::vector<float> values(4096);
  for (float& v : values) v = (rng() & 1) != 0 ? -magnitude(rng) : magnitude(rng);
  return values;
}

// What each format keeps of that vector (halfgrad/precision/fidelity.h): plain formats round each value
// alone (saturating); the MX formats share one power-of-two scale per block of 32.
struct Kept {
  std::string name;
  Fidelity fidelity;
};

std::vector<Kept> print_what_formats_keep() {
  const std::vector<float> values = gradient_like_sample();
  float smallest = INFINITY, largest = 0;
  for (const float v : values) smallest = std::min(smallest, std::fabs(v)), largest = std::max(largest, std::fabs(v));
  std::printf("== What each format keeps of a gradient-like vector (%zu values, log-normal |x| in [%.2g, %.2g]) ==\n",
              values.size(), double(smallest), double(largest));
  std::printf("%-24s %14s %10s %10s\n", "format", "rms rel err", "flushed", "clamped");
  std::vector<Kept> kept;
  auto row = [&kept](const std::string& name, const Fidelity& f) {
    std::printf("%-24s %14.3g %9.2f%% %9.2f%%\n", name.c_str(), f.rms_relative_error, 100 * f.flushed_fraction,
                100 * f.clamped_fraction);
    kept.push_back({name, f});
  };
  for (const FloatFormat format :
       {formats::f16, formats::bf16, formats::e4m3, formats::e5m2, formats::e3m2, formats::e2m3, formats::e2m1}) {
    row(format_name(format), fidelity(format, values));
  }
  for (const MxFormat& format :
       {mx::mxfp8_e4m3, mx::mxfp8_e5m2, mx::mxfp6_e3m2, mx::mxfp6_e2m3, mx::mxfp4, mx::mxint8}) {
    row(format.name, fidelity(format, values));
  }
  row("mxfp8_e4m3 round-up", fidelity(mx::mxfp8_e4m3, values, {.scale_rule = MxScaleRule::kRoundUp}));
  std::printf(
      "A plain fp8/fp6/fp4 format flushes what lies below its range; an MX format moves its range to\n"
      "each block of 32, so only values far below their block's largest are lost. The OCP scale rule\n"
      "clamps a block's largest values when their significand exceeds the element max's; the\n"
      "round-up rule (Transformer Engine) never clamps but rounds small values on a coarser grid.\n\n");
  return kept;
}

// What each format loses of the vector: the share flushed to zero and the RMS relative error, both
// fractions, on a log2 axis (0 a dot on the floor); the title states the finding: below fp16,
// range decides what is lost, and a scale per block of 32 (MX) gives it back.
void save_kept_figure(const std::vector<Kept>& kept, const std::string& path) {
  std::vector<std::string> names;
  std::vector<double> flushed, error;
  double e4m3 = 0, mx = 0;
  for (const Kept& k : kept) {
    names.push_back(k.name);
    flushed.push_back(k.fidelity.flushed_fraction);
    error.push_back(k.fidelity.rms_relative_error);
    if (k.name == format_name(formats::e4m3)) e4m3 = 100 * flushed.back();
    if (k.name == mx::mxfp8_e4m3.name) mx = 100 * flushed.back();
  }
  char title[160];
  std::snprintf(
      title, sizeof title,
      "Range decides what is lost: e4m3 flushes %.1f%% of a gradient-like vector, MXFP8 e4m3 (a scale per 32) %.1f%%",
      e4m3, mx);
  report::SvgPlot plot({.title = title, .y_label = "fraction of the vector (log2 axis)", .log2_y = true});
  plot.set_categories(names);
  plot.add_bars("flushed to zero", flushed);
  plot.add_bars("RMS relative error", error);
  plot.save(path);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"formats: fp32, fp16, bf16, fp8 side by side, and training under each autocast dtype"};
  demos::DemoFlags flags{.steps = 200};
  demos::add_demo_flags(app, flags);
  CLI11_PARSE(app, argc, argv);
  flags.apply();

  print_formats();
  const std::vector<Kept> kept = print_what_formats_keep();
  save_kept_figure(kept, flags.path("formats-keep.svg"));
  std::printf("== The classifier trained %lld steps under each autocast dtype ==\n",
              static_cast<long long>(flags.steps));
  const data::Split split = demos::language_id_split(flags);
  std::vector<demos::RunResult> runs;
  for (const demos::RunSpec& spec :
       {demos::RunSpec{.label = "fp32"},
        demos::RunSpec{.label = "fp16 O2, dynamic scale", .mixed_precision = {.precision = optim::Precision::kFp16}},
        demos::RunSpec{.label = "bf16 autocast", .mixed_precision = {.precision = optim::Precision::kBf16}}}) {
    runs.push_back(
        demos::train_language_id(split, spec, {.steps = flags.steps, .seed = flags.seed, .model = flags.model}));
    std::printf("  trained %-24s %6.1f s\n", spec.label.c_str(), runs.back().seconds);
    std::fflush(stdout);
  }
  std::printf("\n%-24s %10s %9s %8s\n", "autocast", "final loss", "test acc", "skipped");
  for (const demos::RunResult& r : runs) {
    std::printf("%-24s %10.4f %8.2f%% %8lld\n", r.label.c_str(), r.final_loss, 100 * r.test_accuracy,
                static_cast<long long>(r.skipped));
  }
  double lo = 1, hi = 0;
  for (const demos::RunResult& r : runs) lo = std::min(lo, r.test_accuracy), hi = std::max(hi, r.test_accuracy);
  std::printf(
      "\nOn this model the three end within %.1f points. fp16's narrow range shows only where its subnormals are\n"
      "flushed: loss_scaling trains unscaled fp16 as well as fp32 with gradual underflow, and at chance\n"
      "under flush-to-zero unless a loss scale lifts the gradients; bf16 has fp32's range and needs no\n"
      "scale, and pays with 3 fewer significant bits than fp16 in every rounded op.\n",
      100 * (hi - lo));
  char title[160];
  std::snprintf(title, sizeof title, "%s: test accuracy %.1f%%, %.1f%%, %.1f%% (fp32, fp16, bf16)",
                hi - lo < 0.01 ? "Every autocast dtype trains alike here" : "The autocast dtypes train differently",
                100 * runs[0].test_accuracy, 100 * runs[1].test_accuracy, 100 * runs[2].test_accuracy);
  report::SvgPlot plot({.title = title, .x_label = "step", .y_label = "loss"});
  demos::add_loss_curves(plot, runs);
  plot.save(flags.path("formats-loss.svg"));
  std::printf("\nwrote %s, %s\n", flags.path("formats-keep.svg").c_str(), flags.path("formats-loss.svg").c_str());
  return 0;
}
