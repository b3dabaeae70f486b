// underflow: what IEEE half precision does to numbers, shown with real values.
//   1. The fp16 format's anatomy and its range, beside bf16 and f32.
//   2. How example values round: exact, rounded, subnormal (precision lost), zero (underflow),
//      inf (overflow).
//   3. A log-normal sample shaped like gradients, cast to fp16 as is and after multiplying by a
//      loss scale: the histogram shows which part of the distribution falls where.
//   4. One real backward pass of the language-id classifier (after --steps of f32 training): the
//      share of its activation and weight gradients fp16 would flush to zero, unscaled and with
//      loss scales 2^8, 2^16, 2^24; the histogram figure (Micikevicius et al. 2018, Figure 3).
//      Then where the flushed activation gradients come from, per op in forward order, and which
//      weight gradients are exactly zero (rounding noise, found by scaling the loss by 3), as a
//      table and as bars on a log2 axis (underflow-layers.svg).
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "halfgrad/autograd/generator.h"
#include "halfgrad/autograd/all_ops.h"
#include "demos/teaching_run.h"
#include "halfgrad/precision/bfloat16.h"
#include "halfgrad/precision/convert.h"
#include "halfgrad/precision/finfo.h"
#include "halfgrad/precision/half.h"
#include "halfgrad/precision/numerics_stats.h"

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
// by an inspector. The model is f32, so each gradient is what an fp16 cast would receive. The
// forward activations are recorded too: their order is the forward order of the ops.
Pass inspect_backward(const hg::nn::TextClassifier& model, const hg::data::Batch& batch, double scale) {
  hg::report::NumericsInspector inspector({.activations = true, .name_anomalies = false});
  inspector.begin_step(0);
  const hg::Tensor loss = hg::cross_entropy(model.forward(batch.ids, batch.attention_mask), batch.labels);
  hg::backward(hg::mul_scalar(loss, float(scale)));
  return {scale, *inspector.end_step(false)};
}

// Which weight gradients are zero but for rounding. A gradient is linear in the loss: multiplying
// the loss by 3 multiplies a true gradient by 3, and f32 rounding on the way moves g(3L) / 3 from
// g(L) by about 2^-24 per op, far below 2^-10 relative even after the whole backward pass (3, not
// a power of two, so that every rounding falls differently; a power of two would scale the
// rounding errors exactly with the values). Where the exact gradient is zero, what f32 holds is
// the residue of a sum that cancels, a few units in the last place of its terms: that residue
// does not scale, it is drawn anew, so g(3L) / 3 and g(L) differ by about their own size. The
// attention key biases are such tensors: adding b to every key adds q . b to all of a query's
// scores alike, and softmax is invariant to that, so d loss / d k_proj.bias = 0 exactly.
// Criterion: the f32 gradient is all zeros, or |g(3L) / 3 - g(L)| > 2^-10 |g(L)| (2-norms).
constexpr double kNoiseChange = 1.0 / 1024;

struct NoiseTest {
  std::string name;
  double change = 0;  // |g(3L) / 3 - g(L)| / |g(L)|; 0 for an all-zero gradient
  bool noise = false;
};

std::vector<NoiseTest> rounding_noise_test(hg::nn::TextClassifier& model, const hg::data::Batch& batch) {
  auto grads = [&](float factor) {
    model.zero_grad();
    const hg::Tensor loss = hg::cross_entropy(model.forward(batch.ids, batch.attention_mask), batch.labels);
    hg::backward(hg::mul_scalar(loss, factor));
    std::vector<std::vector<float>> out;
    for (const auto& [name, p] : model.named_parameters()) {
      out.push_back(p.has_grad() ? p.grad().to_vector() : std::vector<float>(size_t(p.numel()), 0.0f));
    }
    return out;
  };
  const std::vector<std::vector<float>> once = grads(1), thrice = grads(3);
  model.zero_grad();
  std::vector<NoiseTest> out;
  const hg::nn::NamedTensors params = model.named_parameters();
  for (size_t i = 0; i < params.size(); ++i) {
    double norm = 0, diff = 0;
    for (size_t j = 0; j < once[i].size(); ++j) {
      norm += double(once[i][j]) * once[i][j];
      const double d = double(thrice[i][j]) / 3 - once[i][j];
      diff += d * d;
    }
    const double change = norm > 0 ? std::sqrt(diff / norm) : 0.0;
    out.push_back({params[i].first, change, norm == 0 || change > kNoiseChange});
  }
  return out;
}

// An activation gradient of one op's output, unscaled and at the figure's loss scale.
struct OpShare {
  std::string name;
  uint64_t count = 0, flushed = 0, flushed_scaled = 0;

  void add(const OpShare& other) {
    count += other.count;
    flushed += other.flushed;
    flushed_scaled += other.flushed_scaled;
  }
};

// The activation gradients of `plain` in the forward order of the ops that produced them (the
// order of the forward activations; a gradient of an unnamed tensor, "<op>?", goes last).
std::vector<OpShare> op_shares(const Pass& plain, const Pass& scaled) {
  using hg::report::TensorKind;
  std::vector<std::string> forward;
  for (const hg::report::TensorNumerics& t : plain.numerics.tensors) {
    if (t.kind == TensorKind::kActivation) forward.push_back(t.name);
  }
  auto position = [&](const std::string& name) {
    return std::find(forward.begin(), forward.end(), name) - forward.begin();
  };
  std::vector<OpShare> out;
  for (const hg::report::TensorNumerics& t : plain.numerics.tensors) {
    if (t.kind != TensorKind::kActivationGrad) continue;
    const hg::report::TensorNumerics* u = scaled.numerics.find(t.kind, t.name);
    out.push_back({t.name, t.count(), t.stats.underflow, u ? u->stats.underflow : 0});
  }
  std::stable_sort(out.begin(), out.end(),
                   [&](const OpShare& a, const OpShare& b) { return position(a.name) < position(b.name); });
  return out;
}

// The ops holding most of the flushed activation gradients, the rest summed, and all of them:
// their share is the "act.g -> 0" of the loss scale table, every row's part of it adds up to it.
// Returns the positions in `ops` of the top rows, most flushed first.
std::vector<size_t> print_op_table(const std::vector<OpShare>& ops, const std::string& scaled_label) {
  std::vector<size_t> order(ops.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return ops[a].flushed > ops[b].flushed; });
  const size_t top = std::min<size_t>(8, ops.size());
  OpShare all{.name = "all " + std::to_string(ops.size()) + " ops"},
      rest{.name = "other " + std::to_string(ops.size() - top) + " ops"};
  for (size_t k = 0; k < order.size(); ++k) {
    all.add(ops[order[k]]);
    if (k >= top) rest.add(ops[order[k]]);
  }
  std::printf(
      "\n-- Where the flushed activation gradients come from: the %zu ops that hold most of them --\n"
      "(#: the op's place in the forward pass; -> 0: share of its gradient elements that fp16 flushes;\n"
      "of all -> 0: its part of all activation-gradient elements, the rows add up to the total;\n"
      "reshape and permute pass a gradient on unchanged: their rows repeat the op before them)\n",
      top);
  std::printf("%4s %-26s %10s %9s %12s %14s\n", "#", "op", "elements", "-> 0", "of all -> 0",
              (scaled_label + " -> 0").c_str());
  auto row = [&](const std::string& place, const OpShare& o) {
    std::printf("%4s %-26s %10llu %8.2f%% %11.3f%% %13.2f%%\n", place.c_str(), o.name.c_str(),
                static_cast<unsigned long long>(o.count), percent(o.flushed, o.count), percent(o.flushed, all.count),
                percent(o.flushed_scaled, o.count));
  };
  for (size_t k = 0; k < top; ++k) row(std::to_string(order[k]), ops[order[k]]);
  if (top < ops.size()) row("", rest);
  row("", all);
  order.resize(top);
  return order;
}

// Per loss scale, the shares of the activation and weight gradients that fp16 flushes to zero,
// keeps as subnormals or turns into inf.
void print_scale_table(const std::vector<Pass>& passes) {
  using hg::report::TensorKind;
  std::printf("%-16s %12s %12s %12s %12s %12s\n", "loss scale", "act.g -> 0", "act.g subn.", "act.g -> inf",
              "weight.g -> 0", "weight.g inf");
  for (const Pass& p : passes) {
    const NumericsStats a = p.numerics.merged(TensorKind::kActivationGrad),
                        w = p.numerics.merged(TensorKind::kParamGrad);
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
}

// The histogram figure of the activation gradients, unscaled and at the figure's loss scale.
void save_histogram_figure(const Pass& plain, const Pass& scaled, const std::string& scaled_name,
                           const std::string& path) {
  using hg::report::TensorKind;
  const NumericsStats a = plain.numerics.merged(TensorKind::kActivationGrad);
  char note[64];
  std::snprintf(note, sizeof note, "%.1f%% become zero in fp16", percent(a.underflow, a.total()));
  const NumericsStats sa = scaled.numerics.merged(TensorKind::kActivationGrad);
  char histogram_title[200];
  std::snprintf(
      histogram_title, sizeof histogram_title,
      "Unscaled, %.2f%% of the activation gradients become zero in fp16 and %.0f%% subnormal; %s, %.2f%% and %.2f%%",
      percent(a.underflow, a.total()), percent(a.subnormal, a.total()), scaled_name.c_str(),
      percent(sa.underflow, sa.total()), percent(sa.subnormal, sa.total()));
  hg::report::histogram_figure(histogram_title, {"unscaled", scaled_name},
                               {a.input, scaled.numerics.merged(TensorKind::kActivationGrad).input}, note)
      .save(path);
}

// The weight gradients that hold rounding noise only (rounding_noise_test), with their flushed
// share in `plain`. Returns how many there are.
size_t print_noise_tensors(const std::vector<NoiseTest>& tests, const Pass& plain) {
  using hg::report::TensorKind;
  std::printf(
      "\n-- Weight gradients whose exact value is zero --\n"
      "Scaling the loss by 3 scales a true gradient by 3 up to f32 rounding; the rounding residue left\n"
      "where the exact gradient is zero is drawn anew instead. change: |g(3L)/3 - g(L)| / |g(L)|;\n"
      "above 2^-10 (or an all-zero gradient) the tensor holds rounding noise only:\n");
  std::printf("%-40s %10s %10s %9s\n", "tensor", "change", "abs max", "-> 0");
  double largest_true = 0;
  size_t noise_count = 0;
  for (const NoiseTest& t : tests) {
    if (!t.noise) {
      largest_true = std::max(largest_true, t.change);
      continue;
    }
    const hg::report::TensorNumerics* g = plain.numerics.find(TensorKind::kParamGrad, t.name);
    std::printf("%-40s %10.3g %10.3g %8.2f%%\n", t.name.c_str(), t.change, g ? g->abs_max : 0.0,
                g ? 100 * g->underflow_share() : 0.0);
    ++noise_count;
  }
  std::printf(
      "every other weight gradient: change at most %.3g. In an fp16 backward these tensors' flushed\n"
      "share is noise too: what fp16 drops there was never a gradient.\n",
      largest_true);
  return noise_count;
}

// The section's finding: the activation gradients flushed unscaled, the share of them in the
// ops `top` (print_op_table's rows), those flushed at the figure's scale, the noise tensors.
void print_gradient_finding(const std::vector<OpShare>& ops, const std::vector<size_t>& top, const Pass& plain,
                            const Pass& scaled, const std::string& scaled_label, size_t noise_count) {
  using hg::report::TensorKind;
  const NumericsStats a = plain.numerics.merged(TensorKind::kActivationGrad);
  uint64_t top_flushed = 0;
  for (size_t i : top) top_flushed += ops[i].flushed;
  const OpShare& most = ops[top.at(0)];
  std::printf(
      "\nFinding: unscaled, %.2f%% of the activation-gradient elements become zero in fp16, %.0f%% of them\n"
      "in the %zu ops above, the most in %s (%.1f%% of its elements); scaled by %s, %.2f%% do; the\n"
      "weight gradients fp16 seemed to wipe out (%zu) are exact zeros holding rounding noise.\n",
      percent(a.underflow, a.total()), percent(top_flushed, a.underflow), top.size(), most.name.c_str(),
      percent(most.flushed, most.count), scaled_label.c_str(),
      percent(scaled.numerics.merged(TensorKind::kActivationGrad).underflow, a.total()), noise_count);
}

// The layers figure's title: the op whose activation gradients fp16 flushes most unscaled, and
// the largest share of any op's flushed at the figure's scale.
std::string layers_title(const std::vector<OpShare>& ops, const std::string& scaled_name) {
  size_t worst = 0;
  double largest_scaled = 0;  // of any op's activation gradients, at the figure's scale (%)
  for (size_t i = 0; i < ops.size(); ++i) {
    worst = ops[i].flushed * ops[worst].count > ops[worst].flushed * ops[i].count ? i : worst;
    largest_scaled = std::max(largest_scaled, percent(ops[i].flushed_scaled, ops[i].count));
  }
  char bars_title[200];
  std::snprintf(bars_title, sizeof bars_title,
                "Unscaled, fp16 flushes up to %.1f%% of an op's activation gradients (%s); %s, at most %.2f%%",
                ops.empty() ? 0.0 : percent(ops[worst].flushed, ops[worst].count),
                ops.empty() ? "" : ops[worst].name.c_str(), scaled_name.c_str(), largest_scaled);
  return bars_title;
}

// The figure: activation gradients per op in forward order, then the weight gradients per
// tensor, on a log2 axis (a doubling of headroom for the region labels); the exact-zero weight
// gradients as dashed lines instead of bars, the criterion in the region's label.
void save_layers_figure(const std::vector<OpShare>& ops, const std::vector<NoiseTest>& tests, const Pass& plain,
                        const Pass& scaled, const std::string& scaled_name, const std::string& path) {
  using hg::report::TensorKind;
  std::vector<std::string> names;
  std::vector<double> unscaled, with_scale, noise_x;
  double smallest = 1, largest = 0;
  auto add = [&](const std::string& name, double u, double w) {
    names.push_back(name);
    unscaled.push_back(u);
    with_scale.push_back(w);
    for (double v : {u, w}) {
      if (v > 0) {
        smallest = std::min(smallest, v);
        largest = std::max(largest, v);
      }
    }
  };
  for (const OpShare& o : ops) add(o.name, percent(o.flushed, o.count) / 100, percent(o.flushed_scaled, o.count) / 100);
  for (const NoiseTest& t : tests) {
    const hg::report::TensorNumerics *g = plain.numerics.find(TensorKind::kParamGrad, t.name),
                                     *h = scaled.numerics.find(TensorKind::kParamGrad, t.name);
    if (t.noise) {
      noise_x.push_back(double(names.size()));
      add(t.name, std::nan(""), std::nan(""));
    } else {
      add(t.name, g ? g->underflow_share() : 0.0, h ? h->underflow_share() : 0.0);
    }
  }
  const double n_ops = double(ops.size()), n = double(names.size());
  hg::report::SvgPlot bars({.title = layers_title(ops, scaled_name),
                            .y_label = "share flushed to zero (log2 axis; 2^-10 ~ 0.1%)",
                            .log2_y = true,
                            .width = std::max(720, 260 + 14 * int(n)),
                            .height = 640});
  bars.set_categories(names);
  bars.add_bars("unscaled", unscaled);
  bars.add_bars(scaled_name, with_scale);
  bars.add_markers("exact gradient 0 (noise)", noise_x);
  if (largest > 0)
    bars.set_y_range(std::exp2(std::floor(std::log2(smallest)) - 1), std::exp2(std::ceil(std::log2(largest)) + 1));
  bars.add_region(-0.5, n_ops - 0.5, "activation gradients, per op in forward order");
  bars.add_region(n_ops - 0.5, n - 0.5,
                  "weight gradients, per tensor; dashed: |g(3L)/3 - g(L)| > 2^-10 |g(L)|, no bar");
  bars.save(path);
}

void print_real_gradients(const hg::demos::DemoFlags& flags, double figure_scale) {
  std::printf(
      "\n== Real gradients: the language-id classifier ==\n"
      "The main job's model, trained %lld steps in f32, then one batch of 64 words through forward and\n"
      "backward in f32 (dropout off). Each gradient is cast to fp16 as an fp16 backward would store it:\n\n",
      static_cast<long long>(flags.steps));
  const hg::data::Split split = hg::demos::language_id_split(flags);
  hg::nn::TextClassifier model(hg::demos::language_id_config(int64_t(split.train.label_names.size()), flags.model),
                               flags.seed);
  const hg::demos::RunResult trained = hg::demos::train_language_id(
      split, {.label = "f32"}, {.steps = flags.steps, .seed = flags.seed, .model = flags.model}, model);
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
  print_scale_table(passes);

  const Pass& plain = passes[0];
  const Pass& scaled =
      *std::find_if(passes.begin(), passes.end(), [&](const Pass& p) { return p.scale == figure_scale; });
  char scaled_name[48], scaled_label[16];
  std::snprintf(scaled_name, sizeof scaled_name, "scaled by 2^%g", std::log2(figure_scale));
  std::snprintf(scaled_label, sizeof scaled_label, "2^%g", std::log2(figure_scale));
  save_histogram_figure(plain, scaled, scaled_name, flags.path("underflow-histogram.svg"));

  const std::vector<OpShare> ops = op_shares(plain, scaled);
  const std::vector<size_t> top = print_op_table(ops, scaled_label);

  const std::vector<NoiseTest> tests = rounding_noise_test(model, batch);
  const size_t noise_count = print_noise_tensors(tests, plain);
  print_gradient_finding(ops, top, plain, scaled, scaled_label, noise_count);
  save_layers_figure(ops, tests, plain, scaled, scaled_name, flags.path("underflow-layers.svg"));
  std::printf("\nwrote %s, %s\n", flags.path("underflow-histogram.svg").c_str(),
              flags.path("underflow-layers.svg").c_str());
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
