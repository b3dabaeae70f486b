// Counter-based random bits for stochastic rounding: element `index` of a cast with `seed` gets
// stochastic_bits(seed, index), a pure function of the two, so results are reproducible whatever
// the thread count, the chunking or the vector width. Not a general-purpose or cryptographic RNG.
// The vector encoder (convert-inl.h, StochasticBitsVec) computes the same bits lane by lane with
// 32-bit multiplies; tests compare the two.
#pragma once

#include <cstdint>

namespace hg::precision {

// Chris Wellons' "lowbias32" (hash-prospector, 2018): a bijective 32-bit mixer with a measured
// avalanche bias of ~0.17, built from xor-shifts and two 32-bit multiplies (SIMD-friendly).
constexpr uint32_t lowbias32(uint32_t x) {
  x ^= x >> 16;
  x *= 0x7FEB352Du;
  x ^= x >> 15;
  x *= 0x846CA68Bu;
  x ^= x >> 16;
  return x;
}

// The two 32-bit keys a 64-bit seed expands to (SplitMix64's finaliser, Steele et al. 2014), so
// neighbouring seeds give unrelated streams. Computed once per cast, not per element.
struct StochasticKey {
  uint32_t lo, hi;
};

constexpr StochasticKey stochastic_key(uint64_t seed) {
  uint64_t z = seed + 0x9E3779B97F4A7C15u;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9u;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBu;
  z ^= z >> 31;
  return {uint32_t(z), uint32_t(z >> 32)};
}

// Two keyed lowbias32 rounds over the index: the low word is hashed first, the high word (zero
// for any index below 2^32) enters the second round through an odd multiplier.
constexpr uint32_t stochastic_bits(StochasticKey key, uint64_t index) {
  const uint32_t x = lowbias32(uint32_t(index) ^ key.lo);
  return lowbias32(x ^ (uint32_t(index >> 32) * 0x9E3779B9u) ^ key.hi);
}

// Uniform 32-bit random bits for element `index` of the stream `seed`.
constexpr uint32_t stochastic_bits(uint64_t seed, uint64_t index) {
  return stochastic_bits(stochastic_key(seed), index);
}

}  // namespace hg::precision
