// accumulation: what f32 accumulation -- the third technique of Micikevicius et al. (2018),
// beside f32 master weights and loss scaling -- protects. (a) The error of a dot product of K
// f16 pairs, accumulated in f32, in f16 (rounded after every addition) and in f16 blocks of 32
// with an f32 carry, against a double reference, for K = 2^4 .. 2^16 (log-log figure). (b) The
// classifier trained from one seed with each accumulation (fp16 O2, dynamic loss scaling): loss
// curves, accuracy, skipped steps, and why the result is what it is: the lengths and signs of the
// model's sums against (a). Writes both figures as SVG. The training runs take the main model, f32
// and f16 by default (--modes adds f16-blocked): the f16-accumulating GEMM (kernels/accumulate.h)
// is exact, not fast -- 5 to 10 times slower than the packed f32 GEMM.
#include <CLI/CLI.hpp>
#include <cmath>
#include <algorithm>
#include <cstdio>
#include <random>

#include "halfgrad/autograd/all_ops.h"
#include "demos/teaching_run.h"
#include "halfgrad/precision/half.h"
#include "halfgrad/report/svg_plot.h"

using namespace hg;

namespace {

constexpr Accumulation kModes[] = {Accumulation::kF32, Accumulation::kF16, Accumulation::kF16Blocked};
constexpr int kTrials = 8;
constexpr double kF16Roundoff = 0x1p-11;  // u = 2^-11, f16's unit roundoff

// The mean over trials of |sum_k x_k y_k - reference| / sum_k |x_k y_k|, x and y f16 values
// (uniform in [0, 1) when `positive`, else standard normal), the sum computed by halfgrad's sum
// of the (exact, f32) products under an Autocast with `mode`, the reference in double.
double dot_error(int64_t k, bool positive, Accumulation mode, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> uniform(0.0f, 1.0f);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  double total = 0;
  for (int t = 0; t < kTrials; ++t) {
    std::vector<float> x(static_cast<size_t>(k)), y(static_cast<size_t>(k));
    double reference = 0, magnitude = 0;
    for (int64_t i = 0; i < k; ++i) {
      x[size_t(i)] = float(half(positive ? uniform(rng) : normal(rng)));
      y[size_t(i)] = float(half(positive ? uniform(rng) : normal(rng)));
      const double p = double(x[size_t(i)]) * double(y[size_t(i)]);  // exact, as in f32
      reference += p;
      magnitude += std::fabs(p);
    }
    const Autocast guard({.dtype = DType::f16, .accumulation = mode});
    // f32 operands: mul stays f32 (kPromote) and its products of f16 values are exact; sum
    // (kFloat32) returns f32, so the error is the accumulator's alone.
    const float s = sum(mul(Tensor::from_vector(x, {k}), Tensor::from_vector(y, {k}))).item();
    total += std::fabs(double(s) - reference) / magnitude;
  }
  return total / kTrials;
}

// (a)'s errors: per K = 2^e, e = 4, 5, ..., the error of every (sign, mode) series.
struct DotErrors {
  std::vector<double> log_k;
  std::vector<std::vector<double>> errors;  // (positive, mixed) x mode
};

// (a): the dot products' errors for K = 2^4 .. 2^max_log2_k, printed as a table with its reading.
DotErrors print_dot_errors(int max_log2_k, uint64_t seed) {
  std::printf("== (a) Dot products of K f16 pairs: error / sum|x y|, mean of %d trials ==\n", kTrials);
  std::printf("%8s | %11s %11s %11s | %11s %11s %11s\n", "", "positive", "", "", "mixed sign", "", "");
  std::printf("%8s | %11s %11s %11s | %11s %11s %11s\n", "K", "f32", "f16", "f16-blocked", "f32", "f16", "f16-blocked");
  DotErrors out{.errors = std::vector<std::vector<double>>(6)};
  for (int e = 4; e <= max_log2_k; ++e) {
    const int64_t k = int64_t{1} << e;
    out.log_k.push_back(double(e));
    std::printf("%8lld |", static_cast<long long>(k));
    for (int sign = 0; sign < 2; ++sign) {
      for (int m = 0; m < 3; ++m) {
        const double err = dot_error(k, sign == 0, kModes[m], seed * 1000 + uint64_t(e));
        out.errors[size_t(sign * 3 + m)].push_back(err);
        std::printf(" %11.3g", err);
      }
      std::printf(sign == 0 ? " |" : "\n");
    }
  }
  std::printf(
      "(u = 2^-11 = %.3g, f16's unit roundoff. Positive terms: every addition rounds at the size of\n"
      " |acc|, which grows like K, so the error grows with K; and once |acc| reaches 2^11 times a term,\n"
      " the term is below half an ulp of acc and vanishes: the f16 sum stagnates, at 2048 for terms\n"
      " below 1. Mixed signs keep |acc| near sqrt(K) terms, so the error stays near u times sum|x y|.\n"
      " Blocks of 32 restart the f16 chain before it grows; f32 has 2^13 times f16's precision.)\n\n",
      kF16Roundoff);
  return out;
}

// (b): the classifier trained once per accumulation of `modes`, in kModes' order.
std::vector<demos::RunResult> train_accumulation_runs(const demos::DemoFlags& flags,
                                                      const std::vector<std::string>& modes) {
  std::printf("== (b) The classifier, fp16 O2 with dynamic loss scaling, each accumulation ==\n");
  std::printf("The %s model, %lld steps of batch 64 from one seed; only the accumulation differs.\n\n",
              flags.model.c_str(), static_cast<long long>(flags.steps));
  const data::Split split = demos::language_id_split(flags);
  std::vector<demos::RunResult> runs;
  for (const Accumulation mode : kModes) {
    if (std::find(modes.begin(), modes.end(), optim::accumulation_name(mode)) == modes.end()) continue;
    const demos::RunSpec spec{.label = std::string("accumulate ") + optim::accumulation_name(mode),
                              .mixed_precision = {.precision = optim::Precision::kFp16, .accumulation = mode}};
    runs.push_back(
        demos::train_language_id(split, spec, {.steps = flags.steps, .seed = flags.seed, .model = flags.model}));
    std::printf("  trained %-24s %6.1f s\n", spec.label.c_str(), runs.back().seconds);
    std::fflush(stdout);
  }
  return runs;
}

// The runs' results, and the first skipped step of each run that skipped one.
void print_accumulation_table(const std::vector<demos::RunResult>& runs) {
  std::printf("\n%-24s %10s %9s %8s %11s\n", "run", "final loss", "test acc", "skipped", "final scale");
  for (const demos::RunResult& r : runs) {
    std::printf("%-24s %10.6f %8.2f%% %8lld %11g\n", r.label.c_str(), r.final_loss, 100 * r.test_accuracy,
                static_cast<long long>(r.skipped), r.scales.back());
  }
  for (const demos::RunResult& r : runs) {
    if (!r.first_anomaly.empty()) std::printf("%s, first skipped %s\n", r.label.c_str(), r.first_anomaly.c_str());
  }
}

// The finding: (a) at the longest K and, when f32 and f16 both trained, what f16 accumulation cost
// the classifier and why. Returns the loss figure's title, which states it.
std::string print_accumulation_finding(const DotErrors& dots, const std::vector<demos::RunResult>& runs,
                                       const std::string& model) {
  const std::vector<double>& log_k = dots.log_k;
  const std::vector<std::vector<double>>& errors = dots.errors;
  const size_t last = log_k.size() - 1;
  std::printf(
      "\nAt K = %lld positive f16 products summed in f16 are off by %.0f%% (f32: %.1g, f16 blocks of %lld: %.1g).\n",
      static_cast<long long>(int64_t{1} << int(log_k[last])), 100 * errors[1][last], errors[0][last],
      static_cast<long long>(kernels::kF16AccumulationBlock), errors[2][last]);
  const demos::RunResult* f32_run = nullptr;
  const demos::RunResult* f16_run = nullptr;
  for (const demos::RunResult& r : runs) {
    if (r.label == "accumulate f32") f32_run = &r;
    if (r.label == "accumulate f16") f16_run = &r;
  }
  std::string title = "Training loss by accumulation (fp16 O2)";
  if (f32_run == nullptr || f16_run == nullptr) return title;
  const double gap = 100 * (f32_run->test_accuracy - f16_run->test_accuracy);
  const nn::ClassifierConfig c = demos::language_id_config(7, model);
  const int64_t rows = 64 * c.max_len;  // batch x tokens: the weight gradients' sums
  // (a)'s errors at the model's sum lengths (K = 2^e, e = 4 + index), when the table reaches them.
  auto at = [&](int64_t k, size_t series) {
    const int e = int(std::lround(std::log2(double(k))));
    return e >= 4 && e <= int(log_k.back()) ? errors[series][size_t(e - 4)] : NAN;
  };
  std::printf(
      "Finding: f16 accumulation reached %.2f%% test accuracy against %.2f%% with f32 (%+.2f points) on the\n"
      "%s model.\n",
      100 * f16_run->test_accuracy, 100 * f32_run->test_accuracy, -gap, model.c_str());
  if (std::fabs(gap) < 1.0) {
    std::printf(
        "Harmless here, and why: the model's longest sums are its weight gradients' (batch x tokens =\n"
        "%lld terms), and they mix signs (the output gradients do): (a) puts f16's error there at %.2g\n"
        "of sum|x y| (f32: %.2g); a mixed-sign sum's error does not grow like K. Its same-sign sums --\n"
        "layer norm's variance over d_model = %lld terms, softmax's denominators over %lld positions --\n"
        "are too short to stagnate: f16 is off by %.2g at K = %lld. f16 fails on long same-sign sums,\n"
        "which this model does not have.\n",
        static_cast<long long>(rows), at(rows, 4), at(rows, 3), static_cast<long long>(c.d_model),
        static_cast<long long>(c.max_len), at(c.d_model, 1), static_cast<long long>(c.d_model));
    char text[160];
    std::snprintf(text, sizeof text,
                  "f16 accumulation is harmless on this model (%+.2f points): its long sums mix signs", -gap);
    title = text;
  } else {
    char text[160];
    std::snprintf(text, sizeof text, "f16 accumulation costs %.1f points of test accuracy on this model", gap);
    title = text;
    std::printf("%s.\n", text);
  }
  return title;
}

// (a)'s figure: every series' error against log2 K, with f16 accumulation's bound.
void save_dot_figure(const DotErrors& dots, const std::string& path) {
  const std::vector<double>& log_k = dots.log_k;
  report::SvgPlot plot({.title = "Dot product of K f16 pairs: error / sum|x y|",
                        .x_label = "log2 K",
                        .y_label = "error (mean of 8 trials)",
                        .log2_y = true});
  const char* names[] = {"f32", "f16", "f16-blocked"};
  for (int sign = 0; sign < 2; ++sign) {
    for (int m = 0; m < 3; ++m) {
      std::vector<double> y = dots.errors[size_t(sign * 3 + m)];
      for (double& v : y) v = std::max(v, 1e-12);  // an exact sum has no logarithm: drawn at 1e-12
      plot.add_line(std::string(names[m]) + (sign == 0 ? ", positive" : ", mixed sign"), log_k, y);
    }
  }
  std::vector<double> ku;  // the bound of f16 accumulation's error (about K u), as a guide
  for (const double e : log_k) ku.push_back(std::exp2(e) * kF16Roundoff);
  plot.add_line("K u (bound)", log_k, ku);
  plot.save(path);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"accumulation: f32 against f16 accumulation, in a dot product and in training"};
  demos::DemoFlags flags{.steps = 300};
  int max_log2_k = 16;
  std::vector<std::string> modes = {"f32", "f16"};
  demos::add_demo_flags(app, flags);
  app.add_option("--modes", modes, "accumulations of the training runs (b)")
      ->capture_default_str()
      ->check(CLI::IsMember({"f32", "f16", "f16-blocked"}))
      ->delimiter(',');
  app.add_option("--max-log2-k", max_log2_k, "the longest dot product of (a) is 2^N terms")
      ->capture_default_str()
      ->check(CLI::Range(4, 20));
  CLI11_PARSE(app, argc, argv);
  flags.apply();

  std::printf(
      "A matrix product or a sum adds many terms into one accumulator. Mixed precision keeps that\n"
      "accumulator in f32 even when the terms are f16 products. Here it is f16 instead (--accumulate\n"
      "f16: rounded to f16 after every addition) or f16 in blocks of %lld terms whose results are\n"
      "added in f32 (f16-blocked), as some tensor cores did.\n\n",
      static_cast<long long>(kernels::kF16AccumulationBlock));
  const DotErrors dots = print_dot_errors(max_log2_k, flags.seed);
  const std::vector<demos::RunResult> runs = train_accumulation_runs(flags, modes);
  print_accumulation_table(runs);
  const std::string title = print_accumulation_finding(dots, runs, flags.model);

  save_dot_figure(dots, flags.path("accumulation-dot.svg"));
  report::SvgPlot losses({.title = title, .x_label = "step", .y_label = "loss (mean of 25 steps)"});
  demos::add_loss_curves(losses, runs);
  losses.save(flags.path("accumulation-loss.svg"));
  std::printf("\nwrote %s, %s\n", flags.path("accumulation-dot.svg").c_str(),
              flags.path("accumulation-loss.svg").c_str());
  return 0;
}
