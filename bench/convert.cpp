// bench_convert: throughput of the span conversions in halfgrad/precision/convert.h (f32 <-> f16, bf16,
// e4m3, e5m2, round_to, plus stochastic rounding and stats-collecting variants), on an L2-sized
// and a DRAM-sized f32 buffer, with 1 and 2 OpenMP threads. One JSON object per line:
//   {"bench":"convert","op":"f32_to_f16","size":"L2","threads":1,"gbps":...,...}
// gbps counts bytes read plus bytes written per second (f32_to_f16: 4 + 2 bytes an element), the
// median over timed batches; gbps_best is the fastest batch. Spans shorter than
// kParallelConvertElements (halfgrad/base/parallel.h, 64 Ki elements) run on one thread whatever --threads says.
#include <omp.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <hwy/targets.h>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "bench/targets.h"
#include "halfgrad/precision/convert.h"

namespace {

using namespace hg::precision;
using Clock = std::chrono::steady_clock;

struct Op {
  std::string name;
  size_t bytes_per_element;  // read + written
  std::function<void()> run;
};

struct Timing {
  double median_seconds, best_seconds;  // per call
};

// Calls fn in batches of at least ~2 ms until min_seconds have passed (and 5 batches at least).
Timing measure(const std::function<void()>& fn, double min_seconds) {
  fn();  // warm up: page faults, caches, dispatch
  size_t calls = 1;
  for (;;) {
    const auto start = Clock::now();
    for (size_t i = 0; i < calls; ++i) fn();
    if (std::chrono::duration<double>(Clock::now() - start).count() > 2e-3 || calls > (1u << 20)) break;
    calls *= 2;
  }
  std::vector<double> per_call;
  const auto begin = Clock::now();
  while (per_call.size() < 5 || std::chrono::duration<double>(Clock::now() - begin).count() < min_seconds) {
    const auto start = Clock::now();
    for (size_t i = 0; i < calls; ++i) fn();
    per_call.push_back(std::chrono::duration<double>(Clock::now() - start).count() / double(calls));
  }
  std::sort(per_call.begin(), per_call.end());
  return {per_call[per_call.size() / 2], per_call.front()};
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Throughput of halfgrad's f32 <-> f16/bf16/fp8 conversions (JSON lines)"};
  std::vector<std::string> sizes{"L2", "DRAM"};
  std::vector<int> threads{1, 2};
  std::vector<std::string> only;
  size_t l2_kib = 64, dram_mib = 256;
  double min_seconds = 0.5;
  std::string target = "best";
  app.add_option("--sizes", sizes, "buffer sizes to run: L2, DRAM")->check(CLI::IsMember({"L2", "DRAM"}));
  app.add_option("--threads", threads, "OpenMP thread counts")->check(CLI::PositiveNumber);
  app.add_option("--ops", only, "run only these ops (default: all)");
  app.add_option("--l2-kib", l2_kib, "f32 buffer size of the L2 case, KiB");
  app.add_option("--dram-mib", dram_mib, "f32 buffer size of the DRAM case, MiB");
  app.add_option("--min-time", min_seconds, "seconds of timed batches per measurement");
  app.add_option("--target", target, "Highway target: best, AVX3, AVX2, SSE4, SCALAR");
  CLI11_PARSE(app, argc, argv);

  if (!hg::bench::restrict_targets(target, false)) {
    std::fprintf(stderr, "bench_convert: target %s is not compiled in or not supported here\n", target.c_str());
    return 2;
  }
  const std::string target_name = hwy::TargetName(hwy::SupportedAndGeneratedTargets().front());

  for (const std::string& size : sizes) {
    const size_t n = (size == "L2" ? l2_kib << 10 : dram_mib << 20) / sizeof(float);
    // Activation-like data: normal values, a few orders of magnitude either side of 1e-2.
    std::vector<float> src(n), values(n), back(n);
    std::mt19937 rng(1);
    std::normal_distribution<float> normal(0.0f, 1e-2f);
    for (float& x : src) x = normal(rng);
    std::vector<uint16_t> f16(n), bf16(n);
    std::vector<uint8_t> e4m3(n), e5m2(n);
    encode(kBinary16, src, f16);
    encode(kBFloat16, src, bf16);
    encode(kE4M3, src, e4m3);
    encode(kE5M2, src, e5m2);
    NumericsStats stats;
    const ConvertOptions stochastic{.rounding = {.mode = Rounding::kStochastic}, .seed = 1};
    const ConvertOptions counting{.stats = &stats};

    const std::vector<Op> ops = {
        {"f32_to_f16", 6, [&] { encode(kBinary16, src, f16); }},
        {"f16_to_f32", 6, [&] { decode(kBinary16, f16, back); }},
        {"f32_to_bf16", 6, [&] { encode(kBFloat16, src, bf16); }},
        {"bf16_to_f32", 6, [&] { decode(kBFloat16, bf16, back); }},
        {"f32_to_e4m3", 5, [&] { encode(kE4M3, src, e4m3); }},
        {"e4m3_to_f32", 5, [&] { decode(kE4M3, e4m3, back); }},
        {"f32_to_e5m2", 5, [&] { encode(kE5M2, src, e5m2); }},
        {"e5m2_to_f32", 5, [&] { decode(kE5M2, e5m2, back); }},
        // round_to works in place; re-rounding rounded values takes the same path, so the
        // buffer is filled once and then rounded repeatedly.
        {"round_to_f16", 8, [&] { round_to(kBinary16, values); }},
        {"round_to_bf16", 8, [&] { round_to(kBFloat16, values); }},
        {"round_to_e4m3", 8, [&] { round_to(kE4M3, values); }},
        {"f32_to_f16_stochastic", 6, [&] { encode(kBinary16, src, f16, stochastic); }},
        {"f32_to_bf16_stochastic", 6, [&] { encode(kBFloat16, src, bf16, stochastic); }},
        {"f32_to_f16_stats", 6, [&] { encode(kBinary16, src, f16, counting); }},
    };
    for (const Op& op : ops) {
      if (!only.empty() && std::find(only.begin(), only.end(), op.name) == only.end()) continue;
      for (const int t : threads) {
        omp_set_num_threads(t);
        values = src;
        const Timing timing = measure(op.run, min_seconds);
        const double bytes = double(n) * double(op.bytes_per_element);
        auto gbps = [&](double seconds) { return std::round(bytes / seconds * 1e-7) / 100; };
        nlohmann::ordered_json line = {{"bench", "convert"},
                                       {"op", op.name},
                                       {"size", size},
                                       {"threads", t},
                                       {"gbps", gbps(timing.median_seconds)},
                                       {"gbps_best", gbps(timing.best_seconds)},
                                       {"elements", n},
                                       {"target", target_name}};
        std::printf("%s\n", line.dump().c_str());
        std::fflush(stdout);
      }
    }
  }
  return 0;
}
