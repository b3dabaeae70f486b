// Runs one of halfgrad's programs from build/bin with arguments and captures its exit code and
// output (stdout and stderr together), for tests of demos and command-line error paths.
#pragma once

#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <string>

namespace hg::testing {

struct ProgramResult {
  int exit_code = -1;
  std::string output;
};

inline ProgramResult run_program(const std::string& program, const std::string& arguments) {
  // Appended, not std::string(...) + "/" + ...: GCC 12 warns -Warray-bounds on that expression
  // at -O2 in some translation units (GCC bug 105329, a false positive in the inlined operator+).
  std::string command = HALFGRAD_BIN_DIR;
  command.append("/").append(program).append(" ").append(arguments).append(" 2>&1");
  ProgramResult result;
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) return result;
  std::array<char, 4096> buffer;
  size_t n;
  while ((n = fread(buffer.data(), 1, buffer.size(), pipe)) > 0) result.output.append(buffer.data(), n);
  const int status = pclose(pipe);
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return result;
}

}  // namespace hg::testing
