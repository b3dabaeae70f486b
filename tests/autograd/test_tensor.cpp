// Tensor storage and creation: real element widths, alignment, views sharing storage, rounding
// at creation, the counter-based generator's independence from the thread count.
#include <catch2/catch.hpp>

#include <omp.h>

#include <cstdint>
#include <span>

#include "halfgrad/autograd/generator.h"
#include "halfgrad/autograd/kernels/philox.h"
#include "halfgrad/autograd/rounding_scope.h"
#include "halfgrad/autograd/tensor.h"
#include "halfgrad/base/error.h"
#include "halfgrad/precision/half.h"

namespace hg {

TEST_CASE("tensors store elements at their real width, 64-byte aligned", "[tensor]") {
  for (DType t : {DType::f32, DType::f16, DType::bf16}) {
    Tensor x = Tensor::zeros({3, 5}, t);
    CHECK(x.nbytes() == 15 * element_size(t));
    CHECK(reinterpret_cast<uintptr_t>(x.bytes()) % 64 == 0);
  }
  CHECK(element_size(DType::f16) == 2);
}

TEST_CASE("creation rounds once to the dtype (nearest even)", "[tensor]") {
  // 1 + 2^-11 is the midpoint between 1 and 1 + 2^-10 in f16: ties to even -> 1.0 (0x3C00).
  Tensor x = Tensor::from_vector({1.0f + 0x1.0p-11f, 65520.0f, 1e-8f}, {3}, DType::f16);
  CHECK(x.u16()[0] == 0x3C00);
  CHECK(x.u16()[1] == 0x7C00);  // >= 65520 overflows to inf
  CHECK(x.u16()[2] == 0x0000);  // below 2^-25 underflows to +0
  CHECK(Tensor::full({2}, 3.0f, DType::bf16).u16()[1] == 0x4040);
  CHECK(Tensor::arange(4).to_vector() == std::vector<float>{0, 1, 2, 3});
}

TEST_CASE("reshape is a view sharing storage and clone is a copy", "[tensor]") {
  Tensor x = Tensor::arange(6);
  Tensor v = x.reshape({2, 3});
  Tensor c = x.clone();
  x.f32()[4] = 42.0f;
  CHECK(v.at({1, 1}) == 42.0f);
  CHECK(c.at({4}) == 4.0f);
  REQUIRE_THROWS_WITH(x.reshape({4, 2}), Catch::Contains("(6,)") && Catch::Contains("(4, 2)"));
}

TEST_CASE("element access checks shape and index", "[tensor]") {
  Tensor x = Tensor::zeros({2, 3});
  REQUIRE_THROWS_AS(x.at({2, 0}), Error);
  REQUIRE_THROWS_WITH(x.item(), Catch::Contains("6 elements"));
  REQUIRE_THROWS_WITH(Tensor::from_vector({1, 2}, {3}), Catch::Contains("2 values for shape (3,)"));
  REQUIRE_THROWS_WITH(Tensor::zeros({2}, DType::f16).f32(), Catch::Contains("f16"));
  // A dim out of range names the shape (streamed only on failure: shape[i] is on every op's path).
  REQUIRE_THROWS_WITH(x.shape()[2], Catch::Equals("Shape[]: dim 2 out of range for shape (2, 3)"));
  REQUIRE_THROWS_WITH(x.shape()[-3], Catch::Equals("Shape[]: dim -3 out of range for shape (2, 3)"));
  CHECK(x.shape()[-1] == 3);
}

TEST_CASE("storage writes: assign_nearest ignores the rounding scope, ScopedRounder honours it", "[tensor]") {
  // 3e-6 is an f16 subnormal: 3e-6 * 2^24 = 50.33 units of 2^-24, nearest 50 = 0x0032;
  // flush-to-zero makes it +0.
  const std::vector<float> tiny(4, 3e-6f);
  auto scope = RoundingScope::flush_to_zero();
  Tensor x = Tensor::zeros({4}, DType::f16).set_name("w");
  x.assign_nearest(std::span(tiny).first(2), 1);  // elements [1, 3)
  CHECK(std::vector<uint16_t>(x.u16().begin(), x.u16().end()) == std::vector<uint16_t>{0, 0x0032, 0x0032, 0});
  const ScopedRounder rounder(Tensor::zeros({4}, DType::f16));
  rounder.store(std::span(tiny).first(2), 1);
  CHECK(rounder.out().u16()[1] == 0x0000);
  std::vector<float> two(2);
  x.read(two, 2);
  CHECK(two == std::vector<float>{0x32p-24f, 0.0f});
  REQUIRE_THROWS_WITH(x.read(two, 3), Catch::Contains("'w'") && Catch::Contains("[3, 5)"));
  REQUIRE_THROWS_WITH(x.assign_nearest(tiny, 1), Catch::Contains("'w'") && Catch::Contains("[1, 5)"));
}

TEST_CASE("ScopedRounder: chunks stored in any split give the bits of one whole store", "[tensor]") {
  // Stochastic rounding draws element i's random bits from (seed, first event + i): how an op's
  // result is cut into chunks, and in which order they are stored, cannot change a bit.
  std::vector<float> values(1000);
  for (size_t i = 0; i < values.size(); ++i) values[i] = 1.0f + float(i) * 0x1.0p-17f;  // between f16 values
  const auto rounded = [&](std::initializer_list<size_t> cuts) {
    auto scope = RoundingScope::stochastic(7);
    const ScopedRounder rounder(Tensor::empty({1000}, DType::f16));
    size_t end = values.size();
    for (size_t first : cuts) {  // from the last chunk to the first
      rounder.store(std::span(values).subspan(first, end - first), int64_t(first));
      end = first;
    }
    return std::vector<uint16_t>(rounder.out().u16().begin(), rounder.out().u16().end());
  };
  const std::vector<uint16_t> whole = rounded({0});
  CHECK(rounded({999, 512, 3, 0}) == whole);
  {
    auto scope = RoundingScope::stochastic(7);
    const Tensor t = round_scoped(values, {1000}, DType::f16);
    CHECK(std::vector<uint16_t>(t.u16().begin(), t.u16().end()) == whole);
  }
  // Not vacuous: the scope's stochastic rounding was applied (nearest even differs).
  const Tensor nearest = Tensor::from_vector(values, {1000}, DType::f16);
  CHECK(std::vector<uint16_t>(nearest.u16().begin(), nearest.u16().end()) != whole);
}

TEST_CASE("Philox4x32-10 matches the Random123 known-answer vectors", "[tensor]") {
  // kat_vectors from Random123: philox4x32_10, counter 0 and key 0 ...
  CHECK(philox4x32({0, 0, 0, 0}, 0) == std::array<uint32_t, 4>{0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8});
  // ... and counter all ones, key all ones.
  CHECK(philox4x32({0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff}, 0xffffffffffffffffull) ==
        std::array<uint32_t, 4>{0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd});
  // ... and the digits of pi.
  CHECK(philox4x32({0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344}, 0x299f31d0a4093822ull) ==
        std::array<uint32_t, 4>{0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1});
}

TEST_CASE("random tensors do not depend on the thread count and continue the stream", "[tensor]") {
  auto draw = [](int threads) {
    omp_set_num_threads(threads);
    Generator gen(42);
    Tensor a = Tensor::randn({300000}, gen);
    Tensor b = Tensor::rand({10}, gen);
    return std::make_pair(a.to_vector(), b.to_vector());
  };
  const auto one = draw(1), two = draw(2);
  omp_set_num_threads(omp_get_num_procs());
  CHECK(one == two);
  CHECK(one.second != std::vector<float>(one.first.begin(), one.first.begin() + 10));
  // The sample moments of 300k normals: mean within 5 sigma (5/sqrt(n) = 0.009), variance
  // within 5 sigma of its standard error (sqrt(2/n) = 0.0026).
  double m = 0, v = 0;
  for (float x : one.first) m += x;
  m /= double(one.first.size());
  for (float x : one.first) v += (x - m) * (x - m);
  v /= double(one.first.size());
  CHECK(std::abs(m) < 0.009);
  CHECK(std::abs(v - 1.0) < 0.013);
}

}  // namespace hg
