// The tape's contract: accumulation, retain_graph, the error on a freed graph, NoGrad,
// hooks, the global gradient observer, and anomaly detection naming the op.
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>
#include <string>

#include "halfgrad/autograd/all_ops.h"
#include "halfgrad/autograd/tape.h"
#include "halfgrad/base/error.h"

namespace hg {

TEST_CASE("backward accumulates into .grad across calls and zero_grad drops it", "[tape]") {
  Tensor x = Tensor::from_vector({1, 2, 3}, {3}).set_requires_grad();
  backward(sum(mul_scalar(x, 2.0f)));
  backward(sum(mul_scalar(x, 3.0f)));
  CHECK(x.grad().to_vector() == std::vector<float>{5, 5, 5});
  x.zero_grad();
  CHECK_FALSE(x.grad().defined());
}

TEST_CASE("a kept gradient has storage of its own: not another leaf's, a view's or the seed's", "[tape]") {
  // In-place writers (GradScaler::unscale, clip_grad_norm) must not reach two gradients at once.
  Tensor a = Tensor::from_vector({1, 2}, {2}).set_requires_grad();
  Tensor b = Tensor::from_vector({3, 4}, {2}).set_requires_grad();
  backward(sum(add(a, b)));  // add() hands its one output gradient to both inputs
  CHECK(a.grad().bytes() != b.grad().bytes());
  CHECK(b.grad().to_vector() == std::vector<float>{1, 1});
  // A retained view's gradient and its base's: reshape's backward passes a view of the former.
  Tensor c = Tensor::from_vector({1, 2, 3, 4}, {4}).set_requires_grad();
  Tensor view = c.reshape({2, 2});
  view.retain_grad();
  backward(sum(view));
  CHECK(view.grad().bytes() != c.grad().bytes());
  // A leaf loss keeps a copy of the caller's seed.
  Tensor w = Tensor::from_vector({5}, {1}).set_requires_grad();
  const Tensor seed = Tensor::from_vector({2}, {1});
  backward(w, seed);
  CHECK(w.grad().bytes() != seed.bytes());
  CHECK(w.grad().item() == 2.0f);
}

TEST_CASE("a second backward over a freed graph is a clear error and retain_graph keeps it", "[tape]") {
  Tensor x = Tensor::from_vector({2}, {1}).set_requires_grad();
  Tensor y = sum(mul(x, x));
  backward(y, {}, /*retain_graph=*/true);
  backward(y);
  CHECK(x.grad().item() == 8.0f);  // 2 * (2x) at x = 2
  REQUIRE_THROWS_WITH(backward(y), Catch::Contains("already freed") && Catch::Contains("retain_graph"));
}

TEST_CASE("backward on a loss that does not require grad names the problem", "[tape]") {
  Tensor x = Tensor::from_vector({1, 2}, {2});
  REQUIRE_THROWS_WITH(backward(sum(x)), Catch::Contains("does not require grad"));
  Tensor w = Tensor::from_vector({1, 2}, {2}).set_requires_grad();
  REQUIRE_THROWS_WITH(backward(mul_scalar(w, 2.0f)), Catch::Contains("non-scalar loss"));
  active_tape().clear();
}

TEST_CASE("NoGrad stops recording", "[tape]") {
  Tensor x = Tensor::from_vector({1}, {1}).set_requires_grad();
  const int64_t before = active_tape().size();
  {
    NoGrad guard;
    Tensor y = mul_scalar(x, 2.0f);
    CHECK_FALSE(y.requires_grad());
  }
  CHECK(active_tape().size() == before);
  CHECK(grad_enabled());
}

TEST_CASE("tensor hooks see and may replace a gradient and observers see every gradient", "[tape]") {
  Tensor x = Tensor::from_vector({1, 2}, {2}).set_requires_grad().set_name("x");
  Tensor h = mul_scalar(x, 3.0f);
  h.set_name("h");
  float seen = 0;
  h.register_hook([&](const Tensor& g) {
    seen = g.to_vector()[0];
    return mul_scalar(g, 10.0f);  // replaces dL/dh
  });
  std::vector<std::string> log;
  const int id = add_grad_observer(
      [&](std::string_view op, const Tensor& t, const Tensor&) { log.push_back(std::string(op) + ":" + t.name()); });
  backward(sum(h));
  remove_grad_observer(id);
  CHECK(seen == 1.0f);
  CHECK(x.grad().to_vector() == std::vector<float>{30, 30});
  CHECK(log == std::vector<std::string>{"sum:h", "mul_scalar:x"});
}

TEST_CASE("forward observers see every op's output, under NoGrad too, until removed", "[tape]") {
  Tensor x = Tensor::from_vector({1, -2}, {2}).set_requires_grad();
  std::vector<std::string> log;
  const int id = add_forward_observer([&](std::string_view op, const Tensor& out) {
    log.push_back(std::string(op) + ":" + std::to_string(out.to_vector()[1]));
  });
  const Tensor y = relu(mul_scalar(x, 3.0f));
  {
    NoGrad no_grad;
    neg(x);
  }
  remove_forward_observer(id);
  neg(y);
  CHECK(log == std::vector<std::string>{"mul_scalar:-6.000000", "relu:0.000000", "neg:2.000000"});
}

TEST_CASE("anomaly detection names the first op producing inf/NaN, forward and backward", "[tape]") {
  SECTION("forward") {
    DetectAnomaly guard;
    Tensor x = Tensor::from_vector({1000.0f}, {1}).set_requires_grad().set_name("x");
    REQUIRE_THROWS_WITH(exp(x), Catch::Contains("forward of op 'exp'") && Catch::Contains("(1,)"));
    active_tape().clear();
  }
  SECTION("backward, recorded without throwing") {
    DetectAnomaly guard(/*throw_on_anomaly=*/false);
    Tensor x = Tensor::from_vector({0.0f, 1.0f}, {2}).set_requires_grad().set_name("x");
    backward(sum(sqrt(x)));  // d sqrt(x)/dx = 1/(2 sqrt x) is inf at 0
    CHECK(last_anomaly().op == "sqrt");
    CHECK(last_anomaly().phase == "backward");
    CHECK(last_anomaly().tensor == "x");
  }
  CHECK_FALSE(anomaly_detection_enabled());
}

TEST_CASE("inf and NaN survive the Release build (no fast-math)", "[tape]") {
  // Loss scaling depends on seeing inf/NaN: a -ffinite-math-only build would fold these away.
  volatile float big = std::numeric_limits<float>::max();
  const Tensor x = Tensor::from_vector({big}, {1});
  const float y = mul_scalar(x, 2.0f).item();
  CHECK(std::isinf(y));
  CHECK(std::isnan(sub(Tensor::from_vector({y}, {1}), Tensor::from_vector({y}, {1})).item()));
}

}  // namespace hg
