// Philox4x32-10 (Salmon et al., SC 2011): one block (hg::philox4x32, the scalar reference) and
// the words of many consecutive blocks in bulk, one block per SIMD lane, equal word for word.
// Generator (halfgrad/autograd/generator.h) draws through the bulk form: one scalar block costs ten
// dependent rounds of two 32x32 -> 64-bit products, and dropout masks draw one word per element.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

namespace hg {

// One Philox4x32-10 block: 4 random words for a 128-bit counter under a 64-bit key.
constexpr std::array<uint32_t, 4> philox4x32(std::array<uint32_t, 4> c, uint64_t key) {
  // Constants from the Random123 reference implementation.
  constexpr uint32_t kMul0 = 0xD2511F53, kMul1 = 0xCD9E8D57;
  constexpr uint32_t kWeyl0 = 0x9E3779B9, kWeyl1 = 0xBB67AE85;
  uint32_t k0 = uint32_t(key), k1 = uint32_t(key >> 32);
  for (int round = 0; round < 10; ++round) {
    const uint64_t p0 = uint64_t(kMul0) * c[0];
    const uint64_t p1 = uint64_t(kMul1) * c[2];
    c = {uint32_t(p1 >> 32) ^ c[1] ^ k0, uint32_t(p1), uint32_t(p0 >> 32) ^ c[3] ^ k1, uint32_t(p0)};
    k0 += kWeyl0;
    k1 += kWeyl1;
  }
  return c;
}

}  // namespace hg

namespace hg::kernels {

// words[4 * i + w] = word w of philox4x32({uint32_t(b), uint32_t(b >> 32), 0, 0}, key), the
// block of counter b = first + i, for i < blocks.
void philox_blocks(uint32_t* words, uint64_t key, uint64_t first, size_t blocks);

}  // namespace hg::kernels
