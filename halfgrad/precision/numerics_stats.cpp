// NumericsStats bookkeeping: the log2 histogram (a scalar loop over the float bits; the vector
// kernels in convert.cpp count underflow/subnormal/overflow themselves), merging, and the text
// rendering with the target format's regions.
#include "halfgrad/precision/numerics_stats.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdio>

namespace hg::precision {

uint64_t Log2Histogram::total() const {
  uint64_t sum = zero + inf + nan;
  for (const uint64_t c : exponent) sum += c;
  return sum;
}

namespace {

// Bin indices: [0, kExponentBins) the exponents e - kMinExponent, then zero, inf and NaN.
constexpr size_t kZeroBin = Log2Histogram::kExponentBins, kInfBin = kZeroBin + 1, kNanBin = kZeroBin + 2;

uint32_t exponent_field(float x) { return (std::bit_cast<uint32_t>(x) >> 23) & 0xFFu; }
// The bin of a normal number with exponent field 1..254: 2^(field - 127) <= |x| < 2^(field - 126).
size_t normal_bin(uint32_t field) { return size_t(int(field) - 127 - Log2Histogram::kMinExponent); }

size_t bin_of(float x) {
  const uint32_t field = exponent_field(x);
  const uint32_t fraction = std::bit_cast<uint32_t>(x) & 0x7FFFFFu;
  // Normal numbers first: a predictable branch, and no bit scan (slow on Zen) for them.
  if (field - 1 < 0xFE) return normal_bin(field);
  if (field == 0xFF) return fraction != 0 ? kNanBin : kInfBin;
  // A subnormal is fraction * 2^-149: floor(log2|x|) = -149 + the index of the leading one.
  return fraction != 0 ? size_t(31 - std::countl_zero(fraction)) : kZeroBin;
}

}  // namespace

void Log2Histogram::add(float x) {
  const size_t b = bin_of(x);
  (b < kZeroBin ? exponent[b] : b == kZeroBin ? zero : b == kInfBin ? inf : nan) += 1;
}

// Log2Histogram::add is the main cost of collecting stats (the vector kernels count the rest on
// the fly). A long span is counted by exponent field, which for a normal number is its bin, in
// two tables taking turns: nearby values share a bin, and one table made each increment wait for
// the one before (0.94 ns a value on a Zen 4 core in test_convert.cpp's sweep of every float,
// 0.42 this way). Fields 0 (zero, subnormal) and 255 (inf, NaN) are rare; when present, a second
// pass bins them one by one.
void Log2Histogram::add(std::span<const float> values) {
  const size_t n = values.size();
  if (n < 512) {  // not worth clearing the tables
    for (const float x : values) add(x);
    return;
  }
  uint64_t by_field[2][256] = {};
  size_t i = 0;
  for (; i + 2 <= n; i += 2) {
    by_field[0][exponent_field(values[i])] += 1;
    by_field[1][exponent_field(values[i + 1])] += 1;
  }
  if (i < n) by_field[0][exponent_field(values[i])] += 1;
  for (uint32_t field = 1; field < 255; ++field) {
    exponent[normal_bin(field)] += by_field[0][field] + by_field[1][field];
  }
  if (by_field[0][0] + by_field[1][0] + by_field[0][255] + by_field[1][255] == 0) return;
  for (const float x : values) {
    const uint32_t field = exponent_field(x);
    if (field == 0 || field == 255) add(x);
  }
}

void Log2Histogram::merge(const Log2Histogram& other) {
  for (size_t i = 0; i < exponent.size(); ++i) exponent[i] += other.exponent[i];
  zero += other.zero;
  inf += other.inf;
  nan += other.nan;
}

Log2Histogram log2_histogram(std::span<const float> values) {
  Log2Histogram histogram;
  histogram.add(values);
  return histogram;
}

void NumericsStats::merge(const NumericsStats& other) {
  input.merge(other.input);
  underflow += other.underflow;
  subnormal += other.subnormal;
  overflow += other.overflow;
}

std::string NumericsStats::summary() const {
  std::string out = std::to_string(total()) + " values";
  const std::pair<const char*, uint64_t> parts[] = {{"underflow", underflow},
                                                    {"subnormal", subnormal},
                                                    {"overflow", overflow},
                                                    {"NaN", nan_inputs()},
                                                    {"inf", inf_inputs()}};
  const char* separator = ": ";
  for (const auto& [name, count] : parts) {
    if (count == 0) continue;
    out += separator + std::to_string(count) + " " + name;
    separator = ", ";
  }
  return out;
}

namespace {

// What an overflowing finite value becomes.
const char* overflow_target(FloatFormat target, const RoundingOptions& rounding) {
  if (rounding.saturate || !target.has_nan()) return "max";  // finite-only formats clamp
  return target.has_inf() ? "inf" : "NaN";
}

}  // namespace

std::string region_label(FloatFormat target, int e, const RoundingOptions& rounding) {
  // Exponents of the largest finite value, the smallest normal and the smallest subnormal.
  const int e_max = target.max_exponent();
  const int e_min = target.min_exponent();
  const int e_sub = e_min - target.mantissa_bits;
  const std::string overflow = std::string("overflow -> ") + overflow_target(target, rounding);
  if (e > e_max) return overflow;
  if (e == e_max) return "normal / " + overflow;
  if (e >= e_min) return "normal";
  // From half the smallest subnormal up, nearest rounding yields at least the smallest subnormal.
  if (e >= e_sub - 1) return rounding.flush_subnormals ? "flushed -> 0" : "subnormal";
  return "underflow -> 0";
}

std::string render_histogram(const Log2Histogram& histogram, FloatFormat target, const RenderOptions& options) {
  const uint64_t total = histogram.total();
  const int width = std::max(options.bar_width, 1);
  std::string out;
  char line[160];
  std::snprintf(line, sizeof line, "%7s %12s %7s  %-*s  %s\n", "log2|x|", "count", "share", width, "bar",
                format_name(target));
  out += line;

  auto row = [&](const char* label, uint64_t count, const std::string& region) {
    const double share = total == 0 ? 0.0 : double(count) / double(total);
    const size_t hashes = size_t(std::lround(share * width));
    const std::string bar = hashes == 0 && count != 0 ? std::string(1, '.') : std::string(hashes, '#');
    std::snprintf(line, sizeof line, "%7s %12llu %6.1f%%  %-*s  %s\n", label, static_cast<unsigned long long>(count),
                  100.0 * share, width, bar.c_str(), region.c_str());
    out += line;
  };

  const int lo = std::max(options.min_exponent, Log2Histogram::kMinExponent);
  const int hi = std::min(options.max_exponent, Log2Histogram::kMaxExponent);
  for (int e = hi; e >= lo; --e) {
    const uint64_t count = histogram.count(e);
    if (count == 0 && !options.show_empty) continue;
    row(std::to_string(e).c_str(), count, region_label(target, e, options.rounding));
  }
  const std::string inf_region =
      target.has_inf() ? "inf" : std::string("-> ") + overflow_target(target, options.rounding);
  if (histogram.zero != 0) row("zero", histogram.zero, "zero");
  if (histogram.inf != 0) row("inf", histogram.inf, inf_region);
  if (histogram.nan != 0) row("NaN", histogram.nan, "NaN");
  return out;
}

}  // namespace hg::precision
