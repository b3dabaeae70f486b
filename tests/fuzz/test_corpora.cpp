// The committed fuzz corpora (fuzz/corpus/<target>/), replayed through the fuzz targets
// (fuzz/<target>.h): every input must be accepted or rejected with an hg::Error, as under
// libFuzzer; a target aborts on anything else, and the sanitized tree runs these cases under
// ASan + UBSan, so a leak, overflow or undefined behaviour that an input reaches fails here too.
// The corpora hold the inputs that `scripts/fuzz.sh --explore` found to reach new code, merged in
// with `scripts/fuzz.sh --merge` (docs/robustness.md, "Fuzzing").
#include <catch2/catch.hpp>
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "fuzz/checkpoint_json.h"
#include "fuzz/cli_parser.h"
#include "fuzz/safetensors_reader.h"
#include "fuzz/tsv_reader.h"
#include "tests/temp_dir.h"

namespace hg {
namespace {

// Runs `target` on every file of fuzz/corpus/<name>/, in name order; returns how many there were.
size_t replay_corpus(const std::string& name, int (*target)(const uint8_t*, size_t)) {
  const std::filesystem::path dir = std::filesystem::path(HALFGRAD_SOURCE_DIR) / "fuzz" / "corpus" / name;
  std::vector<std::filesystem::path> files;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) files.push_back(entry.path());
  std::sort(files.begin(), files.end());
  for (const std::filesystem::path& file : files) {
    const std::string bytes = testing::read_bytes(file);
    INFO("input " << file.string());  // reported with the test if the target aborts
    CHECK(target(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()) == 0);
  }
  return files.size();
}

TEST_CASE("fuzz corpus: tsv_reader replays cleanly", "[fuzz][data]") {
  CHECK(replay_corpus("tsv_reader", fuzz::tsv_reader) > 0);
}

TEST_CASE("fuzz corpus: safetensors_reader replays cleanly", "[fuzz][io]") {
  CHECK(replay_corpus("safetensors_reader", fuzz::safetensors_reader) > 0);
}

TEST_CASE("fuzz corpus: checkpoint_json replays cleanly", "[fuzz][train]") {
  CHECK(replay_corpus("checkpoint_json", fuzz::checkpoint_json) > 0);
}

TEST_CASE("fuzz corpus: cli_parser replays cleanly", "[fuzz][cli]") {
  CHECK(replay_corpus("cli_parser", fuzz::cli_parser) > 0);
}

}  // namespace
}  // namespace hg
