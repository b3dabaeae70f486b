// The underflow demo as a smoke test: it runs, prints the range table, the example values'
// fates and the histograms, and its numbers say what the demo claims (scaling reduces the
// share of values flushed to zero, for the sample and for the classifier's real gradients,
// until 2^24 overflows some). Bad flags exit non-zero with a message.
#include <catch2/catch.hpp>

#include <regex>

#include "tests/demos/run_program.h"
#include "tests/temp_dir.h"

namespace hg {

TEST_CASE("underflow demo prints the format table, the example values and the histograms", "[demo]") {
  testing::TempDir dir("underflow_demo");
  const testing::ProgramResult r =
      testing::run_program("underflow", "--samples 20000 --seed 1 --steps 3 --eval-size 20 --out " + dir.path.string() + testing::demo_model_flag());
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

  // The classifier's gradients: "x 2^k  act.g->0  act.g subn.  act.g->inf  weight.g->0  weight.g inf".
  auto shares = [&](const std::string& label) {
    std::smatch row;
    const std::regex pattern(label + R"(\s+([0-9.]+)%\s+([0-9.]+)%\s+([0-9.]+)%\s+([0-9.]+)%\s+([0-9.]+)%)");
    REQUIRE(std::regex_search(r.output, row, pattern));
    std::vector<double> v;
    for (int i = 1; i <= 5; ++i) v.push_back(std::stod(row[i]));
    return v;
  };
  const std::vector<double> s0 = shares(R"(x 2\^0)"), s8 = shares(R"(x 2\^8)"), s16 = shares(R"(x 2\^16)");
  CHECK(s0[0] + s0[1] > 0.0);   // unscaled: some activation gradients are zero or subnormal in fp16
  CHECK(s8[0] <= s0[0]);        // scaling never adds underflow ...
  CHECK(s8[1] < s0[1]);         // ... and lifts subnormals into the normal range
  CHECK(s16[0] + s16[1] < s0[0] + s0[1]);
  CHECK(s0[2] == 0.0);          // no overflow without a scale
  for (const char* figure : {"underflow-histogram.svg", "underflow-layers.svg"}) {
    const std::string svg = testing::read_bytes(dir.path / figure);
    CHECK_THAT(svg, Catch::StartsWith("<?xml"));
    CHECK_THAT(svg, Catch::EndsWith("</svg>\n"));
  }
  CHECK_THAT(testing::read_bytes(dir.path / "underflow-histogram.svg"), Catch::Contains("become zero in fp16"));
  CHECK_THAT(testing::read_bytes(dir.path / "underflow-layers.svg"), Catch::Contains("class=\"bar\""));
}

TEST_CASE("underflow demo rejects bad flags with a message and an exit code", "[demo]") {
  const testing::ProgramResult r = testing::run_program("underflow", "--scale -1");
  CHECK(r.exit_code != 0);
  CHECK_THAT(r.output, Catch::Contains("--scale"));
}

}  // namespace hg
