// `halfgrad train --inspect N`: the NumericsInspector attached to the Trainer prints its table
// every N steps and leaves numerics.jsonl (one line per inspected step) and the histogram
// figure in the output directory.
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>
#include <sstream>

#include "halfgrad/data/dataset.h"
#include "tests/demos/run_program.h"
#include "tests/temp_dir.h"

namespace hg {

TEST_CASE("halfgrad train --inspect writes the numerics table, JSONL and figure", "[demo][cli]") {
  testing::TempDir dir("inspect_flag");
  data::write_tsv(data::synthetic_dataset(200, 3, 5), dir / "train.tsv");
  const testing::ProgramResult r = testing::run_program(
      "halfgrad",
      "train --train " + (dir / "train.tsv") +
          " --tokenizer bytes --max-steps 6 --batch-size 32 --d-model 32 --heads 2 --layers 1 --d-ff 64 --max-len 16"
          " --save-strategy no --threads 1 --inspect 3 --output-dir " +
          (dir / "out"));
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  // The command's default, fp16 O2 with dynamic loss scaling from 2^16: every gradient the table
  // shows is 65536 times the true one, and the header says so (no step overflows in 6).
  CHECK_THAT(r.output, Catch::Contains("numerics at step 3, gradients scaled by the loss scale 65536\n"));
  CHECK_THAT(r.output, Catch::Contains("numerics at step 6"));
  CHECK_THAT(r.output, Catch::Contains("headroom: doublings from absmax to fp16's max 65504"));
  CHECK_THAT(r.output, Catch::Contains("head.weight"));
  std::istringstream lines(testing::read_bytes(dir.path / "out" / "numerics.jsonl"));
  int n = 0;
  for (std::string line; std::getline(lines, line); ++n) {
    const nlohmann::json j = nlohmann::json::parse(line);
    CHECK(j.at("step") == 3 * (n + 1));
    CHECK(j.at("tensors").size() > 10);
  }
  CHECK(n == 2);
  const std::string svg = testing::read_bytes(dir.path / "out" / "numerics-grad-histogram.svg");
  CHECK_THAT(svg, Catch::EndsWith("</svg>\n"));
  CHECK_THAT(svg, Catch::Contains("scaled by S = 65536 (the loss scale)"));
}

TEST_CASE("halfgrad train --inspect-mx adds what MXFP8 and MXFP4 keep of each tensor", "[demo][cli]") {
  testing::TempDir dir("inspect_mx_flag");
  data::write_tsv(data::synthetic_dataset(200, 3, 5), dir / "train.tsv");
  const std::string run = "train --train " + (dir / "train.tsv") +
                          " --tokenizer bytes --max-steps 2 --batch-size 32 --d-model 32 --heads 2 --layers 1 --d-ff 64"
                          " --max-len 16 --save-strategy no --threads 1 --output-dir " +
                          (dir / "out");
  const testing::ProgramResult alone = testing::run_program("halfgrad", run + " --inspect-mx");
  INFO(alone.output);
  CHECK(alone.exit_code != 0);
  CHECK_THAT(alone.output, Catch::Contains("--inspect-mx") && Catch::Contains("--inspect N"));

  const testing::ProgramResult r = testing::run_program("halfgrad", run + " --inspect 2 --inspect-mx");
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.output, Catch::Contains("mx8 err") && Catch::Contains("mx4 err"));
  std::istringstream lines(testing::read_bytes(dir.path / "out" / "numerics.jsonl"));
  std::string line;
  REQUIRE(std::getline(lines, line));
  const nlohmann::json j = nlohmann::json::parse(line);
  int measured = 0;
  for (const nlohmann::json& t : j.at("tensors")) {
    if (!t.contains("mxfp8")) continue;
    ++measured;
    // MXFP4 never keeps more of a tensor than MXFP8: per block, X4 = floor(log2 amax) - 2 and
    // X8 = X4 - 6, and every e2m1 value {0.5, 1, 1.5, 2, 3, 4, 6} * 2^X4 is an e4m3 value times
    // 2^X8 (2^5, 2^6, 1.5 * 2^6, ..., 1.5 * 2^8 = 384 <= 448), with e4m3 clamping higher (7 * 2^X4).
    // Rounding to the nearest point of a superset errs no more, element by element.
    CHECK(t.at("mxfp8").at("rms_relative_error").get<double>() >= 0.0);
    CHECK(t.at("mxfp4").at("rms_relative_error").get<double>() >= t.at("mxfp8").at("rms_relative_error").get<double>());
  }
  CHECK(measured > 10);
}

}  // namespace hg
