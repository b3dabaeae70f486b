// NumericsStats: what a cast to a narrow format lost, as counts (values that underflowed to zero,
// became subnormal, overflowed) plus a log2-magnitude histogram of the values it saw, and a text
// rendering that marks which rows of the histogram land in which region of the target format.
// The counting itself happens inside the conversion kernels (convert.h); nothing here converts.
#pragma once

#include <array>
#include <climits>
#include <cstdint>
#include <span>
#include <string>

#include "halfgrad/precision/float_format.h"
#include "halfgrad/precision/rounding.h"

namespace hg::precision {

// How many values fall in each binary order of magnitude: bin e counts floor(log2|x|) == e, i.e.
// 2^e <= |x| < 2^(e+1), for every e a float can have (-149, the smallest subnormal, to 127).
// Zero, inf and NaN have bins of their own; signs are ignored.
struct Log2Histogram {
  static constexpr int kMinExponent = -149;
  static constexpr int kMaxExponent = 127;
  static constexpr int kExponentBins = kMaxExponent - kMinExponent + 1;

  std::array<uint64_t, kExponentBins> exponent{};  // [e - kMinExponent]
  uint64_t zero = 0, inf = 0, nan = 0;

  uint64_t count(int e) const { return exponent[size_t(e - kMinExponent)]; }
  uint64_t total() const;
  void add(float x);
  void add(std::span<const float> values);
  void merge(const Log2Histogram& other);
  bool operator==(const Log2Histogram&) const = default;
};

// The histogram of any float span, e.g. to show a distribution before and after a cast.
Log2Histogram log2_histogram(std::span<const float> values);

// Counts over the values one or more casts saw (ConvertOptions::stats). A value is counted in at
// most one of underflow, subnormal and overflow; NaN and inf inputs are in none of them.
struct NumericsStats {
  Log2Histogram input;  // the values before the cast
  // Nonzero finite inputs that became +-0, including subnormal results removed by
  // flush_subnormals: the information is gone entirely.
  uint64_t underflow = 0;
  // Results that are subnormal in the target: nonzero, but with fewer significant bits than a
  // normal value, so relative precision was lost.
  uint64_t subnormal = 0;
  // Finite inputs whose rounded magnitude exceeds the target's largest finite value (IEEE 754's
  // overflow condition): they became +-inf (NaN for e4m3, which has no inf), or +-max when
  // RoundingOptions::saturate clamps them or the rounding direction points toward zero. The
  // clamped ones count too: their value is wrong by more than an ulp either way.
  uint64_t overflow = 0;

  uint64_t total() const { return input.total(); }
  uint64_t nan_inputs() const { return input.nan; }
  uint64_t inf_inputs() const { return input.inf; }
  void merge(const NumericsStats& other);
  // "8 values: 2 underflow, 1 subnormal, 1 overflow, 1 NaN, 1 inf" (zero counts left out).
  std::string summary() const;
  bool operator==(const NumericsStats&) const = default;
};

// Where the magnitudes 2^e <= |x| < 2^(e+1) land when cast to `target` under nearest rounding:
// "underflow -> 0" below half the smallest subnormal; "subnormal" up to the smallest normal
// ("flushed -> 0" with flush_subnormals); "normal"; "normal / overflow -> inf" for the row holding
// the largest finite value, whose top rounds past it; "overflow -> inf" above ("-> NaN" for e4m3,
// "-> max" with saturate). Directed modes move the boundaries by less than one row.
std::string region_label(FloatFormat target, int e, const RoundingOptions& rounding = {});

struct RenderOptions {
  // Rows shown: the exponent bins in [min_exponent, max_exponent] that are non-empty, or all of
  // them with show_empty (give a narrow range then). The zero/inf/NaN rows follow when non-empty.
  int min_exponent = Log2Histogram::kMinExponent;
  int max_exponent = Log2Histogram::kMaxExponent;
  bool show_empty = false;
  int bar_width = 40;          // '#' count of a row holding every value
  RoundingOptions rounding{};  // saturate and flush_subnormals change the region labels
};

// One row per exponent bin, highest magnitude first: log2|x|, count, share in %, a bar of '#'
// proportional to the share ('.' for a non-empty row too small for one '#'), and the region of
// `target` the row falls in (region_label), e.g.
//   log2|x|        count   share  bar                                       f16
//        16            1   12.5%  #####                                     overflow -> inf
std::string render_histogram(const Log2Histogram& histogram, FloatFormat target, const RenderOptions& options = {});

}  // namespace hg::precision
