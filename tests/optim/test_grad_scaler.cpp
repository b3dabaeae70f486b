// GradScaler pinned transition by transition (STYLE.md: a scaler whose code contradicts its
// header is the bug we avoid), its errors, its state dict, and its bounds: driven to its limits
// the scale stops at min_scale / max_scale (never 0 or inf), and health_warning() reports a
// collapsed scale or too many skipped steps, naming the parameter whose gradient overflowed.
#include <catch2/catch.hpp>

#include <cmath>

#include "halfgrad/autograd/all_ops.h"
#include "halfgrad/autograd/tape.h"
#include "halfgrad/optim/clip_grad_norm.h"
#include "halfgrad/optim/grad_scaler.h"
#include "halfgrad/optim/sgd.h"

namespace hg::optim {
namespace {

struct Fixture {
  Tensor p = Tensor::from_vector({1.0f, 2.0f}, {2}).set_requires_grad().set_name("w");
  SGD opt{{{{p}, 0.0f, 0.0f}}};
  // One step with gradient g (already "scaled"), returns whether the optimizer stepped.
  bool step(GradScaler& scaler, float g) {
    p.set_grad(Tensor::from_vector({g, 1.0f}, {2}));
    const bool stepped = scaler.step(opt);
    scaler.update();
    return stepped;
  }
};

}  // namespace

TEST_CASE("GradScaler follows torch's _amp_update_scale_ step by step", "[scaler]") {
  // Expected values written from the algorithm in grad_scaler.h with growth_interval 3:
  // clean steps count up the tracker; the third doubles the scale and resets it; an inf step
  // halves the scale and resets the tracker.
  Fixture f;
  GradScaler scaler({.growth_interval = 3});
  const float inf = INFINITY, nan = NAN;
  struct Expect {
    float grad;
    bool stepped;
    float scale_after;
    int64_t tracker_after;
  };
  const std::vector<Expect> script = {
      {1, true, 65536, 1},     {1, true, 65536, 2}, {1, true, 131072, 0},    // grow
      {inf, false, 65536, 0},                                                // back off
      {1, true, 65536, 1},     {1, true, 65536, 2}, {nan, false, 32768, 0},  // NaN too
      {-inf, false, 16384, 0}, {1, true, 16384, 1}, {1, true, 16384, 2},    {1, true, 32768, 0},
  };
  for (size_t i = 0; i < script.size(); ++i) {
    INFO("step " << i);
    CHECK(f.step(scaler, script[i].grad) == script[i].stepped);
    CHECK(scaler.get_scale() == script[i].scale_after);
    CHECK(scaler.growth_tracker() == script[i].tracker_after);
  }
  CHECK(scaler.skipped_steps() == 3);
  CHECK(scaler.history()[3].first_nonfinite == "w");
  CHECK(scaler.history()[3].scale == 131072.0f);
  CHECK(scaler.history()[0].zero_grad_elements == 0);
}

TEST_CASE("GradScaler does not grow to inf, unscales with the double-precision inverse", "[scaler]") {
  Fixture f;
  GradScaler scaler({.init_scale = 0x1.0p127f, .growth_interval = 1, .max_scale = 0x1.0p127f});
  CHECK(f.step(scaler, 1.0f));
  CHECK(scaler.get_scale() == 0x1.0p127f);  // 2^128 would be inf: clamped, tracker reset
  CHECK(scaler.growth_tracker() == 0);

  GradScaler three({.init_scale = 3.0f});
  f.p.set_grad(Tensor::from_vector({3.0f, 1.0f}, {2}));
  three.unscale(f.opt);
  // inv = float(1 / 3.0 in double) = 0x3EAAAAAB; 3 * that rounds to 1.0000000 in f32.
  CHECK(f.p.grad().to_vector()[0] == 3.0f * float(1.0 / 3.0));
  CHECK(f.p.grad().to_vector()[1] == float(1.0 / 3.0));
}

TEST_CASE("GradScaler errors: unscale twice, step twice, fp16 gradients", "[scaler]") {
  Fixture f;
  GradScaler scaler;
  f.p.set_grad(Tensor::from_vector({1.0f, 1.0f}, {2}));
  scaler.unscale(f.opt);
  REQUIRE_THROWS_WITH(scaler.unscale(f.opt), Catch::Contains("already been called"));
  scaler.step(f.opt);
  REQUIRE_THROWS_WITH(scaler.step(f.opt), Catch::Contains("step() has already been called"));
  scaler.update();

  Tensor h = Tensor::from_vector({1.0f}, {1}, DType::f16).set_requires_grad().set_name("h");
  SGD opt({{{h}, 0.1f, 0.0f}});
  h.set_grad(Tensor::from_vector({1.0f}, {1}, DType::f16));
  REQUIRE_THROWS_WITH(scaler.unscale(opt),
                      Catch::Contains("Attempting to unscale FP16 gradients") && Catch::Contains("'h'"));
  CHECK_NOTHROW(scaler.unscale(opt, /*allow_fp16=*/true));
}

TEST_CASE("GradScaler static mode, disabled mode, and the state dict's five keys", "[scaler]") {
  Fixture f;
  GradScaler fixed({.init_scale = 1024.0f, .growth_interval = 1, .dynamic = false});
  CHECK_FALSE(f.step(fixed, INFINITY));  // still skips a non-finite step...
  CHECK(f.step(fixed, 1.0f));
  CHECK(fixed.get_scale() == 1024.0f);  // ...but never changes the scale

  GradScaler off({.enabled = false});
  const Tensor loss = Tensor::full({}, 2.0f);
  CHECK(off.scale(loss).same(loss));
  CHECK(f.step(off, INFINITY));  // disabled: a plain optimizer step
  CHECK(off.state_dict().empty());

  GradScaler a({.growth_interval = 3});
  f.step(a, 1.0f);
  f.step(a, INFINITY);
  f.step(a, 1.0f);
  const nlohmann::json state = a.state_dict();
  CHECK(state.size() == 5);
  for (const char* key : {"scale", "growth_factor", "backoff_factor", "growth_interval", "_growth_tracker"}) {
    CHECK(state.contains(key));
  }
  GradScaler b;
  b.load_state_dict(state);
  CHECK(b.get_scale() == 32768.0f);
  CHECK(b.growth_tracker() == 1);
  CHECK(b.state_dict() == state);
}

TEST_CASE("scale() multiplies the loss so backward seeds scaled gradients", "[scaler]") {
  GradScaler scaler({.init_scale = 8.0f});
  Tensor w = Tensor::from_vector({3.0f}, {1}).set_requires_grad();
  backward(scaler.scale(sum(mul(w, w))));
  CHECK(w.grad().item() == 48.0f);  // 8 * 2w
}

TEST_CASE("unscale and clipping apply once to each of two parameters that received one shared gradient", "[scaler]") {
  // add() hands its one output gradient to both inputs. If a.grad and b.grad were that one
  // buffer, the in-place unscale would divide it twice (b.grad = 2^-10) and clipping would
  // scale it twice. Expected values, derived:
  //   backward of scale(sum(a + b)) with scale 2^10: every element of a.grad and b.grad is 2^10;
  //   unscaled by 2^-10 (exact in f32): every element is 1;
  //   global norm of four 1s: sqrt(4) = 2 (exact); clip to 1: each element times
  //   max_norm / (norm + 1e-6), torch's clip_coef, rounded once in f32 (1 * coef is exact).
  Tensor a = Tensor::from_vector({1.0f, 2.0f}, {2}).set_requires_grad().set_name("a");
  Tensor b = Tensor::from_vector({3.0f, 4.0f}, {2}).set_requires_grad().set_name("b");
  SGD opt{{{{a, b}, 0.0f, 0.0f}}};
  GradScaler scaler({.init_scale = 1024.0f});
  backward(scaler.scale(sum(add(a, b))));
  CHECK(a.grad().bytes() != b.grad().bytes());
  scaler.unscale(opt);
  CHECK(a.grad().to_vector() == std::vector<float>{1.0f, 1.0f});
  CHECK(b.grad().to_vector() == std::vector<float>{1.0f, 1.0f});
  CHECK(clip_grad_norm({a, b}, 1.0f) == 2.0f);
  const float coef = 1.0f / (2.0f + 1e-6f);
  CHECK(a.grad().to_vector() == std::vector<float>{coef, coef});
  CHECK(b.grad().to_vector() == std::vector<float>{coef, coef});
}

TEST_CASE("GradScaler: overflow after overflow stops the scale at min_scale, never 0", "[scaler]") {
  Fixture f;
  GradScaler scaler;  // 2^16, backoff 0.5
  // Unclamped, 2^16 * 0.5^k is 2^-40 after 56 backoffs, and 0 after 16 + 149 + 1 = 166 (past
  // the smallest f32 subnormal 2^-149). 300 overflowing steps would have reached 0.
  for (int i = 0; i < 300; ++i) CHECK_FALSE(f.step(scaler, INFINITY));
  CHECK(scaler.get_scale() == 0x1p-40f);
  CHECK(scaler.skipped_steps() == 300);
  // One clean step: the scale is usable, the state dict round-trips the clamped value.
  CHECK(f.step(scaler, 1.0f));
  CHECK(scaler.state_dict().at("scale").get<float>() == 0x1p-40f);
}

TEST_CASE("GradScaler: growth stops at max_scale, never inf", "[scaler]") {
  Fixture f;
  GradScaler scaler({.growth_interval = 1});
  // Unclamped, 2^16 * 2^k is inf (past 2^127) after 112 clean steps; the bound is 2^40, 24 steps.
  for (int i = 0; i < 200; ++i) CHECK(f.step(scaler, 1.0f));
  CHECK(scaler.get_scale() == 0x1p40f);
  scaler.update(1e38f);  // an explicit new scale is clamped too
  CHECK(scaler.get_scale() == 0x1p40f);
  GradScaler loaded;
  loaded.load_state_dict({{"scale", 1e30},
                          {"growth_factor", 2.0},
                          {"backoff_factor", 0.5},
                          {"growth_interval", 2000},
                          {"_growth_tracker", 0}});
  CHECK(loaded.get_scale() == 0x1p40f);
}

TEST_CASE("GradScaler: bounds are validated, and a saved scale must be finite and positive", "[scaler]") {
  CHECK_THROWS_WITH(GradScaler({.init_scale = 0x1p50f}), Catch::Contains("init_scale <= max_scale"));
  CHECK_THROWS_WITH(GradScaler({.min_scale = 0}), Catch::Contains("0 < min_scale"));
  CHECK_THROWS_WITH(GradScaler({.max_scale = INFINITY}), Catch::Contains("max_scale < inf"));
  GradScaler scaler;
  CHECK_THROWS_WITH(scaler.load_state_dict({{"scale", 0.0}}), Catch::Contains("scale must be finite and > 0"));
  CHECK_THROWS_WITH(scaler.load_state_dict({{"scale", "big"}}), Catch::Contains("GradScaler::load_state_dict"));
}

TEST_CASE("GradScaler::health_warning: a scale below 1, or more than 5% of >= 100 steps skipped", "[scaler]") {
  SECTION("healthy: a few skips at the start while the scale backs off") {
    Fixture f;
    GradScaler scaler;
    for (int i = 0; i < 5; ++i) f.step(scaler, INFINITY);  // 5 of 100 = exactly 5%: not more
    for (int i = 0; i < 95; ++i) f.step(scaler, 1.0f);
    CHECK(scaler.health_warning().empty());
  }
  SECTION("too many skipped steps") {
    Fixture f;
    GradScaler scaler({.growth_interval = 1});  // grows back after every overflow: skips 1 in 2
    for (int i = 0; i < 50; ++i) {
      f.step(scaler, 1.0f);
      CHECK(scaler.health_warning().empty());  // under 100 steps: not judged yet
      f.step(scaler, INFINITY);
    }
    CHECK(scaler.health_warning() ==
          "the loss scaler skipped 50 of 100 steps (more than 5%); latest skipped step: first inf/NaN gradient in "
          "'w'");
  }
  SECTION("the scale collapsed below 1, reported at once") {
    Fixture f;
    GradScaler scaler({.init_scale = 4.0f});
    for (int i = 0; i < 2; ++i) f.step(scaler, NAN);
    CHECK(scaler.get_scale() == 1.0f);
    CHECK(scaler.health_warning().empty());
    f.step(scaler, NAN);
    CHECK_THAT(scaler.health_warning(),
               Catch::StartsWith("the loss scale fell to 0.5 (below 1") && Catch::EndsWith("'w'"));
  }
  SECTION("a static scale below 1 is the user's choice, not a collapse") {
    Fixture f;
    GradScaler scaler({.init_scale = 0.5f, .dynamic = false});
    f.step(scaler, 1.0f);
    CHECK(scaler.health_warning().empty());
  }
}

}  // namespace hg::optim
