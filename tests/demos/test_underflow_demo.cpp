// The underflow demo as a smoke test: it runs, prints the range table, the example values'
// fates and the histograms, and its numbers say what the demo claims (scaling reduces the
// share of values flushed to zero). Bad flags exit non-zero with a message.
#include <catch2/catch.hpp>

#include <regex>

#include "tests/demos/run_program.h"

namespace hg {

TEST_CASE("underflow demo prints the format table, the example values and the histograms", "[demo]") {
  const testing::ProgramResult r = testing::run_program("underflow", "--samples 20000 --seed 1");
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.output, Catch::Contains("largest finite                  65504"));
  CHECK_THAT(r.output, Catch::Contains("1e-8           0                0x0000"));
  CHECK_THAT(r.output, Catch::Contains("65520          inf              0x7c00"));
  CHECK_THAT(r.output, Catch::Contains("underflow -> 0"));
  CHECK_THAT(r.output, Catch::Contains("subnormal"));
  // "unscaled  10.50% ..." then "scaled by 2^16  0.00% ...": compare the two zero shares.
  std::smatch m;
  const std::regex table(R"(unscaled\s+([0-9.]+)%[\s\S]*scaled by 2\^16\s+([0-9.]+)%)");
  REQUIRE(std::regex_search(r.output, m, table));
  CHECK(std::stod(m[1]) > 5.0);
  CHECK(std::stod(m[2]) < std::stod(m[1]));
}

TEST_CASE("underflow demo rejects bad flags with a message and an exit code", "[demo]") {
  const testing::ProgramResult r = testing::run_program("underflow", "--scale -1");
  CHECK(r.exit_code != 0);
  CHECK_THAT(r.output, Catch::Contains("--scale"));
}

}  // namespace hg
