// OCP Microscaling (MX v1.0) block formats: blocks of 32 values share one power-of-two scale (an
// E8M0 byte) over narrow elements: MXFP8 (E4M3, E5M2), MXFP6, MXFP4, MXINT8. mx_quantize cuts an
// f32 span into blocks, mx_dequantize returns the exact values, mx_round_to does both in place.
// The shared-exponent rules (OCP's floor, Transformer Engine's round-up) and every choice where
// the spec is silent: docs/formats.md, "MX block formats".
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "halfgrad/precision/float_format.h"
#include "halfgrad/precision/rounding.h"

namespace hg::precision {

// E8M0, the MX scale: an unsigned biased exponent, bias 127; codes 0..254 are 2^-127 .. 2^127
// and 0xFF is NaN. No sign, zero, inf or subnormals (CUDA __nv_fp8_e8m0, LLVM APFloat E8M0).
inline constexpr uint8_t kE8M0Nan = 0xFF;
// The scale's value: 2^(code - 127), exact in float (2^-127 is a float subnormal); NaN for 0xFF.
float e8m0_decode(uint8_t code);

// MXINT8's element as a format: 1 exponent bit with bias 1 and 6 mantissa bits hold k / 64 for
// |k| <= 127 exactly (field 0: k < 64, the "subnormals"; field 1: 64 + mantissa), so the one
// rounding core rounds to it in every mode; mx_quantize stores the result as two's complement.
inline constexpr FloatFormat kMxInt8Element{
    .exponent_bits = 1, .mantissa_bits = 6, .specials = Specials::kFiniteOnly, .exponent_bias = 1};

// MXINT8's two's complement byte from kMxInt8Element's sign-magnitude bits (their magnitude is k).
constexpr uint8_t mxint8_byte(uint32_t element_bits) {
  const int magnitude = int(element_bits & ~kMxInt8Element.sign_mask());  // k, 0..127
  return uint8_t(int8_t((element_bits & kMxInt8Element.sign_mask()) != 0 ? -magnitude : magnitude));
}

struct MxFormat {
  const char* name;
  FloatFormat element;
  bool twos_complement = false;  // MXINT8: element bytes are int8, not sign-magnitude bits
  // The element format's largest exponent, emax_elem in the shared-exponent rule.
  constexpr int emax() const { return element.max_exponent(); }
};

inline constexpr MxFormat kMxfp8E4M3{"mxfp8_e4m3", kE4M3};
inline constexpr MxFormat kMxfp8E5M2{"mxfp8_e5m2", kE5M2};
inline constexpr MxFormat kMxfp6E3M2{"mxfp6_e3m2", kE3M2};
inline constexpr MxFormat kMxfp6E2M3{"mxfp6_e2m3", kE2M3};
inline constexpr MxFormat kMxfp4E2M1{"mxfp4_e2m1", kE2M1};
inline constexpr MxFormat kMxInt8{"mxint8", kMxInt8Element, true};

enum class MxScaleRule : uint8_t {
  kOcpFloor,  // OCP MX v1.0: X = floor(log2 amax) - emax_elem; elements clamp (the default)
  kRoundUp,   // Transformer Engine MXFP8: X = ceil(log2(amax / max_elem)); nothing clamps
};

struct MxOptions {
  MxScaleRule scale_rule = MxScaleRule::kOcpFloor;
  // How V_i / 2^X is rounded to the element format. Not kStochastic (hg::Error).
  // microxcaling's default is ties away (its "nearest"); IEEE's nearest-even is the default here.
  Rounding rounding = Rounding::kNearestEven;
  size_t block_size = 32;  // the OCP MX block; other sizes (> 0) for experiments
};

// A quantized vector: scales[b] is block b's E8M0 code, elements[i] value i's element code (one
// byte each, unpacked: fp6/fp4 codes in the low bits; MXINT8 as int8).
struct MxBlocks {
  MxFormat format;
  size_t block_size = 32;
  std::vector<uint8_t> scales;
  std::vector<uint8_t> elements;

  size_t size() const { return elements.size(); }
  // Block b's scale exponent X (-127..127); block b must not have the NaN scale.
  int scale_exponent(size_t block) const { return int(scales[block]) - 127; }
};

// `values` in blocks of options.block_size. Throws hg::Error for a zero block size
// or stochastic rounding.
MxBlocks mx_quantize(const MxFormat& format, std::span<const float> values, const MxOptions& options = {});

// The exact f32 value of every element (2^X * P_i; NaN for a block with the NaN scale). Throws
// hg::Error if out's size differs from blocks.size() or the scales do not cover it.
void mx_dequantize(const MxBlocks& blocks, std::span<float> out);

// values[i] = mx_dequantize(mx_quantize(values))[i]: what storing the vector in `format` keeps.
void mx_round_to(const MxFormat& format, std::span<float> values, const MxOptions& options = {});

}  // namespace hg::precision

namespace hg {
using precision::e8m0_decode;
using precision::kE8M0Nan;
using precision::mx_dequantize;
using precision::mx_quantize;
using precision::mx_round_to;
using precision::MxBlocks;
using precision::MxFormat;
using precision::MxOptions;
using precision::MxScaleRule;

// The MX formats by their short names: hg::mx_quantize(hg::mx::mxfp4, values).
namespace mx {
inline constexpr MxFormat mxfp8_e4m3 = precision::kMxfp8E4M3;
inline constexpr MxFormat mxfp8_e5m2 = precision::kMxfp8E5M2;
inline constexpr MxFormat mxfp6_e3m2 = precision::kMxfp6E3M2;
inline constexpr MxFormat mxfp6_e2m3 = precision::kMxfp6E2M3;
inline constexpr MxFormat mxfp4 = precision::kMxfp4E2M1;
inline constexpr MxFormat mxint8 = precision::kMxInt8;
}  // namespace mx
}  // namespace hg
