// bench_checksum: the cost of the SHA-256 that checkpoint.json records per file (halfgrad/io/digest.h),
// on a checkpoint directory: hashing all its files (what a save adds after writing them, and what
// load_checkpoint adds before reading them), beside load_checkpoint as a whole for scale. The
// median and range of --rounds rounds (the files stay in the page cache after the first).
//   build/bin/bench_checksum halfgrad-output/checkpoint-660
#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <vector>

#include "halfgrad/io/checkpoint.h"
#include "halfgrad/io/digest.h"

namespace {

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

void report(const char* what, std::vector<double> times, double bytes) {
  std::sort(times.begin(), times.end());
  const double median = times[times.size() / 2];
  std::printf("%-28s median %.3f s (min %.3f, max %.3f), %.0f MB/s\n", what, median, times.front(), times.back(),
              bytes / median / 1e6);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"bench_checksum: SHA-256 of a checkpoint's files, and load_checkpoint, timed"};
  std::string dir;
  int rounds = 5;
  app.add_option("checkpoint", dir, "checkpoint directory")->required()->check(CLI::ExistingDirectory);
  app.add_option("--rounds", rounds, "timed rounds")->check(CLI::Range(1, 1000));
  CLI11_PARSE(app, argc, argv);
  double bytes = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) bytes += double(entry.file_size());
  std::vector<double> hash, load;
  for (int r = 0; r < rounds; ++r) {
    auto start = std::chrono::steady_clock::now();
    for (const auto& entry : std::filesystem::directory_iterator(dir)) hg::io::sha256_file(entry.path());
    hash.push_back(seconds_since(start));
    start = std::chrono::steady_clock::now();
    (void)hg::io::load_checkpoint(dir);  // includes the SHA-256 check of every file
    load.push_back(seconds_since(start));
  }
  std::printf("%s: %.1f MB in %zu files\n", dir.c_str(), bytes / 1e6,
              size_t(std::distance(std::filesystem::directory_iterator(dir), std::filesystem::directory_iterator())));
  report("sha256 of every file", hash, bytes);
  report("load_checkpoint (with it)", load, bytes);
}
