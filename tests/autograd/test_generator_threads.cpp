// Generator fills split across threads above kParallelRandomElements (halfgrad/base/parallel.h): the values
// must not depend on the thread count or on being drawn inside a caller's OpenMP team.
#include <omp.h>

#include <catch2/catch.hpp>
#include <cstdint>
#include <cstring>
#include <vector>

#include "halfgrad/autograd/generator.h"
#include "halfgrad/base/parallel.h"

namespace hg {
namespace {

enum class Fill { kUniform, kNormal };

// Draws n values from Generator(seed 11, offset 1): an odd offset, so uniform's first and last
// Philox blocks are shared with counters outside the draw. No Catch2 assertions here: it also runs
// on OpenMP threads.
std::vector<float> draw(Fill fill, int64_t n) {
  Generator g(11, 1);
  std::vector<float> out(static_cast<size_t>(n));
  if (fill == Fill::kUniform) {
    g.uniform(out, -2.0f, 3.0f);
  } else {
    g.normal(out, 0.5f, 2.0f);
  }
  return out;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

}  // namespace

TEST_CASE("generator fills give the same bits on 1 and 2 threads and inside a caller's team", "[parallel][generator]") {
  const int saved = omp_get_max_threads();
  // Just above the threshold (a team of 2 opens; 3 extra elements leave uniform a partial block).
  const int64_t n = kParallelRandomElements + 3;
  for (const Fill fill : {Fill::kUniform, Fill::kNormal}) {
    INFO((fill == Fill::kUniform ? "uniform" : "normal"));
    omp_set_num_threads(1);
    const std::vector<float> one = draw(fill, n);
    omp_set_num_threads(2);
    const std::vector<float> two = draw(fill, n);
    std::vector<std::vector<float>> inside(2);
#pragma omp parallel num_threads(2)
    inside[size_t(omp_get_thread_num())] = draw(fill, n);
    CHECK(same_bits(one, two));
    CHECK(same_bits(one, inside[0]));
    CHECK(same_bits(one, inside[1]));
    if (fill == Fill::kUniform) {
      // Oracle: next_u32 reads the same counter -> word mapping one counter at a time, and
      // uniform maps a word's top 24 bits to [0, 1) exactly (generator.cpp unit_float).
      Generator serial(11, 1);
      int64_t wrong = 0;
      for (const float x : one) wrong += x != -2.0f + 5.0f * (float(serial.next_u32() >> 8) * 0x1.0p-24f);
      CHECK(wrong == 0);
    }
  }
  omp_set_num_threads(saved);
}

}  // namespace hg
