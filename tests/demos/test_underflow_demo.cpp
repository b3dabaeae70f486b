// The underflow demo as a smoke test: it runs, prints the range table, the example values'
// fates and the histograms, and its numbers say what the demo claims (scaling reduces the
// share of values flushed to zero, for the sample and for the classifier's real gradients,
// until 2^24 overflows some); the per-op table adds up to the headline share, the exact-zero
// weight gradients are the attention key biases, and the layers figure has a log2 axis, ops in
// forward order and those biases marked. Bad flags exit non-zero with a message.
#include <catch2/catch.hpp>

#include <map>
#include <regex>
#include <string>

#include "tests/demos/run_program.h"
#include "tests/temp_dir.h"

namespace hg {

TEST_CASE("underflow demo prints the format table, the example values and the histograms", "[demo][program]") {
  testing::TempDir dir("underflow_demo");
  const testing::ProgramResult r =
      testing::run_program("underflow", "--samples 20000 --seed 1 --steps 3 --eval-size 20 --out " + dir.path.string());
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
  CHECK(s0[0] + s0[1] > 0.0);  // unscaled: some activation gradients are zero or subnormal in fp16
  CHECK(s8[0] <= s0[0]);       // scaling never adds underflow ...
  CHECK(s8[1] < s0[1]);        // ... and lifts subnormals into the normal range
  CHECK(s16[0] + s16[1] < s0[0] + s0[1]);
  CHECK(s0[2] == 0.0);  // no overflow without a scale
  for (const char* figure : {"underflow-histogram.svg", "underflow-layers.svg"}) {
    const std::string svg = testing::read_bytes(dir.path / figure);
    CHECK_THAT(svg, Catch::StartsWith("<?xml"));
    CHECK_THAT(svg, Catch::EndsWith("</svg>\n"));
  }
  CHECK_THAT(testing::read_bytes(dir.path / "underflow-histogram.svg"), Catch::Contains("become zero in fp16"));

  // The per-op table: "  12 linear#3  262144  5.12%  2.345%  0.00%" for the top ops, then
  // "other N ops" and "all M ops". Its rows add up: elements and parts of the flushed total, and
  // the total's share is the unscaled act.g -> 0 of the loss scale table.
  const std::regex op_row(R"(\n\s*(\d*) +(\S+(?: \d+ ops)?) +(\d+) +([0-9.]+)% +([0-9.]+)% +([0-9.]+)%)");
  const size_t table_at = r.output.find("-- Where the flushed activation gradients come from");
  REQUIRE(table_at != std::string::npos);
  const std::string table_text = r.output.substr(table_at, r.output.find("-- Weight gradients", table_at) - table_at);
  long long elements = 0;
  double parts = 0;
  int rows = 0;
  bool saw_total = false;
  for (auto it = std::sregex_iterator(table_text.begin(), table_text.end(), op_row); it != std::sregex_iterator();
       ++it) {
    const std::smatch& row = *it;
    if (row[2].str().rfind("all ", 0) == 0) {
      CHECK(std::stoll(row[3]) == elements);
      CHECK(std::stod(row[5]) == Approx(parts).margin(0.001 * rows));
      CHECK(std::stod(row[4]) == Approx(s0[0]).margin(0.005));
      CHECK(std::stod(row[5]) == Approx(s0[0]).margin(0.005));
      CHECK(std::stod(row[6]) <= s16[0] + 0.005);
      saw_total = true;
      break;
    }
    elements += std::stoll(row[3]);
    parts += std::stod(row[5]);
    ++rows;
  }
  CHECK(rows >= 2);
  CHECK(saw_total);

  // Exact-zero weight gradients: only the attention key biases (softmax ignores a constant added
  // to all of a query's scores), each changed by more than 2^-10 when the loss is scaled by 3,
  // every other tensor by less.
  const size_t noise_at = r.output.find("-- Weight gradients whose exact value is zero --");
  REQUIRE(noise_at != std::string::npos);
  const std::string others = "every other weight gradient: change at most ";
  const size_t noise_end = r.output.find(others, noise_at);
  REQUIRE(noise_end != std::string::npos);
  const std::string noise_text = r.output.substr(noise_at, noise_end - noise_at);
  const std::regex noise_row(R"(\n(\S+) +([0-9.e+-]+) +([0-9.e+-]+) +([0-9.]+)%)");
  int noise = 0;
  for (auto it = std::sregex_iterator(noise_text.begin(), noise_text.end(), noise_row); it != std::sregex_iterator();
       ++it) {
    CHECK_THAT((*it)[1].str(), Catch::EndsWith("attn.k_proj.bias"));
    CHECK(std::stod((*it)[2]) > 1.0 / 1024);
    ++noise;
  }
  CHECK(std::stod(r.output.substr(noise_end + others.size())) < 1.0 / 1024);
  CHECK_THAT(r.output, Catch::Contains("Finding: unscaled, "));

  // The figure: a log2 axis, activation gradients per op in forward order (the inspector numbers
  // each op's outputs in forward order, so every op's numbers rise; a backward order would fall),
  // each k_proj.bias a dashed mark rather than a bar, and a dot for each zero share.
  const std::string layers = testing::read_bytes(dir.path / "underflow-layers.svg");
  CHECK_THAT(layers, Catch::Contains("log2 axis"));
  CHECK_THAT(layers, Catch::Contains(">2^-"));
  CHECK_THAT(layers, Catch::Contains("class=\"bar\""));
  CHECK_THAT(layers, Catch::Contains("class=\"zero\""));
  CHECK_THAT(layers, Catch::Contains(">exact gradient 0 (noise)</text>"));
  std::map<std::string, int> last;
  int ops = 0, repeated = 0, key_biases = 0;
  const std::regex category(R"re(rotate\(-90 [0-9.]+ [0-9.]+\)">([^<]+)</text>)re");
  for (auto it = std::sregex_iterator(layers.begin(), layers.end(), category); it != std::sregex_iterator(); ++it) {
    const std::string name = (*it)[1];
    key_biases += name.find("attn.k_proj.bias") != std::string::npos ? 1 : 0;
    const size_t hash = name.find('#');
    if (hash == std::string::npos) continue;
    const std::string op = name.substr(0, hash);
    const int k = std::stoi(name.substr(hash + 1));
    if (last.count(op)) {
      CHECK(k > last[op]);
      ++repeated;
    }
    last[op] = k;
    ++ops;
  }
  CHECK(repeated > 0);
  CHECK(key_biases >= 1);
  CHECK(noise == key_biases);
  size_t markers = 0;
  for (size_t pos = layers.find("class=\"marker\""); pos != std::string::npos;
       pos = layers.find("class=\"marker\"", pos + 1))
    ++markers;
  CHECK(markers == size_t(key_biases));
  CHECK_THAT(r.output, Catch::Contains("all " + std::to_string(ops) + " ops"));
}

TEST_CASE("underflow demo rejects bad flags with a message and an exit code", "[demo][program]") {
  const testing::ProgramResult r = testing::run_program("underflow", "--scale -1");
  CHECK(r.exit_code != 0);
  CHECK_THAT(r.output, Catch::Contains("--scale"));
}

}  // namespace hg
