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
void print_what_formats_keep() {
  const std::vector<float> values = gradient_like_sample();
  float smallest = INFINITY, largest = 0;
  for (const float v : values) smallest = std::min(smallest, std::fabs(v)), largest = std::max(largest, std::fabs(v));
  std::printf("== What each format keeps of a gradient-like vector (%zu values, log-normal |x| in [%.2g, %.2g]) ==\n",
              values.size(), double(smallest), double(largest));
  std::printf("%-24s %14s %10s %10s\n", "format", "rms rel err", "flushed", "clamped");
  auto row = [](const std::string& name, const Fidelity& f) {
    std::printf("%-24s %14.3g %9.2f%% %9.2f%%\n", name.c_str(), f.rms_relative_error, 100 * f.flushed_fraction,
                100 * f.clamped_fraction);
  };
  for (const FloatFormat format : {formats::f16, formats::bf16, formats::e4m3, formats::e5m2, formats::e3m2,
                                   formats::e2m3, formats::e2m1}) {
    row(format_name(format), fidelity(format, values));
  }
  for (const MxFormat& format : {mx::mxfp8_e4m3, mx::mxfp8_e5m2, mx::mxfp6_e3m2, mx::mxfp6_e2m3, mx::mxfp4, mx::mxint8}) {
    row(format.name, fidelity(format, values));
  }
  row("mxfp8_e4m3 round-up", fidelity(mx::mxfp8_e4m3, values, {.scale_rule = MxScaleRule::kRoundUp}));
  std::printf(
      "A plain fp8/fp6/fp4 format flushes what lies below its range; an MX format moves its range to\n"
      "each block of 32, so only values far below their block's largest are lost. The OCP scale rule\n"
      "clamps a block's largest values when their significand exceeds the element max's; the\n"
      "round-up rule (Transformer Engine) never clamps but rounds small values on a coarser grid.\n\n");
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"formats: fp32, fp16, bf16, fp8 side by side, and training under each autocast dtype"};
  demos::DemoFlags flags{.steps = 200};
  demos::add_demo_flags(app, flags);
  CLI11_PARSE(app, argc, argv);
  flags.apply();

  print_formats();
  print_what_formats_keep();
  std::printf("== The classifier trained %lld steps under each autocast dtype ==\n",
              static_cast<long long>(flags.steps));
  const data::Split split = demos::language_id_split(flags);
  std::vector<demos::RunResult> runs;
  for (const demos::RunSpec& spec :
       {demos::RunSpec{.label = "fp32"},
        demos::RunSpec{.label = "fp16 O2, dynamic scale", .mixed_precision = {.precision = optim::Precision::kFp16}},
        demos::RunSpec{.label = "bf16 autocast", .mixed_precision = {.precision = optim::Precision::kBf16}}}) {
    runs.push_back(demos::train_language_id(split, spec, {.steps = flags.steps, .seed = flags.seed, .model = flags.model}));
    std::printf("  trained %-24s %6.1f s\n", spec.label.c_str(), runs.back().seconds);
    std::fflush(stdout);
  }
  std::printf("\n%-24s %10s %9s %8s\n", "autocast", "final loss", "test acc", "skipped");
  for (const demos::RunResult& r : runs) {
    std::printf("%-24s %10.4f %8.2f%% %8lld\n", r.label.c_str(), r.final_loss, 100 * r.test_accuracy,
                static_cast<long long>(r.skipped));
  }
  std::printf(
      "\nfp16 needs loss scaling (and master weights) to match fp32; bf16 needs neither because it has\n"
      "fp32's range, and pays with 3 fewer significant bits than fp16 in every rounded op.\n");
  report::SvgPlot plot({.title = "Training loss under each autocast dtype", .x_label = "step", .y_label = "loss"});
  for (const demos::RunResult& r : runs) plot.add_line(r.label, r.log_steps, r.losses);
  plot.save(flags.path("formats-loss.svg"));
  std::printf("\nwrote %s\n", flags.path("formats-loss.svg").c_str());
  return 0;
}
