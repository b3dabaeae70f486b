// hg::Error: the one exception type halfgrad throws for misuse (shape, dtype, state) and bad
// input, in every layer from precision/ up (running out of memory stays std::bad_alloc). Its
// message names the op or file at fault and the values involved; user-facing programs catch it,
// print the message on one line and exit non-zero.
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>

namespace hg {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Throws hg::Error with the streamed parts concatenated: fail("matmul: ", a, " vs ", b).
template <class... Parts>
[[noreturn]] void fail(const Parts&... parts) {
  std::ostringstream message;
  (message << ... << parts);
  throw Error(message.str());
}

template <class... Parts>
void check(bool condition, const Parts&... parts) {
  if (!condition) fail(parts...);
}

}  // namespace hg
