// What storing a vector in a narrow format keeps of it, as three numbers over its finite nonzero
// values: the RMS relative error, the fraction flushed to zero and the fraction clamped (beyond
// the largest magnitude available to it). For a plain format (float_format.h, any preset or
// run-time format) and for an OCP MX block format (mx.h), whose largest magnitude is per block:
// the element max times the block's scale. The formats demo prints these side by side.
#pragma once

#include <cstddef>
#include <span>

#include "halfgrad/precision/float_format.h"
#include "halfgrad/precision/mx.h"
#include "halfgrad/precision/rounding.h"

namespace hg::precision {

struct Fidelity {
  size_t count = 0;               // finite nonzero inputs: the denominator of the rest
  double rms_relative_error = 0;  // sqrt(mean((y - x)^2 / x^2)); a flushed value counts 1
  double flushed_fraction = 0;    // inputs that became +-0
  double clamped_fraction = 0;    // inputs whose magnitude exceeded the largest one available

  // Both vectors' numbers as if measured over their concatenation (count-weighted).
  void merge(const Fidelity& other);
};

// Each value rounded to `format` once (encode then decode). The default saturates, so overflow
// shows as clamping rather than an infinite error; without saturate an overflow to inf (or NaN)
// makes the RMS error infinite. Infinities and NaN inputs are left out.
Fidelity fidelity(FloatFormat format, std::span<const float> values,
                  const RoundingOptions& rounding = {.saturate = true});

// The values quantized in MX blocks and dequantized (mx_quantize / mx_dequantize); a value is
// clamped when it exceeds its block's element max times 2^X (only the OCP floor rule clamps).
Fidelity fidelity(const MxFormat& format, std::span<const float> values, const MxOptions& options = {});

}  // namespace hg::precision

namespace hg {
using precision::fidelity;
using precision::Fidelity;
}  // namespace hg
