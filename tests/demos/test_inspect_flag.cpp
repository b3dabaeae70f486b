// `halfgrad train --inspect N`: the NumericsInspector attached to the Trainer prints its table
// every N steps and leaves numerics.jsonl (one line per inspected step) and the histogram
// figure in the output directory.
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>
#include <sstream>

#include "data/dataset.h"
#include "tests/demos/run_program.h"
#include "tests/temp_dir.h"

namespace hg {

TEST_CASE("halfgrad train --inspect writes the numerics table, JSONL and figure", "[demo][cli]") {
  testing::TempDir dir("inspect_flag");
  data::write_tsv(data::synthetic_dataset(200, 3, 5), dir / "train.tsv");
  const testing::ProgramResult r = testing::run_program(
      "halfgrad", "train --train " + (dir / "train.tsv") +
                      " --tokenizer bytes --max-steps 6 --batch-size 32 --d-model 32 --heads 2 --layers 1 --d-ff 64 --max-len 16"
                      " --save-strategy no --threads 1 --inspect 3 --output-dir " + (dir / "out"));
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.output, Catch::Contains("numerics at step 3"));
  CHECK_THAT(r.output, Catch::Contains("numerics at step 6"));
  CHECK_THAT(r.output, Catch::Contains("head.weight"));
  std::istringstream lines(testing::read_bytes(dir.path / "out" / "numerics.jsonl"));
  int n = 0;
  for (std::string line; std::getline(lines, line); ++n) {
    const nlohmann::json j = nlohmann::json::parse(line);
    CHECK(j.at("step") == 3 * (n + 1));
    CHECK(j.at("tensors").size() > 10);
  }
  CHECK(n == 2);
  CHECK_THAT(testing::read_bytes(dir.path / "out" / "numerics-grad-histogram.svg"), Catch::EndsWith("</svg>\n"));
}

}  // namespace hg
