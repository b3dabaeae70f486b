// Generator: a counter-based random number generator (Philox4x32-10, Salmon et al., "Parallel
// random numbers: as easy as 1, 2, 3", SC 2011; the generator PyTorch and JAX use on GPUs).
// Element i of a draw is a pure function of (seed, offset + i), so a tensor's values do not
// depend on the thread count or the order of evaluation. uniform() and next_u32() take word c % 4
// of block c / 4 for counter c; normal() takes words 0 and 1 of block c (Box-Muller). The whole state is (seed,
// offset): saving those two numbers makes a run resumable bit for bit.
#pragma once

#include <array>
#include <cstdint>
#include <span>

namespace hg {

// One block is hg::philox4x32 (halfgrad/autograd/kernels/philox.h).

class Generator {
 public:
  explicit Generator(uint64_t seed = 0, uint64_t offset = 0) : seed_(seed), offset_(offset) {}

  uint64_t seed() const { return seed_; }
  uint64_t offset() const { return offset_; }  // counters used so far

  // Each draw uses counters offset .. offset + out.size() - 1, then advances the offset.
  void uniform(std::span<float> out, float low = 0.0f, float high = 1.0f);  // [low, high)
  // out[i] = the [0, 1) value of counter first + i, as uniform() draws it; const and serial, for
  // a caller that splits one draw between its own threads (reserve the counters with skip()).
  void uniform_at(std::span<float> out, uint64_t first) const;
  void skip(uint64_t counters) { offset_ += counters; }
  void normal(std::span<float> out, float mean = 0.0f, float stddev = 1.0f);
  // Raw words, for dropout masks and stochastic rounding seeds.
  uint32_t next_u32();

 private:
  uint64_t seed_;
  uint64_t offset_;
};

}  // namespace hg
