#include "halfgrad/precision/fidelity.h"

#include <cmath>
#include <vector>

namespace hg::precision {
namespace {

// Accumulates one input x, its stored value y and the largest magnitude x could have kept.
struct Tally {
  Fidelity result;
  double squared_error = 0;
  size_t flushed = 0, clamped = 0;

  void add(float x, float y, double largest) {
    if (x == 0 || !std::isfinite(x)) return;
    ++result.count;
    const double relative = (double(y) - double(x)) / double(x);
    squared_error += relative * relative;
    flushed += y == 0 ? 1 : 0;
    clamped += std::fabs(double(x)) > largest ? 1 : 0;
  }
  Fidelity finish() {
    if (result.count > 0) {
      const double n = double(result.count);
      result.rms_relative_error = std::sqrt(squared_error / n);
      result.flushed_fraction = double(flushed) / n;
      result.clamped_fraction = double(clamped) / n;
    }
    return result;
  }
};

}  // namespace

void Fidelity::merge(const Fidelity& other) {
  const double n = double(count + other.count);
  if (n == 0) return;
  const double a = double(count) / n, b = double(other.count) / n;
  rms_relative_error =
      std::sqrt(a * rms_relative_error * rms_relative_error + b * other.rms_relative_error * other.rms_relative_error);
  flushed_fraction = a * flushed_fraction + b * other.flushed_fraction;
  clamped_fraction = a * clamped_fraction + b * other.clamped_fraction;
  count += other.count;
}

Fidelity fidelity(FloatFormat format, std::span<const float> values, const RoundingOptions& rounding) {
  const double largest = decode(format, format.max_finite_bits());
  Tally tally;
  for (const float x : values) {
    if (std::isfinite(x)) tally.add(x, decode(format, encode(format, x, rounding)), largest);
  }
  return tally.finish();
}

Fidelity fidelity(const MxFormat& format, std::span<const float> values, const MxOptions& options) {
  const MxBlocks blocks = mx_quantize(format, values, options);
  std::vector<float> stored(values.size());
  mx_dequantize(blocks, stored);
  const double element_max = decode(format.element, format.element.max_finite_bits());
  Tally tally;
  for (size_t i = 0; i < values.size(); ++i) {
    const uint8_t scale = blocks.scales[i / blocks.block_size];
    if (scale == kE8M0Nan)
      continue;  // a block holding inf or NaN: its finite values are lost too,
                 // but there is no relative error to state for them
    tally.add(values[i], stored[i], element_max * e8m0_decode(scale));
  }
  return tally.finish();
}

}  // namespace hg::precision
