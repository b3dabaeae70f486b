// --update-rounding (halfgrad/optim/optimizer.h): how an optimizer writes updated 16-bit weights without f32
// masters. Stochastic rounding is unbiased on the update; Kahan's compensated weight follows the
// exact sum; both give the same bits on the row-sparse path as on the dense one, and resume.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <memory>

#include "halfgrad/autograd/generator.h"
#include "halfgrad/autograd/sparse_rows.h"
#include "halfgrad/autograd/tensor.h"
#include "halfgrad/optim/adam.h"
#include "halfgrad/optim/sgd.h"

namespace hg::optim {
namespace {

// n weights of 1.0 in `dtype`, `steps` SGD steps (lr 1) of the update u = 2^-10 each, written
// under `mode`. The exact sum is 1 + steps * 2^-10. Returns the final weights (and the Kahan
// buffer in *compensation).
std::vector<float> small_updates(DType dtype, UpdateRounding mode, int64_t n, int steps,
                                 std::vector<float>* compensation = nullptr) {
  Tensor w = Tensor::full({n}, 1.0f, dtype).set_requires_grad();
  SGD sgd({{{w}, 1.0f, 0.0f}});
  sgd.set_update_rounding(mode, /*seed=*/42);
  for (int s = 0; s < steps; ++s) {
    w.set_grad(Tensor::full({n}, -0x1p-10f, dtype));  // exact in f16 and bf16
    sgd.step();
  }
  if (compensation) {
    const OptimizerState state = sgd.state_dict();
    *compensation = state.tensors.at("state.0.kahan").to_vector();
  }
  return w.to_vector();
}

TEST_CASE("update rounding: nearest loses updates below half an ulp, stochastic keeps them on average",
          "[optim][update_rounding]") {
  // bf16 at 1.0: ulp 2^-7, half an ulp 2^-8 > 2^-10, so nearest rounds every step back to 1.0.
  // f16 at 1.0: ulp 2^-10, the update is one ulp: every mode adds it exactly.
  constexpr int kSteps = 256;
  const double exact = 1.0 + kSteps * 0x1p-10;  // 1.25
  for (const float w : small_updates(DType::bf16, UpdateRounding::kNearest, 64, kSteps)) CHECK(w == 1.0f);
  for (const float w : small_updates(DType::f16, UpdateRounding::kNearest, 64, kSteps)) CHECK(w == float(exact));
  // Stochastic: each step's rounding error e has E[e] = 0 and |e| < 2^-7 (one ulp in [1, 2)),
  // so Var(e) <= 2^-14 / 4; the sum of 256 independent steps has variance <= 2^-8 and the mean of
  // 4096 independent weights variance <= 2^-20: |mean - exact| < 5 sigma = 5 * 2^-10.
  const std::vector<float> sr = small_updates(DType::bf16, UpdateRounding::kStochastic, 4096, kSteps);
  double mean = 0;
  for (const float w : sr) mean += w;
  mean /= double(sr.size());
  CHECK(std::abs(mean - exact) < 5 * 0x1p-10);
  // Every weight moved (nearest would have kept all at 1.0), and the same seed gives the same bits.
  CHECK(std::count(sr.begin(), sr.end(), 1.0f) == 0);
  CHECK(small_updates(DType::bf16, UpdateRounding::kStochastic, 4096, kSteps) == sr);
}

TEST_CASE("update rounding: Kahan's compensated weight equals the exact sum within one ulp",
          "[optim][update_rounding]") {
  // The invariant w + c = exact sum holds up to the rounding of c into the weight's dtype, which
  // is exact here (c is a multiple of 2^-10 below 2^-7); and |c| <= half an ulp of w after each
  // write (w' is the nearest value to w + c + u), so |w - exact| <= 2^-8 in [1, 2).
  constexpr int kSteps = 256;
  const double exact = 1.0 + kSteps * 0x1p-10;
  for (const DType dtype : {DType::bf16, DType::f16}) {
    std::vector<float> c;
    const std::vector<float> w = small_updates(dtype, UpdateRounding::kKahan, 8, kSteps, &c);
    for (size_t i = 0; i < w.size(); ++i) {
      CHECK(double(w[i]) + double(c[i]) == exact);
      CHECK(std::abs(double(w[i]) - exact) <= 0x1p-8);
    }
  }
}

TEST_CASE("update rounding: an f32 parameter is written exactly under every mode", "[optim][update_rounding]") {
  for (const UpdateRounding mode : {UpdateRounding::kStochastic, UpdateRounding::kKahan}) {
    const std::vector<float> w = small_updates(DType::f32, mode, 4, 3);
    for (const float v : w) CHECK(v == 1.0f + 3 * 0x1p-10f);
  }
}

TEST_CASE("update rounding: the row-sparse path gives the dense path's bits, and a resumed optimizer continues them",
          "[optim][update_rounding][sparse]") {
  constexpr int64_t kRows = 300, kWidth = 40;
  Generator gen(5);
  std::vector<int64_t> rows;
  for (int64_t r = 0; r < kRows; r += 2) rows.push_back(r);
  std::vector<Tensor> grads;
  for (int s = 0; s < 4; ++s) grads.push_back(Tensor::randn({int64_t(rows.size()), kWidth}, gen, DType::f32, 0, 1e-3f));
  for (const DType dtype : {DType::bf16, DType::f16}) {
    for (const UpdateRounding mode : {UpdateRounding::kStochastic, UpdateRounding::kKahan}) {
      INFO(dtype_name(dtype) << " " << kUpdateRoundingNames.name(mode));
      const Tensor init = Tensor::randn({kRows, kWidth}, gen, dtype);
      auto grad = [&](int s) { return SparseRows{rows, grads[size_t(s)].to(dtype)}; };
      Tensor sparse = init.clone().set_requires_grad(), dense = init.clone().set_requires_grad();
      AdamW sparse_opt({{{sparse}, 1e-3f, 0.0f}}), dense_opt({{{dense}, 1e-3f, 0.0f}});
      sparse_opt.set_update_rounding(mode, 9);
      dense_opt.set_update_rounding(mode, 9);
      Tensor resumed;
      std::unique_ptr<AdamW> resumed_opt;
      for (int s = 0; s < 4; ++s) {
        sparse.set_sparse_grad(grad(s));
        dense.set_grad(to_dense(grad(s), dense.shape()));
        sparse_opt.step();
        dense_opt.step();
        if (s == 1) {  // a copy of the dense run resumes from its weights and state after two steps
          resumed = dense.clone().set_requires_grad();
          resumed_opt = std::make_unique<AdamW>(std::vector<ParamGroup>{{{resumed}, 1e-3f, 0.0f}});
          resumed_opt->load_state_dict(dense_opt.state_dict());
          resumed_opt->set_update_rounding(mode, 9);
        } else if (s > 1) {
          resumed.set_grad(to_dense(grad(s), dense.shape()));
          resumed_opt->step();
        }
      }
      const std::vector<float> p = sparse.to_vector(), q = dense.to_vector();
      for (const int64_t row : rows) {
        for (int64_t j = 0; j < kWidth; ++j) REQUIRE(p[size_t(row * kWidth + j)] == q[size_t(row * kWidth + j)]);
      }
      CHECK(resumed.to_vector() == q);
      CHECK(init.to_vector() != q);  // the updates (about 1e-3 of weights ~1) were not all lost
    }
  }
}

}  // namespace
}  // namespace hg::optim
