// underflow: what IEEE half precision does to numbers, shown with real values.
//   1. The fp16 format's anatomy and its range, beside bf16 and f32.
//   2. How example values round: exact, rounded, subnormal (precision lost), zero (underflow),
//      inf (overflow).
//   3. A log-normal sample shaped like gradients, cast to fp16 as is and after multiplying by a
//      loss scale: the histogram shows which part of the distribution falls where.
#include <CLI/CLI.hpp>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "autograd/generator.h"
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

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"underflow: how IEEE half precision rounds, underflows and overflows, and what loss scaling does"};
  double scale = 65536.0, mu = -20.0, sigma = 4.0;
  int64_t samples = 100000;
  uint64_t seed = 0;
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
  app.add_option("--seed", seed, "random seed")->capture_default_str();
  CLI11_PARSE(app, argc, argv);

  print_anatomy();
  print_examples();
  print_sample(samples, mu, sigma, scale, seed);
  return 0;
}
