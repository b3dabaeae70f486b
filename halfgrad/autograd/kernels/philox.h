// Philox4x32-10 in bulk: the words of many consecutive blocks, one block per SIMD lane, equal
// word for word to hg::philox4x32 (halfgrad/autograd/generator.h), the scalar reference. Generator draws
// through it: one scalar block costs ten dependent rounds of two 32x32 -> 64-bit products, and
// dropout masks draw one word per element of an activation.
#pragma once

#include <cstddef>
#include <cstdint>

namespace hg::kernels {

// words[4 * i + w] = word w of philox4x32({uint32_t(b), uint32_t(b >> 32), 0, 0}, key), the
// block of counter b = first + i, for i < blocks.
void philox_blocks(uint32_t* words, uint64_t key, uint64_t first, size_t blocks);

}  // namespace hg::kernels
