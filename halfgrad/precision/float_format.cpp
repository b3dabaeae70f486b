#include "halfgrad/precision/float_format.h"

#include <string>

#include "halfgrad/base/error.h"

namespace hg::precision {

std::string describe_format(FloatFormat f) {
  const char* specials = f.specials == Specials::kIeee      ? "inf and NaN"
                         : f.specials == Specials::kNanOnly ? "NaN only"
                         : f.specials == Specials::kFnuz    ? "NaN at -0 only (fnuz)"
                                                            : "finite only";
  return std::string(format_name(f)) + " (" + std::to_string(f.exponent_bits) + " exponent, " +
         std::to_string(f.mantissa_bits) + " mantissa bits, bias " + std::to_string(f.exponent_bias) + ", " + specials +
         (f.subnormals ? "" : ", no subnormals") + ")";
}

namespace detail {

void throw_invalid_format(FloatFormat f) {
  fail("hg::precision: format ", describe_format(f),
       " is not supported: it needs 1-8 exponent bits, 0-15 mantissa bits, a mantissa bit "
       "where the top exponent field holds inf/NaN, and every value within float's range "
       "(smallest subnormal >= 2^-149, largest exponent <= 127)");
}

void throw_no_nan(FloatFormat f, const char* what) {
  fail("hg::precision: ", what, " has no result in ", describe_format(f), ": the format has no NaN");
}

void throw_unsupported(FloatFormat f, const char* what) {
  fail("hg::precision: ", what, " is not supported (format ", describe_format(f), ")");
}

}  // namespace detail
}  // namespace hg::precision
