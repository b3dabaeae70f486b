// philox_blocks against hg::philox4x32 (itself tied to Random123's known answers in
// test_tensor.cpp) on every compiled target, and Generator's draws against their definition in
// generator.h, word by word from the scalar reference.
#include <omp.h>

#include <array>
#include <cmath>
#include <cstdint>
#include <numbers>
#include <vector>

#include "halfgrad/autograd/generator.h"
#include "halfgrad/autograd/kernels/philox.h"
#include "tests/autograd/kernels/kernel_test_util.h"

namespace hg::kernels {
namespace {

std::array<uint32_t, 4> reference_block(uint64_t key, uint64_t b) {
  return philox4x32({uint32_t(b), uint32_t(b >> 32), 0, 0}, key);
}

}  // namespace

TEST_CASE("philox_blocks gives hg::philox4x32's words for every block", "[philox]") {
  // Counters with a zero and a non-zero high word, and low words that wrap to zero inside a
  // vector (the carry the kernel leaves to the reference) and just before it.
  const std::vector<uint64_t> firsts = {
      0, 1, 5, 1000003, 0xFFFFFFFFull - 20, 0xFFFFFFFFull - 3, 0x1FFFFFFF0ull, 0x123456789ABCDEFull, ~uint64_t{0} - 40};
  const std::vector<uint64_t> keys = {0, 0x299f31d0a4093822ull, ~uint64_t{0}};
  test_util::for_each_target([&] {
    for (const uint64_t key : keys) {
      for (const uint64_t first : firsts) {
        // Up to 4 sets of 16 lanes a loop (64 blocks), then single vectors, then the reference.
        for (const size_t blocks : {size_t(0), size_t(1), size_t(3), size_t(16), size_t(17), size_t(40), size_t(64),
                                    size_t(65), size_t(130)}) {
          INFO("key " << key << ", first " << first << ", blocks " << blocks);
          std::vector<uint32_t> words(4 * blocks + 4, 0xDEADBEEFu);  // 4 sentinels after the end
          philox_blocks(words.data(), key, first, blocks);
          int64_t wrong = 0;
          for (size_t i = 0; i < blocks; ++i) {
            const auto expected = reference_block(key, first + i);
            for (size_t w = 0; w < 4; ++w) wrong += words[4 * i + w] != expected[w];
          }
          CHECK(wrong == 0);
          for (size_t w = 0; w < 4; ++w) CHECK(words[4 * blocks + w] == 0xDEADBEEFu);
        }
      }
    }
  });
}

// generator.h: uniform's counter c is word c % 4 of block c / 4, as 24 bits scaled into
// [low, high); normal's counter c is words 0 and 1 of block c through Box-Muller. Draws of
// unaligned offsets and lengths over several chunks, on 1 and 2 threads, equal those formulas.
TEST_CASE("Generator's draws are their definition over philox4x32, on any team", "[philox]") {
  const uint64_t seed = 0x0123456789ABCDEFull;
  for (const int threads : {1, 2}) {
    omp_set_num_threads(threads);
    for (const uint64_t offset : {uint64_t{0}, uint64_t{3}, uint64_t{4097}}) {
      for (const size_t n : {size_t(0), size_t(1), size_t(5), size_t(70001)}) {
        INFO(threads << " threads, offset " << offset << ", n " << n);
        Generator gen(seed, offset);
        std::vector<float> u(n);
        gen.uniform(u, -0.5f, 2.0f);
        CHECK(gen.offset() == offset + n);
        std::vector<float> z(n);
        gen.normal(z, 0.25f, 3.0f);
        int64_t wrong = 0;
        for (size_t i = 0; i < n; ++i) {
          const uint64_t c = offset + i;
          const uint32_t word = reference_block(seed, c / 4)[c % 4];
          const float expected_u = -0.5f + 2.5f * (float(word >> 8) * 0x1.0p-24f);
          const auto block = reference_block(seed, offset + n + i);
          const double u1 = (double(block[0] >> 8) + 1.0) * 0x1.0p-24, u2 = double(block[1] >> 8) * 0x1.0p-24;
          const float expected_z =
              float(0.25 + 3.0 * (std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * std::numbers::pi * u2)));
          wrong += test_util::bits(u[i]) != test_util::bits(expected_u);
          wrong += test_util::bits(z[i]) != test_util::bits(expected_z);
        }
        CHECK(wrong == 0);
        // uniform_at: the same [0, 1) values of any counters, serially, the offset untouched.
        std::vector<float> at(n), unit(n);
        Generator(seed, offset).uniform(unit);
        gen.uniform_at(at, offset);
        CHECK(gen.offset() == 2 * n + offset);
        CHECK(at == unit);
        gen.skip(7);
        CHECK(gen.offset() == 2 * n + offset + 7);
      }
    }
  }
  omp_set_num_threads(omp_get_num_procs());
}

}  // namespace hg::kernels
