// CastObserver against counts derived by hand: an f16 multiply whose exact f32 products land in
// each region of fp16 (zero, underflow, subnormal, normal, overflow), a cast long enough to run
// on OpenMP's worker threads, and the rounding it observes left bit for bit unchanged.
#include <catch2/catch.hpp>

#include <vector>

#include "halfgrad/autograd/cast_observer.h"
#include "halfgrad/autograd/all_ops.h"

namespace hg {

TEST_CASE("CastObserver counts what rounding an op's f32 results into f16 did", "[cast_observer]") {
  // Powers of two are exact in f16, so the f32 products below are exact and only the final
  // rounding of mul's output to f16 loses anything. fp16: smallest subnormal 2^-24 (values below
  // 2^-25 round to 0), smallest normal 2^-14, largest finite 65504 < 2^16.
  const Tensor a = Tensor::from_vector({0x1.0p-12f, 0x1.0p-10f, 256.0f, 0.0f, 1.0f, -0x1.0p-12f}, {6}, DType::f16);
  const Tensor b = Tensor::from_vector({0x1.0p-15f, 0x1.0p-10f, 512.0f, 3.0f, 1.0f, 0x1.0p-14f}, {6}, DType::f16);
  const Tensor unobserved = mul(a, b);
  CastObserver observer;
  const Tensor y = mul(a, b);  // {2^-27, 2^-20, 2^17, 0, 1, -2^-26}
  const precision::NumericsStats stats = observer.take();
  CHECK(stats.total() == 6);
  CHECK(stats.underflow == 2);  // 2^-27 and -2^-26 became +-0
  CHECK(stats.subnormal == 1);  // 2^-20
  CHECK(stats.overflow == 1);   // 2^17 became inf
  CHECK(stats.input.zero == 1);
  CHECK(stats.input.count(-27) == 1);
  CHECK(stats.input.count(-26) == 1);
  CHECK(stats.input.count(-20) == 1);
  CHECK(stats.input.count(0) == 1);
  CHECK(stats.input.count(17) == 1);
  CHECK(y.to_vector()[0] == 0.0f);
  CHECK(y.to_vector()[1] == 0x1.0p-20f);
  // Counting does not change the rounding: the same bits as without an observer.
  CHECK(std::vector<uint16_t>(y.data<uint16_t>(), y.data<uint16_t>() + 6) ==
        std::vector<uint16_t>(unobserved.data<uint16_t>(), unobserved.data<uint16_t>() + 6));
  // take() resets; a second observer cannot be installed beside this one.
  CHECK(observer.take().total() == 0);
  CHECK(cast_observer() == &observer);
  REQUIRE_THROWS_WITH(CastObserver(), Catch::Contains("already installed"));
}

TEST_CASE("CastObserver merges the counts of narrowings on OpenMP worker threads", "[cast_observer]") {
  // 2^16 elements: above map's 2^15-element threshold for the thread team, 32 chunks of 2048.
  const int64_t n = 1 << 16;
  const Tensor x = Tensor::full({n}, 1e-8f);  // below 2^-25: every element flushes in f16
  CastObserver observer;
  const Tensor y = cast(x, DType::f16);
  const precision::NumericsStats stats = observer.take();
  CHECK(stats.total() == uint64_t(n));
  CHECK(stats.underflow == uint64_t(n));
  CHECK(stats.input.count(-27) == uint64_t(n));  // 2^-27 <= 1e-8 < 2^-26
  CHECK(y.to_vector()[n - 1] == 0.0f);
}

TEST_CASE("a CastObserver uninstalls itself when destroyed", "[cast_observer]") {
  { CastObserver observer; }
  CHECK(cast_observer() == nullptr);
}

}  // namespace hg
