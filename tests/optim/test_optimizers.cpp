// Optimizers against torch.optim (golden/make_optimizers.py, float32 torch), schedules,
// clipping, and optimizer state round trips.
//
// Tolerance for the torch comparison: both run the same f32 formulas in the same order;
// torch's vectorised kernels may fuse or reorder a multiply-add, so each of the ~6 roundings
// per step can differ by an ulp: 3 steps x 6 x 2^-24 ~ 1e-6 relative; we allow 4e-6 relative.
#include <catch2/catch.hpp>

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>

#include "halfgrad/base/error.h"
#include "halfgrad/optim/adam.h"
#include "halfgrad/optim/clip_grad_norm.h"
#include "halfgrad/optim/lr_scheduler.h"
#include "halfgrad/optim/sgd.h"

namespace hg::optim {
namespace {

std::vector<std::vector<float>> run(const std::string& name, const nlohmann::json& g) {
  Tensor p = Tensor::from_vector(g["p0"].get<std::vector<float>>(), {7}).set_requires_grad();
  std::unique_ptr<Optimizer> opt;
  if (name == "sgd")
    opt = std::make_unique<SGD>(std::vector<ParamGroup>{{{p}, 0.1f, 0.1f}}, SGDOptions{.momentum = 0.9f});
  if (name == "sgd_nesterov")
    opt = std::make_unique<SGD>(std::vector<ParamGroup>{{{p}, 0.1f, 0.0f}},
                                SGDOptions{.momentum = 0.9f, .nesterov = true});
  if (name == "sgd_plain") opt = std::make_unique<SGD>(std::vector<ParamGroup>{{{p}, 0.1f, 0.0f}});
  if (name == "adam") opt = std::make_unique<Adam>(std::vector<ParamGroup>{{{p}, 0.01f, 0.1f}});
  if (name == "adamw") opt = std::make_unique<AdamW>(std::vector<ParamGroup>{{{p}, 0.01f, 0.1f}});
  std::vector<std::vector<float>> trajectory;
  for (const auto& grad : g["grads"]) {
    p.set_grad(Tensor::from_vector(grad.get<std::vector<float>>(), {7}));
    opt->step();
    trajectory.push_back(p.to_vector());
  }
  return trajectory;
}

}  // namespace

TEST_CASE("SGD, Adam and AdamW follow torch.optim step for step", "[optim][golden]") {
  std::ifstream file(std::string(HALFGRAD_SOURCE_DIR) + "/tests/optim/golden/optimizers.json");
  REQUIRE(file.good());
  const nlohmann::json g = nlohmann::json::parse(file);
  for (const std::string name : {"sgd", "sgd_nesterov", "sgd_plain", "adam", "adamw"}) {
    const auto got = run(name, g);
    const auto want = g["steps"][name].get<std::vector<std::vector<float>>>();
    for (size_t s = 0; s < want.size(); ++s) {
      for (size_t i = 0; i < want[s].size(); ++i) {
        INFO(name << " step " << s + 1 << " element " << i << ": got " << got[s][i] << " want " << want[s][i]);
        CHECK(std::abs(got[s][i] - want[s][i]) <= 4e-6f * std::abs(want[s][i]) + 1e-9f);
      }
    }
  }
}

TEST_CASE("AdamW's first step by hand", "[optim]") {
  // t = 1: m = 0.1 g, v = 0.001 g^2, m_hat = g, v_hat = g^2, so the step is lr g / (|g| + eps)
  // = lr sign(g) (up to eps), after the decoupled decay p (1 - lr wd).
  Tensor p = Tensor::from_vector({1.0f, -2.0f}, {2}).set_requires_grad();
  AdamW opt({{{p}, 0.1f, 0.5f}});
  p.set_grad(Tensor::from_vector({3.0f, -0.5f}, {2}));
  opt.step();
  const std::vector<float> got = p.to_vector();
  CHECK(got[0] == Approx(1.0f * (1 - 0.05f) - 0.1f).epsilon(1e-6));
  CHECK(got[1] == Approx(-2.0f * (1 - 0.05f) + 0.1f).epsilon(1e-6));
}

TEST_CASE("parameters without a gradient are left alone", "[optim]") {
  Tensor a = Tensor::from_vector({1.0f}, {1}).set_requires_grad(),
         b = Tensor::from_vector({1.0f}, {1}).set_requires_grad();
  SGD opt({{{a, b}, 0.5f, 0.0f}});
  a.set_grad(Tensor::from_vector({1.0f}, {1}));
  opt.step();
  CHECK(a.item() == 0.5f);
  CHECK(b.item() == 1.0f);
}

TEST_CASE("optimizer state round trip continues identically", "[optim]") {
  auto make = [] { return Tensor::from_vector({0.5f, -1.0f, 2.0f}, {3}).set_requires_grad(); };
  const std::vector<std::vector<float>> grads = {{1, 2, 3}, {-1, 0.5f, 2}, {0.1f, 0.2f, -3}};
  Tensor a = make(), b = make();
  AdamW full({{{a}, 0.01f, 0.1f}}), first({{{b}, 0.01f, 0.1f}});
  for (int s = 0; s < 2; ++s) {
    a.set_grad(Tensor::from_vector(grads[size_t(s)], {3}));
    full.step();
    b.set_grad(Tensor::from_vector(grads[size_t(s)], {3}));
    first.step();
  }
  Tensor c = Tensor::from_vector(b.to_vector(), {3}).set_requires_grad();
  AdamW resumed({{{c}, 0.01f, 0.1f}});
  resumed.load_state_dict(first.state_dict());
  a.set_grad(Tensor::from_vector(grads[2], {3}));
  full.step();
  c.set_grad(Tensor::from_vector(grads[2], {3}));
  resumed.step();
  CHECK(a.to_vector() == c.to_vector());
  CHECK(resumed.steps() == 3);

  Tensor d = Tensor::zeros({4}).set_requires_grad();
  AdamW other({{{d}, 0.01f, 0.1f}});
  REQUIRE_THROWS_WITH(other.load_state_dict(first.state_dict()),
                      Catch::Contains("3 values for a parameter of shape (4,)"));
}

TEST_CASE("learning-rate schedules follow Hugging Face's lambdas", "[optim]") {
  Tensor p = Tensor::zeros({1}).set_requires_grad();
  SGD opt({{{p}, 1.0f, 0.0f}});
  LrScheduler linear(opt, Schedule::kLinear, 10, 110);
  CHECK(linear.factor(0) == 0.0f);
  CHECK(linear.factor(5) == 0.5f);
  CHECK(linear.factor(10) == 1.0f);
  CHECK(linear.factor(60) == 0.5f);
  CHECK(linear.factor(110) == 0.0f);
  CHECK(linear.factor(200) == 0.0f);
  LrScheduler cosine(opt, Schedule::kCosine, 10, 110);
  CHECK(cosine.factor(60) == Approx(0.5f).margin(1e-6));  // cos(pi/2)
  CHECK(cosine.factor(35) == Approx(0.5f * (1 + std::cos(3.14159265f / 4))).margin(1e-6));
  CHECK(cosine.factor(110) == Approx(0.0f).margin(1e-7));
  // The scheduler sets each group's lr from the lr the group had when it was created.
  SGD opt2({{{p}, 0.5f, 0.0f}});
  LrScheduler constant(opt2, Schedule::kConstant, 4, 100);
  CHECK(opt2.param_groups()[0].lr == 0.0f);
  constant.step();
  CHECK(opt2.param_groups()[0].lr == 0.125f);
  for (int i = 0; i < 5; ++i) constant.step();
  CHECK(opt2.param_groups()[0].lr == 0.5f);
  REQUIRE_THROWS_WITH(
      kScheduleNames.parse("exponential", "lr_scheduler_type (--scheduler)"),
      "lr_scheduler_type (--scheduler): unknown value 'exponential' (expected constant, linear or cosine)");
  CHECK(kScheduleNames.parse("constant_with_warmup", "x") == Schedule::kConstant);
}

TEST_CASE("clip_grad_norm scales to max_norm and reports a non-finite norm untouched", "[optim]") {
  Tensor a = Tensor::zeros({2}).set_requires_grad(), b = Tensor::zeros({1}).set_requires_grad();
  a.set_grad(Tensor::from_vector({3.0f, 0.0f}, {2}));
  b.set_grad(Tensor::from_vector({4.0f}, {1}));
  CHECK(clip_grad_norm({a, b}, 1.0f) == 5.0f);  // sqrt(9 + 16)
  CHECK(grad_norm({a, b}) == Approx(1.0f).epsilon(1e-6));
  CHECK(clip_grad_norm({a, b}, 10.0f) == Approx(1.0f).epsilon(1e-6));  // below max: unchanged
  b.set_grad(Tensor::from_vector({INFINITY}, {1}));
  CHECK(std::isinf(clip_grad_norm({a, b}, 1.0f)));
  CHECK(a.grad().to_vector()[0] == Approx(0.6f).epsilon(1e-6));  // not multiplied by NaN
}

}  // namespace hg::optim
