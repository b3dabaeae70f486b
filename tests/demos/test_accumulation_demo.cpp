// The accumulation demo as a smoke test: it runs, and its dot-product table says what the demo
// claims -- f16 accumulation's error grows with K and, for positive terms, exceeds f32's by
// orders of magnitude at large K (stagnation), f16 blocks with an f32 carry sit between -- and
// it trains one run per accumulation and writes both figures.
#include <catch2/catch.hpp>

#include <array>
#include <map>
#include <regex>
#include <string>

#include "tests/demos/run_program.h"
#include "tests/temp_dir.h"

namespace hg {

TEST_CASE("accumulation demo: f16 error grows with K, blocks sit between, three runs train",
          "[demo][program][accumulate]") {
  testing::TempDir dir("accumulation_demo");
  const testing::ProgramResult r = testing::run_program(
      "accumulation",
      "--steps 1 --eval-size 1 --max-log2-k 13 --model small --modes f32,f16,f16-blocked --out " + dir.path.string());
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  // "    8192 |  5.1e-08  0.22  2.9e-05 |  3.5e-09  0.000122  1e-05": K, then f32, f16,
  // f16-blocked for positive and for mixed-sign terms.
  std::map<long, std::array<double, 6>> table;
  const std::regex row(R"(\n\s*(\d+) \|\s+(\S+)\s+(\S+)\s+(\S+) \|\s+(\S+)\s+(\S+)\s+(\S+))");
  for (std::sregex_iterator it(r.output.begin(), r.output.end(), row), end; it != end; ++it) {
    std::array<double, 6> e;
    for (size_t i = 0; i < 6; ++i) e[i] = std::stod((*it)[int(i) + 2]);
    table[std::stol((*it)[1])] = e;
  }
  REQUIRE(table.size() == 10);  // K = 2^4 .. 2^13
  const std::array<double, 6>&small = table.at(16), &large = table.at(8192);
  enum { kF32, kF16, kBlocked, kMixedF32, kMixedF16, kMixedBlocked };
  // Positive terms: the f16 sum stagnates (past 2048 nothing below 1 is added): at K = 2^13 the
  // true sum is about K/4 = 2048, and the f16 sum falls short by far more than u = 2^-11 of it.
  CHECK(large[kF16] > 0.1);
  CHECK(large[kF16] > 100 * small[kF16]);      // grows with K
  CHECK(large[kF16] > 1e4 * large[kF32]);      // orders of magnitude above f32's
  CHECK(large[kBlocked] < large[kF16] / 1e3);  // blocks of 32 never stagnate ...
  CHECK(large[kBlocked] > large[kF32]);        // ... but keep f16's rounding within blocks
  for (const auto& [k, e] : table) {
    INFO("K = " << k);
    CHECK(e[kF16] > e[kF32]);
    CHECK(e[kMixedF16] > e[kMixedF32]);
    CHECK(e[kMixedBlocked] <= e[kMixedF16]);
  }
  for (const char* run : {"accumulate f32", "accumulate f16", "accumulate f16-blocked"}) {
    CHECK_THAT(r.output, Catch::Contains(std::string("trained ") + run));
  }
  // The finding compares the f16 run with the f32 run and says whether f16 accumulation mattered.
  CHECK(std::regex_search(
      r.output, std::regex(R"(Finding: f16 accumulation reached [0-9.]+% test accuracy against [0-9.]+% with f32)")));
  CHECK((r.output.find("Harmless here, and why:") != std::string::npos) !=
        (r.output.find("costs") != std::string::npos));
  for (const char* figure : {"accumulation-dot.svg", "accumulation-loss.svg"}) {
    const std::string svg = testing::read_bytes(dir.path / figure);
    CHECK_THAT(svg, Catch::StartsWith("<?xml"));
    CHECK_THAT(svg, Catch::EndsWith("</svg>\n"));
  }
}

}  // namespace hg
