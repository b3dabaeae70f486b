#include "halfgrad/precision/mx.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "halfgrad/base/error.h"
#include "halfgrad/precision/mx_types.h"

namespace hg::precision {
namespace {

void check_options(const char* op, const MxOptions& options) {
  check(options.block_size != 0, "hg::precision::", op, ": block_size must be > 0");
  check(options.rounding != Rounding::kStochastic, "hg::precision::", op,
        ": stochastic rounding is not supported for MX elements");
}

// The shared exponent X of one block whose largest magnitude is amax (finite, > 0).
int shared_exponent(const MxFormat& format, double amax, MxScaleRule rule) {
  int x = std::ilogb(amax) - format.emax();  // floor(log2 amax) - emax_elem, exact
  // amax / 2^x is in [2^emax, 2^(emax+1)); one more makes it < 2^emax <= max_elem.
  if (rule == MxScaleRule::kRoundUp &&
      std::ldexp(amax, -x) > decode(format.element, format.element.max_finite_bits())) {
    ++x;
  }
  return std::clamp(x, -127, 127);
}

// Sign-magnitude element bits <-> MXINT8's two's complement byte.
uint8_t to_storage(const MxFormat& format, uint32_t bits) {
  return format.twos_complement ? mxint8_byte(bits) : uint8_t(bits);
}

double element_value(const MxFormat& format, uint8_t code) {
  if (format.twos_complement) return double(int8_t(code)) / 64;
  return double(decode(format.element, code));
}

}  // namespace

float e8m0_decode(uint8_t code) { return Float8E8M0::from_bits(code).to_float(); }

namespace detail {
void throw_e8m0_not_positive(double x) {
  fail("hg::float8_e8m0: ", x, " has no encoding (E8M0 holds the powers of two 2^-127 .. 2^127: no zero, no sign)");
}
}  // namespace detail

MxBlocks mx_quantize(const MxFormat& format, std::span<const float> values, const MxOptions& options) {
  check_options("mx_quantize", options);
  MxBlocks blocks{.format = format, .block_size = options.block_size};
  const size_t n = values.size(), block_count = (n + options.block_size - 1) / options.block_size;
  blocks.scales.resize(block_count);
  blocks.elements.resize(n);
  const RoundingOptions rounding{.mode = options.rounding, .saturate = true};
  for (size_t b = 0; b < block_count; ++b) {
    const size_t begin = b * options.block_size, end = std::min(n, begin + options.block_size);
    double amax = 0;
    bool special = false;
    for (size_t i = begin; i < end; ++i) {
      special = special || !std::isfinite(values[i]);
      amax = std::max(amax, std::fabs(double(values[i])));
    }
    if (special) {  // NaN scale: the whole block decodes as NaN; element codes stay 0
      blocks.scales[b] = kE8M0Nan;
      continue;
    }
    const int x = amax == 0 ? -127 : shared_exponent(format, amax, options.scale_rule);
    blocks.scales[b] = uint8_t(x + 127);
    for (size_t i = begin; i < end; ++i) {
      // values[i] / 2^x is exact in double (|x| <= 127, f32 inputs), then rounded once.
      blocks.elements[i] = to_storage(format, encode(format.element, std::ldexp(double(values[i]), -x), rounding));
    }
  }
  return blocks;
}

void mx_dequantize(const MxBlocks& blocks, std::span<float> out) {
  const size_t n = blocks.size();
  check(out.size() == n && blocks.block_size != 0 &&
            blocks.scales.size() == (n + blocks.block_size - 1) / blocks.block_size,
        "hg::precision::mx_dequantize: ", blocks.format.name, " blocks hold ", n, " elements in ", blocks.scales.size(),
        " scales of block size ", blocks.block_size, ", out has ", out.size(), " elements");
  for (size_t i = 0; i < n; ++i) {
    const uint8_t scale = blocks.scales[i / blocks.block_size];
    // Exact: an element has at most 8 significant bits at or above 2^-16, times 2^X >= 2^-127,
    // stays above f32's subnormal quantum 2^-149; only a hand-made block could overflow (inf).
    out[i] = scale == kE8M0Nan ? std::numeric_limits<float>::quiet_NaN()
                               : float(element_value(blocks.format, blocks.elements[i]) * e8m0_decode(scale));
  }
}

void mx_round_to(const MxFormat& format, std::span<float> values, const MxOptions& options) {
  mx_dequantize(mx_quantize(format, values, options), values);
}

}  // namespace hg::precision
