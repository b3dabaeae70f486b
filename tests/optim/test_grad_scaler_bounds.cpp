// GradScaler's bounds and health warning: driven to its limits, the scale stops at min_scale /
// max_scale (never 0 or inf), and health_warning() reports a collapsed scale or too many
// skipped steps, naming the parameter whose gradient overflowed.
#include <catch2/catch.hpp>

#include <cmath>

#include "optim/grad_scaler.h"
#include "optim/sgd.h"

namespace hg::optim {
namespace {

struct Fixture {
  Tensor p = Tensor::from_vector({1.0f, 2.0f}, {2}).set_requires_grad().set_name("encoder.layers.0.ffn.weight");
  SGD opt{{{{p}, 0.0f, 0.0f}}};
  bool step(GradScaler& scaler, float g) {
    p.set_grad(Tensor::from_vector({g, 1.0f}, {2}));
    const bool stepped = scaler.step(opt);
    scaler.update();
    return stepped;
  }
};

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
  loaded.load_state_dict({{"scale", 1e30}, {"growth_factor", 2.0}, {"backoff_factor", 0.5},
                          {"growth_interval", 2000}, {"_growth_tracker", 0}});
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
          "'encoder.layers.0.ffn.weight'");
  }
  SECTION("the scale collapsed below 1, reported at once") {
    Fixture f;
    GradScaler scaler({.init_scale = 4.0f});
    for (int i = 0; i < 2; ++i) f.step(scaler, NAN);
    CHECK(scaler.get_scale() == 1.0f);
    CHECK(scaler.health_warning().empty());
    f.step(scaler, NAN);
    CHECK_THAT(scaler.health_warning(), Catch::StartsWith("the loss scale fell to 0.5 (below 1") &&
                                            Catch::EndsWith("'encoder.layers.0.ffn.weight'"));
  }
  SECTION("a static scale below 1 is the user's choice, not a collapse") {
    Fixture f;
    GradScaler scaler({.init_scale = 0.5f, .dynamic = false});
    f.step(scaler, 1.0f);
    CHECK(scaler.health_warning().empty());
  }
}

}  // namespace
}  // namespace hg::optim
