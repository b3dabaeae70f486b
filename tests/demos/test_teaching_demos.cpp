// The teaching demos as smoke tests: each runs a few training steps on a small test split
// (seconds), prints its explanation and tables, writes its SVG figures, and the numbers it
// prints say what the demo claims. The exact values are not pinned (they depend on every
// kernel); the relations are: flush-to-zero zeroes more activation gradients than gradual
// underflow and a loss scale undoes that, 1 + 2^-9 stays 1 in bf16 and bf16 loses more small
// updates than fp16, 70000 overflows fp16 but not bf16, delayed scaling flushes fewer fp8 values
// than scales of 1, e4m3 gradients lose more than e5m2 ones and unscaled e4m3 weight gradients
// err more against bf16 than scaled ones.
#include <catch2/catch.hpp>

#include <cmath>
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
      testing::run_program("loss_scaling", "--steps 8 --eval-size 20 --model small --out " + dir.path.string());
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.output, Catch::Contains("Loss scaling multiplies the loss by S"));
  // columns: final loss, test acc, zero grads, zero act.g, act.g ->0, skipped, final scale
  const std::vector<double> f32 = row(r.output, "f32"), plain = row(r.output, "fp16, no scaling"),
                            ftz = row(r.output, "fp16, no scaling, FTZ"), dynamic = row(r.output, "fp16, dynamic"),
                            fixed = row(r.output, "fp16, static 1024"),
                            ftz_scaled = row(r.output, "fp16, dynamic, FTZ"),
                            from32 = row(r.output, "fp16, dynamic from 2^32");
  for (const auto& v : {f32, plain, ftz, dynamic, fixed, ftz_scaled, from32}) {
    REQUIRE(v.size() == 7);
    CHECK(v[0] > 0.5);  // a cross-entropy over 7 classes after 8 steps: near log 7 = 1.95
    CHECK(v[0] < 2.5);
    CHECK(v[1] >= 0.0);
    CHECK(v[1] <= 100.0);
  }
  CHECK(ftz[3] > plain[3]);       // zero activation-gradient share: FTZ flushes the subnormals
  CHECK(plain[3] > dynamic[3]);   // and the unscaled run loses more than the scaled one
  CHECK(ftz_scaled[3] < ftz[3]);  // the scale lifts them above fp16's subnormals: FTZ keeps them
  CHECK(f32[4] > 0.0);            // some f32 activation gradients lie below fp16's range
  CHECK(plain[6] == 1.0);         // no scaler: scale 1
  CHECK(fixed[6] == 1024.0);
  // Gradients times 2^32 exceed fp16's 65504 (a loss near 2 has output gradients near 1/64):
  // the first step overflows, is skipped and halves the scale; every skip halves it once (no
  // growth within 2000 steps). "final scale" is the one the last step ran with: the halvings of
  // the skips before it, all of them or all but the last step's own.
  CHECK(from32[5] >= 1.0);
  const double last = std::log2(from32[6]);  // printed with %g: 6 digits
  CHECK((last == Approx(32 - from32[5]).margin(1e-5) || last == Approx(33 - from32[5]).margin(1e-5)));
  CHECK_THAT(r.output, Catch::Contains("Without flush-to-zero no failure was found on this model"));
  check_svg(dir.path / "loss_scaling-loss.svg", "class=\"series\"");
  check_svg(dir.path / "loss_scaling-scale.svg", "log2 (loss scale)");
  check_svg(dir.path / "loss_scaling-scale.svg", "class=\"marker\"");  // the skipped steps
}

TEST_CASE("master_weights demo: pure 16-bit runs beside f32 masters, with bytes and lost updates", "[demo][program]") {
  testing::TempDir dir("master_weights_demo");
  const testing::ProgramResult r = testing::run_program(
      "master_weights", "--steps 6 --seeds 1 --eval-size 20 --model small --out " + dir.path.string());
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  // bf16 keeps 8 significant bits: 1 + 2^-9 is below half its ulp at 1 (2^-8), 1 + 2^-7 is the next
  // value; fp16 (11 bits) keeps 1 + 2^-9, and 1 + 2^-11 is its tie that rounds to 1.
  CHECK(std::regex_search(r.output, std::regex(R"(1 \+ 2\^-9\s+1\s+update lost\s+1.001953125\s+update kept)")));
  CHECK(std::regex_search(r.output, std::regex(R"(1 \+ 2\^-7\s+1.0078125\s+update kept)")));
  CHECK(std::regex_search(r.output, std::regex(R"(1 \+ 2\^-11\s+1\s+update lost\s+1\s+update lost)")));
  // columns: bytes, test acc, final loss, vs masters, per-seed test acc
  std::vector<double> lost;
  for (const std::string f : {"bf16", "fp16"}) {
    const std::vector<double> masters = row(r.output, f + ", f32 masters"),
                              nearest = row(r.output, "pure " + f + ", nearest"),
                              sr = row(r.output, "pure " + f + ", stochastic"),
                              kahan = row(r.output, "pure " + f + ", Kahan");
    for (const auto& v : {masters, nearest, sr, kahan}) {
      REQUIRE(v.size() == 5);
      CHECK(v[2] > 0.5);  // a cross-entropy over 7 classes after 6 steps: near log 7 = 1.95
      CHECK(v[2] < 2.5);
      CHECK(v[3] == Approx(v[1] - masters[1]).margin(0.011));  // vs masters, both printed to 0.005
      CHECK(v[4] == v[1]);                                     // one seed: the mean is that seed
    }
    CHECK(masters[0] == (f == "bf16" ? 4.0 : 6.0));  // f32 weights; f16 model + f32 master
    CHECK(nearest[0] == 2.0);
    CHECK(sr[0] == 2.0);
    CHECK(kahan[0] == 4.0);  // the 16-bit compensation buffer
    std::smatch m;
    REQUIRE(std::regex_search(
        r.output, m, std::regex("nonzero updates \\(seed 0\\), ([0-9.]+)% are below half an ulp of the " + f)));
    lost.push_back(std::stod(m[1]));
    CHECK_THAT(r.output, Catch::Contains("Finding (" + f + ", mean of 1 seeds"));
    check_svg(dir.path / ("master_weights-" + f + "-loss.svg"), "Pure " + f + " vs f32 masters");
    check_svg(dir.path / ("master_weights-" + f + "-update-ratio.svg"), "round away in " + f);
  }
  // bf16's relative half-ulp is 2^3 times fp16's, so of the same kind of updates it loses more.
  CHECK(lost[0] > lost[1]);
  CHECK(lost[1] > 0.0);
}

TEST_CASE("formats demo: the value table and a short run under each autocast dtype", "[demo][program]") {
  testing::TempDir dir("formats_demo");
  const testing::ProgramResult r =
      testing::run_program("formats", "--steps 4 --eval-size 20 --out " + dir.path.string());
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
  // What each format keeps of a gradient-like vector (columns: rms rel err, flushed, clamped): fp16's
  // 11 bits err less than bf16's 8; e4m3 (nothing below 2^-9) flushes far more than MXFP8 e4m3,
  // whose scale per block of 32 moves the range to the block.
  check_svg(dir.path / "formats-keep.svg", "Range decides what is lost");
  const std::vector<double> f16 = row(r.output, "f16"), bf16 = row(r.output, "bf16"), e4m3 = row(r.output, "e4m3"),
                            mxfp8 = row(r.output, "mxfp8_e4m3");
  REQUIRE(f16.size() == 3);
  REQUIRE(bf16.size() == 3);
  REQUIRE(e4m3.size() == 3);
  REQUIRE(mxfp8.size() == 3);
  CHECK(f16[0] < bf16[0]);
  CHECK(e4m3[1] > 10 * mxfp8[1]);
  // The last sentence agrees with loss_scaling: unscaled fp16 fails only under flush-to-zero.
  CHECK_THAT(r.output, Catch::Contains("loss_scaling trains unscaled fp16 as well as fp32 with gradual underflow"));
}

TEST_CASE("fp8 demo: delayed scaling flushes fewer fp8 gradients and weights than scales of 1", "[demo][program]") {
  testing::TempDir dir("fp8_demo");
  // Steps 0 and 2 inspected: at step 0 every scale is still 1, at step 2 the delayed scales apply.
  const testing::ProgramResult r = testing::run_program(
      "fp8", "--steps 3 --seeds 1 --inspect-every 2 --eval-size 20 --model small --out " + dir.path.string());
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.output, Catch::Contains("Transformer Engine multiplies each GEMM operand by\nits own scale"));
  // columns: final loss, test acc, x ->0%, W ->0%, dY ->0%, saturated ("n/a" without fp8 casts), per-seed acc
  const std::vector<double> bf16 = row(r.output, "bf16"), hybrid = row(r.output, "hybrid, no scaling"),
                            hybrid_scaled = row(r.output, "hybrid, delayed scaling"),
                            plain = row(r.output, "e4m3, no scaling"), scaled = row(r.output, "e4m3, delayed scaling");
  REQUIRE(bf16.size() == 3);
  for (const auto& v : {hybrid, hybrid_scaled, plain, scaled}) REQUIRE(v.size() == 7);
  for (const auto& v : {bf16, hybrid, hybrid_scaled, plain, scaled}) {
    CHECK(v[0] > 0.5);  // a cross-entropy over 7 classes after 3 steps: near log 7 = 1.95
    CHECK(v[0] < 2.5);
  }
  CHECK(hybrid[4] > 1.0);               // e5m2 holds nothing below 2^-16: unscaled gradients are lost
  CHECK(hybrid_scaled[4] < hybrid[4]);  // the grad_output scales lift them into range
  CHECK(plain[4] > hybrid[4]);          // e4m3 holds nothing below 2^-9: it loses more than e5m2
  CHECK(scaled[4] < plain[4]);
  CHECK(scaled[3] < plain[3]);  // and the weight scales lift small weights above e4m3's 2^-9
  CHECK(plain[5] == 0.0);       // nothing reaches 448 unscaled
  // Per tensor: the classifier head's output gradient, and the finding in one sentence.
  const std::regex head_row(R"(\nhead\s+grad_output\s+[0-9.]+\s+[0-9.]+\s+[0-9.]+\s+[0-9.]+\s+\d)");
  CHECK(std::regex_search(r.output, head_row));
  CHECK_THAT(r.output, Catch::Contains("Finding (mean of 1 seeds): with e4m3 gradients and no scaling, fp8 flushed"));
  // Saturation with an amax history of 1 step: the run trains (same columns as above), and of its
  // two inspected steps only step 2 can saturate -- step 0 casts with scale 1, and nothing of this
  // model reaches 448 unscaled (plain[5] above). Columns: steps with saturation "k of n", the worst
  // step's share, x, W, dY shares (%), test acc.
  const std::vector<double> short_history = row(r.output, "e4m3, history 1");
  REQUIRE(short_history.size() == 7);
  CHECK(short_history[0] > 0.5);
  CHECK(short_history[0] < 2.5);
  std::smatch m;
  const std::regex saturation_row(
      R"(\ne4m3, history 1\s+(\d+) of (\d+)\s+([0-9.]+)\s+([0-9.]+)\s+([0-9.]+)\s+([0-9.]+)\s+([0-9.]+)%)");
  REQUIRE(std::regex_search(r.output, m, saturation_row));
  CHECK(std::stoi(m[2]) == 2);
  CHECK(std::stoi(m[1]) <= 1);
  for (int i = 3; i <= 6; ++i) {
    CHECK(std::stod(m[i]) >= 0.0);
    CHECK(std::stod(m[i]) <= 100.0);
  }
  CHECK_THAT(r.output, Catch::Contains("Finding (saturation, mean of 1 seeds): "));
  // Weight-gradient error against bf16 per linear layer (columns: hybrid 1, hybrid ds, e4m3 1,
  // e4m3 ds): every fp8 recipe differs from bf16 (e4m3 keeps 4 significant bits, e5m2 3, bf16 8),
  // and unscaled e4m3, which flushes the output gradients below 2^-9, errs more than scaled e4m3,
  // whose own error is the rounding of 4 bits (2^-4 per element at most, less after the sums).
  const size_t table = r.output.find("\nlayer  ");
  REQUIRE(table != std::string::npos);
  std::istringstream lines(r.output.substr(r.output.find('\n', table + 1) + 1));
  int layers = 0;
  for (std::string line; std::getline(lines, line) && !line.empty(); ++layers) {
    INFO(line);
    const std::regex errors(R"(^\S+\s+([0-9.]+)\s+([0-9.]+)\s+([0-9.]+)\s+([0-9.]+)$)");
    REQUIRE(std::regex_search(line, m, errors));
    for (int i = 1; i <= 4; ++i) CHECK(std::stod(m[i]) > 0.0);
    CHECK(std::stod(m[3]) > std::stod(m[4]));
    CHECK(std::stod(m[4]) < 0.25);
  }
  CHECK(layers == 7);  // the small model's q, k, v and out projections, two feed-forward layers, the head
  CHECK_THAT(r.output, Catch::Contains("Finding (gradients): the relative error of a layer's weight gradient"));
  check_svg(dir.path / "fp8-loss.svg", "class=\"series\"");
  check_svg(dir.path / "fp8-lost.svg", "class=\"bar\"");
  check_svg(dir.path / "fp8-scale.svg", "log2 (scale of dY)");
  check_svg(dir.path / "fp8-saturation.svg", "values saturated (%)");
  check_svg(dir.path / "fp8-grad-error.svg", "class=\"bar\"");
}

}  // namespace hg
