// How often a string occurs in a page (an SVG figure, the HTML report): the report tests' one
// counter, in a header so the unity build's batches of test files do not define it twice.
#pragma once

#include <cstddef>
#include <string>

namespace hg::report {

inline size_t count_of(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

}  // namespace hg::report
