// The teaching demos as smoke tests: each runs a few training steps on a small test split
// (seconds), prints its explanation and tables, writes its SVG figures, and the numbers it
// prints say what the demo claims. The exact values are not pinned (they depend on every
// kernel); the relations are: flush-to-zero zeroes more activation gradients than gradual
// underflow, 1 + 2^-11 stays 1 in fp16, 70000 overflows fp16 but not bf16, delayed scaling
// flushes fewer fp8 values than scales of 1.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>

#include "tests/demos/run_program.h"
#include "tests/temp_dir.h"

namespace hg {
namespace {

// The figure exists and looks like a complete SVG document with drawn content.
void check_svg(const std::filesystem::path& path, const std::string& element) {
  INFO(path.string());
  REQUIRE(std::filesystem::exists(path));
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  const std::string svg = text.str();
  CHECK(svg.rfind("<?xml", 0) == 0);
  CHECK_THAT(svg, Catch::Contains("<svg xmlns=\"http://www.w3.org/2000/svg\""));
  CHECK_THAT(svg, Catch::EndsWith("</svg>\n"));
  CHECK_THAT(svg, Catch::Contains(element));
}

// The numbers of a table row: "label  1.234  56.7%  ..." -> {1.234, 56.7, ...} (rows pad their
// label with at least two spaces, which prose lines starting with the same word do not).
std::vector<double> row(const std::string& output, const std::string& label) {
  const size_t at = output.find("\n" + label + "  ");
  if (at == std::string::npos) return {};
  const std::string line = output.substr(at + 1 + label.size(), output.find('\n', at + 1) - at - 1 - label.size());
  std::vector<double> values;
  const std::regex number(R"([-+0-9.e]+)");
  for (auto it = std::sregex_iterator(line.begin(), line.end(), number); it != std::sregex_iterator(); ++it) {
    values.push_back(std::stod(it->str()));
  }
  return values;
}

}  // namespace

TEST_CASE("loss_scaling demo: flush-to-zero loses more activation gradients than subnormals do", "[demo][program]") {
  testing::TempDir dir("loss_scaling_demo");
  const testing::ProgramResult r =
      testing::run_program("loss_scaling", "--steps 8 --eval-size 20 --out " + dir.path.string());
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.output, Catch::Contains("Loss scaling multiplies the loss by S"));
  // columns: final loss, test acc, zero grads, zero act.g, act.g ->0, skipped, final scale
  const std::vector<double> f32 = row(r.output, "f32"), plain = row(r.output, "fp16, no scaling"),
                            ftz = row(r.output, "fp16, no scaling, FTZ"), dynamic = row(r.output, "fp16, dynamic"),
                            fixed = row(r.output, "fp16, static 1024");
  REQUIRE(f32.size() == 7);
  REQUIRE(plain.size() == 7);
  REQUIRE(ftz.size() == 7);
  REQUIRE(dynamic.size() == 7);
  REQUIRE(fixed.size() == 7);
  for (const auto& v : {f32, plain, ftz, dynamic, fixed}) {
    CHECK(v[0] > 0.5);  // a cross-entropy over 7 classes after 8 steps: near log 7 = 1.95
    CHECK(v[0] < 2.5);
    CHECK(v[1] >= 0.0);
    CHECK(v[1] <= 100.0);
  }
  CHECK(ftz[3] > plain[3]);      // zero activation-gradient share: FTZ flushes the subnormals
  CHECK(plain[3] > dynamic[3]);  // and the unscaled run loses more than the scaled one
  CHECK(f32[4] > 0.0);           // some f32 activation gradients lie below fp16's range
  CHECK(plain[6] == 1.0);        // no scaler: scale 1
  CHECK(fixed[6] == 1024.0);
  check_svg(dir.path / "loss_scaling-loss.svg", "class=\"series\"");
  check_svg(dir.path / "loss_scaling-scale.svg", ">2^");
}

TEST_CASE("master_weights demo: small updates vanish in fp16 and the counts agree", "[demo][program]") {
  testing::TempDir dir("master_weights_demo");
  const testing::ProgramResult r =
      testing::run_program("master_weights", "--steps 8 --eval-size 20 --out " + dir.path.string());
  REQUIRE(r.exit_code == 0);
  CHECK(std::regex_search(r.output, std::regex(R"(1 \+ 2\^-11\s+1\s+update lost)")));
  CHECK(std::regex_search(r.output, std::regex(R"(1 \+ 1e-4\s+1\s+update lost)")));
  CHECK(std::regex_search(r.output, std::regex(R"(1 \+ 2\^-10\s+1.000976562\s+update kept)")));
  // columns: final loss, test acc, f16 weights unchanged per step
  const std::vector<double> pure = row(r.output, "pure fp16"), o2 = row(r.output, "O2, f32 masters");
  REQUIRE(pure.size() == 3);
  REQUIRE(o2.size() == 3);
  for (const auto& v : {pure, o2}) {
    CHECK(v[2] > 0.0);  // LayerNorm gains at 1 cannot move by a step of about lr = 1e-5
    CHECK(v[2] < 100.0);
  }
  // O2's updates by |u|/|w|: each row names a band, then its share in %.
  auto share = [&](const std::string& band) {
    const std::vector<double> v = row(r.output, band);
    REQUIRE(v.size() == 1);
    return v[0];
  };
  const double below = share("below 2^-12 (always lost)"), either = share("2^-12 to 2^-11 (either)"),
               kept = share("2^-11 and above (kept, w normal)"), zero_w = share("w = 0"),
               lost = share("lost in f16, counted exactly");
  // The bands split every nonzero update: the shares add up to 100% (4 values printed to 0.005).
  CHECK(below + either + kept + zero_w == Approx(100.0).margin(0.02));
  // |u| < 2^-12 |w| is below half an ulp for every f16 w (ulp(w)/|w| > 2^-11), so the exact count
  // holds at least that band. Adam's step is at most about lr = 1e-5, and 4% of weights drawn
  // with std 0.02 exceed 2^12 lr = 0.041, so some updates are lost from the first step on.
  CHECK(lost > 0.0);
  CHECK(lost >= below - 0.01);
  // The finding repeats the table's numbers.
  std::smatch finding;
  REQUIRE(std::regex_search(r.output, finding,
                            std::regex(R"(Finding: at AdamW lr 1e-05, ([0-9.]+)% of O2's updates[\s\S]*ends ([0-9.]+) accuracy points (below|above) O2)")));
  CHECK(std::stod(finding[1]) == lost);
  const double gap = (finding[3] == "below" ? 1 : -1) * std::stod(finding[2]);
  CHECK(gap == Approx(o2[1] - pure[1]).margin(0.011));  // three values printed to 0.005
  check_svg(dir.path / "master_weights-loss.svg", "class=\"series\"");
  check_svg(dir.path / "master_weights-update-ratio.svg", "round away in f16");
}

TEST_CASE("formats demo: the value table and a short run under each autocast dtype", "[demo][program]") {
  testing::TempDir dir("formats_demo");
  const testing::ProgramResult r = testing::run_program("formats", "--steps 4 --eval-size 20 --out " + dir.path.string());
  REQUIRE(r.exit_code == 0);
  // columns: fp32, fp16, bf16, e4m3, e5m2
  const std::vector<double> tiny = row(r.output, "1e-08"), pi = row(r.output, "3.14159");
  REQUIRE(tiny.size() == 5);
  CHECK(tiny[1] == 0.0);  // below fp16's smallest subnormal 2^-24
  CHECK(tiny[2] > 0.0);   // bf16 keeps fp32's exponent range
  REQUIRE(pi.size() == 5);
  CHECK(pi[1] == 3.14062);  // 3.140625: 11 significant bits
  CHECK(pi[2] == 3.14062);  // 3.140625 too: 8 bits happen to round to the same value
  CHECK(std::regex_search(r.output, std::regex(R"(\n70000\s+70000\s+inf\s+70144\s+nan\s+inf)")));
  for (const char* label : {"fp32", "fp16 O2, dynamic scale", "bf16 autocast"}) {
    const std::vector<double> v = row(r.output, label);
    REQUIRE(v.size() == 3);
    CHECK(v[0] > 0.5);
    CHECK(v[0] < 2.5);
  }
  check_svg(dir.path / "formats-loss.svg", "class=\"series\"");
}

TEST_CASE("fp8 demo: delayed scaling flushes fewer fp8 gradients and weights than scales of 1", "[demo][program]") {
  testing::TempDir dir("fp8_demo");
  // Steps 0 and 2 inspected: at step 0 every scale is still 1, at step 2 the delayed scales apply.
  const testing::ProgramResult r = testing::run_program(
      "fp8", "--steps 3 --inspect-every 2 --eval-size 20 --out " + dir.path.string());
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.output, Catch::Contains("Transformer\nEngine multiplies each GEMM operand by its own scale"));
  // columns: final loss, test acc, x ->0%, W ->0%, dY ->0%, saturated ("n/a" without fp8 casts)
  const std::vector<double> f32 = row(r.output, "f32"), bf16 = row(r.output, "bf16"),
                            plain = row(r.output, "fp8, no scaling"), scaled = row(r.output, "fp8, delayed scaling");
  REQUIRE(f32.size() == 2);
  REQUIRE(bf16.size() == 2);
  REQUIRE(plain.size() == 6);
  REQUIRE(scaled.size() == 6);
  for (const auto& v : {f32, bf16, plain, scaled}) {
    CHECK(v[0] > 0.5);  // a cross-entropy over 7 classes after 3 steps: near log 7 = 1.95
    CHECK(v[0] < 2.5);
  }
  CHECK(plain[4] > 1.0);         // e5m2 holds nothing below 2^-16: unscaled gradients are lost
  CHECK(scaled[4] < plain[4]);   // the grad_output scales lift them into range
  CHECK(scaled[3] < plain[3]);   // and the weight scales lift small weights above e4m3's 2^-9
  CHECK(plain[5] == 0.0);        // nothing reaches 448 unscaled
  // Per tensor: the classifier head's output gradient, and the finding in one sentence.
  const std::regex head_row(R"(\nhead\s+grad_output\s+[0-9.]+\s+[0-9.]+\s+[0-9.]+\s+[0-9.]+\s+\d)");
  CHECK(std::regex_search(r.output, head_row));
  CHECK_THAT(r.output, Catch::Contains("Finding: without scaling, fp8 flushed"));
  check_svg(dir.path / "fp8-loss.svg", "class=\"series\"");
  check_svg(dir.path / "fp8-lost.svg", "class=\"bar\"");
}

}  // namespace hg
