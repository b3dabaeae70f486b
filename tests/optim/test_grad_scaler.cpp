// GradScaler pinned transition by transition (STYLE.md: a scaler whose code contradicts its
// header is the bug we avoid), its errors, and its state dict.
#include <catch2/catch.hpp>

#include <cmath>

#include "autograd/ops.h"
#include "autograd/tape.h"
#include "optim/grad_scaler.h"
#include "optim/sgd.h"

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
      {1, true, 65536, 1},      {1, true, 65536, 2},      {1, true, 131072, 0},  // grow
      {inf, false, 65536, 0},                                                   // back off
      {1, true, 65536, 1},      {1, true, 65536, 2},      {nan, false, 32768, 0},  // NaN too
      {-inf, false, 16384, 0},  {1, true, 16384, 1},      {1, true, 16384, 2},
      {1, true, 32768, 0},
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
  REQUIRE_THROWS_WITH(scaler.unscale(opt), Catch::Contains("Attempting to unscale FP16 gradients") && Catch::Contains("'h'"));
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

}  // namespace hg::optim
