// Philox4x32-10 and the distributions drawn from it. Parallel over chunks of blocks, computed in
// bulk by kernels::philox_blocks: every element's value is a function of its own counter, so the
// result is identical for any thread count.
#include "halfgrad/autograd/generator.h"

#include <algorithm>
#include <cmath>
#include <numbers>

#include "halfgrad/autograd/kernels/philox.h"
#include "halfgrad/base/parallel.h"

namespace hg {

namespace {

std::array<uint32_t, 4> block(uint64_t seed, uint64_t counter) {
  return philox4x32({uint32_t(counter), uint32_t(counter >> 32), 0, 0}, seed);
}

// 24 random bits to a float in [0, 1): exact, every value equally likely.
float unit_float(uint32_t bits) { return float(bits >> 8) * 0x1.0p-24f; }

// Blocks per chunk of a draw (kernels::philox_blocks): 4 KiB of words on a thread's stack.
constexpr uint64_t kChunkBlocks = 256;

// out[c - from] = low + width u(c) for the counters c in [from, to), serially, in bulk of
// kChunkBlocks blocks: counter c selects word c % 4 of block c / 4, so one Philox evaluation serves
// four elements and every value is a pure function of (seed, c).
void uniform_range(float* out, uint64_t seed, uint64_t from, uint64_t to, float low, float width) {
  uint32_t words[4 * kChunkBlocks];
  for (uint64_t b = from / 4; 4 * b < to; b += kChunkBlocks) {
    kernels::philox_blocks(words, seed, b, size_t(std::min<uint64_t>(kChunkBlocks, (to + 3) / 4 - b)));
    const uint64_t first = std::max(4 * b, from), last = std::min(4 * (b + kChunkBlocks), to);
    for (uint64_t c = first; c < last; ++c) out[c - from] = low + width * unit_float(words[c - 4 * b]);
  }
}

}  // namespace

void Generator::uniform(std::span<float> out, float low, float high) {
  // Chunks of whole blocks (the first and last may be partly outside the draw), in any order.
  if (out.empty()) return;
  const uint64_t base = offset_, end = offset_ + out.size(), span = 4 * kChunkBlocks;
  const int64_t chunks = int64_t((end + span - 1) / span - base / span);
  maybe_parallel(use_team(out.size(), kParallelRandomElements), [&] {
#pragma omp for schedule(static)
    for (int64_t chunk = 0; chunk < chunks; ++chunk) {
      const uint64_t from = std::max((base / span + uint64_t(chunk)) * span, base);
      const uint64_t to = std::min((base / span + uint64_t(chunk) + 1) * span, end);
      uniform_range(out.data() + (from - base), seed_, from, to, low, high - low);
    }
  });
  offset_ += out.size();
}

void Generator::uniform_at(std::span<float> out, uint64_t first) const {
  uniform_range(out.data(), seed_, first, first + out.size(), 0.0f, 1.0f);
}

void Generator::normal(std::span<float> out, float mean, float stddev) {
  const uint64_t base = offset_;
  const int64_t chunks = int64_t((out.size() + kChunkBlocks - 1) / kChunkBlocks);
  maybe_parallel(use_team(out.size(), kParallelRandomElements), [&] {
    uint32_t words[4 * kChunkBlocks];
#pragma omp for schedule(static)
    for (int64_t chunk = 0; chunk < chunks; ++chunk) {
      const size_t first = size_t(chunk) * kChunkBlocks, count = std::min<size_t>(kChunkBlocks, out.size() - first);
      kernels::philox_blocks(words, seed_, base + first, count);  // block c for element c
      for (size_t i = 0; i < count; ++i) {
        // Box-Muller on two words of the element's own block; u1 in (0, 1] keeps log finite.
        const double u1 = (double(words[4 * i] >> 8) + 1.0) * 0x1.0p-24;
        const double u2 = double(words[4 * i + 1] >> 8) * 0x1.0p-24;
        const double z = std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * std::numbers::pi * u2);
        out[first + i] = float(mean + stddev * z);
      }
    }
  });
  offset_ += out.size();
}

uint32_t Generator::next_u32() {  // the same counter -> word mapping as uniform()
  const uint64_t c = offset_++;
  return block(seed_, c / 4)[c % 4];
}

}  // namespace hg
