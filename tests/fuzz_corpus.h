// Replays a committed fuzz corpus (fuzz/corpus/<name>/) through its fuzz target (fuzz/<name>.h):
// every input must be accepted or rejected with an hg::Error, as under libFuzzer; the target
// aborts on anything else, and in the sanitized tree a leak, overflow or undefined behaviour an
// input reaches fails the test too. The corpora hold what `scripts/fuzz.sh --explore` found to
// reach new code (docs/robustness.md, "Fuzzing").
#pragma once

#include <catch2/catch.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "tests/temp_dir.h"

namespace hg::testing {

// Runs `target` on every file of fuzz/corpus/<name>/, in name order; returns how many there were.
inline size_t replay_fuzz_corpus(const std::string& name, int (*target)(const uint8_t*, size_t)) {
  const std::filesystem::path dir = std::filesystem::path(HALFGRAD_SOURCE_DIR) / "fuzz" / "corpus" / name;
  std::vector<std::filesystem::path> files;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) files.push_back(entry.path());
  std::sort(files.begin(), files.end());
  for (const std::filesystem::path& file : files) {
    const std::string bytes = read_bytes(file);
    INFO("input " << file.string());  // reported with the test if the target aborts
    CHECK(target(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()) == 0);
  }
  return files.size();
}

}  // namespace hg::testing
