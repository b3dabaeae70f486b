// Infinity and a quiet NaN as float constants, one definition for every test file (they widen
// exactly to double where a test needs a double).
#pragma once

#include <limits>

namespace hg::testing {

inline constexpr float kInf = std::numeric_limits<float>::infinity();
inline constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

}  // namespace hg::testing
