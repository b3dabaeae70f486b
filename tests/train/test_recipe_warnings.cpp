// The recipe warnings (halfgrad/train/recipe_warnings.h): when each fires, and that `halfgrad train` at its
// defaults on a 30-line file moves the loss, or says why not.
#include <catch2/catch.hpp>

#include <cmath>
#include <fstream>
#include <regex>

#include "tests/demos/run_program.h"
#include "tests/temp_dir.h"
#include "halfgrad/train/recipe_warnings.h"

namespace hg::train {
namespace {

TEST_CASE("warmup_warning fires exactly when the warmup covers every step", "[train][recipe]") {
  CHECK(warmup_warning(99, 100).empty());
  CHECK(warmup_warning(0, 0).empty());
  CHECK_THAT(warmup_warning(100, 100), Catch::Contains("the warmup (100 steps) covers all 100 optimizer steps"));
  CHECK_THAT(warmup_warning(100, 5), Catch::Contains("--warmup-ratio"));
}

TEST_CASE("stalled_loss_warning fires within 5 percent of ln K and not below", "[train][recipe]") {
  const double ln3 = std::log(3.0), bound = (1 - kStalledLossShare) * ln3;
  CHECK(stalled_loss_warning(std::nextafter(bound, 0.0), 3, 10, 2).empty());
  CHECK_THAT(stalled_loss_warning(bound, 3, 10, 2), Catch::Contains("ln(3) = 1.0986"));
  CHECK_THAT(stalled_loss_warning(ln3 + 0.5, 3, 10, 2), Catch::Contains("has not learned"));
  CHECK_THAT(stalled_loss_warning(ln3, 3, 10, 2), Catch::Contains("10 optimizer steps (2 an epoch)"));
  CHECK(stalled_loss_warning(ln3, 1, 10, 2).empty());  // one class: no uniform guess to compare with
  CHECK(stalled_loss_warning(std::nan(""), 3, 10, 2).empty());
}

// 30 lines of 3 classes, each class its own block of letters: learnable, but at the defaults
// (batch 256, 5 epochs) that is 5 optimizer steps.
void write_tiny_tsv(const std::string& path) {
  std::ofstream f(path);
  const char* words[3][10] = {{"aab", "aba", "baa", "abb", "bab", "bba", "aaa", "bbb", "abab", "baba"},
                              {"ccd", "cdc", "dcc", "cdd", "dcd", "ddc", "ccc", "ddd", "cdcd", "dcdc"},
                              {"eef", "efe", "fee", "eff", "fef", "ffe", "eee", "fff", "efef", "fefe"}};
  for (int i = 0; i < 10; ++i)
    for (int k = 0; k < 3; ++k) f << "class" << k << '\t' << words[k][i] << ' ' << words[k][(i + 3) % 10] << '\n';
}

TEST_CASE("halfgrad train at its defaults moves the loss on a 30-line file, and warns where it cannot",
          "[train][cli][recipe]") {
  testing::TempDir dir("recipe_tiny");
  write_tiny_tsv(dir / "train.tsv");
  const std::string train = "train --train " + (dir / "train.tsv") + " --save-strategy no --output-dir ";
  // The defaults: 5 steps (batch 256, 5 epochs), the first of them warmup (ceil(0.1 x 5)), so four
  // at the peak lr: the loss leaves ln 3 and nothing is said. (With a fixed 100-step warmup all
  // five steps ran at under 5% of the peak and the loss stayed at ln 3, silently.)
  const auto run = testing::run_program("halfgrad", train + (dir / "out"));
  INFO(run.output);
  REQUIRE(run.exit_code == 0);
  std::smatch m;
  REQUIRE(std::regex_search(run.output, m, std::regex(R"(train_loss ([0-9.]+) \(the mean loss)")));
  CHECK(std::stod(m[1]) < (1 - kStalledLossShare) * std::log(3.0));
  CHECK_THAT(run.output, !Catch::Contains("warning:"));
  // A learning rate too small to move it: the run says so, with the step count.
  const auto stalled = testing::run_program("halfgrad", train + (dir / "out2") + " --lr 1e-7");
  INFO(stalled.output);
  REQUIRE(stalled.exit_code == 0);
  CHECK_THAT(stalled.output, Catch::Contains("warning: the last epoch's train loss") &&
                                 Catch::Contains("5 optimizer steps (1 an epoch)"));
}

TEST_CASE("halfgrad train warns when --warmup-steps covers the whole run", "[train][cli][recipe]") {
  testing::TempDir dir("recipe_warmup");
  write_tiny_tsv(dir / "train.tsv");
  const auto run =
      testing::run_program("halfgrad", "train --train " + (dir / "train.tsv") +
                                           " --warmup-steps 100 --save-strategy no --output-dir " + (dir / "out"));
  INFO(run.output);
  REQUIRE(run.exit_code == 0);
  CHECK_THAT(run.output, Catch::Contains("warning: the warmup (100 steps) covers all 5 optimizer steps"));
}

}  // namespace
}  // namespace hg::train
