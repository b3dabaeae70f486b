// Training with a sparse embedding against the dense path it shortcuts (docs/sparse_gradients.md).
// The oracle is the dense run of the same model, batches and seeds: with the lazy optimizer
// semantics a row touched at every step must carry the dense run's bits -- weights, f32 masters,
// AdamW moments -- through loss scaling, clipping, accumulation and skipped steps; a row never
// touched must keep its value and zero moments; a row that misses a step must not move in it.
#include <bit>
#include <catch2/catch.hpp>
#include <cmath>
#include <map>
#include <memory>
#include <set>

#include "halfgrad/autograd/all_ops.h"
#include "halfgrad/autograd/sparse_rows.h"
#include "halfgrad/autograd/tape.h"
#include "halfgrad/base/parallel.h"
#include "halfgrad/nn/embedding.h"
#include "halfgrad/nn/linear.h"
#include "halfgrad/optim/adam.h"
#include "halfgrad/optim/mixed_precision.h"
#include "halfgrad/optim/sgd.h"

namespace hg::optim {
namespace {

constexpr int64_t kV = 300, kC = 8, kK = 3;

std::vector<uint32_t> bits(const std::vector<float>& values) {
  std::vector<uint32_t> out;
  for (float v : values) out.push_back(std::bit_cast<uint32_t>(v));
  return out;
}

std::vector<float> row(const std::vector<float>& values, int64_t r, int64_t c = kC) {
  return {values.begin() + r * c, values.begin() + (r + 1) * c};
}

// A bag-of-ids classifier, the shape of a hashed n-gram classifier: logits = head(sum over the
// T positions of tok[ids]), id 0 the padding.
class Bag : public nn::Module {
 public:
  Bag(bool sparse, float table_std, float head_std) {
    Generator gen(17);
    tok = register_module("tok",
                          std::make_shared<nn::Embedding>(kV, kC, nn::Init{.std = table_std, .gen = &gen}, 0, sparse));
    head = register_module("head", std::make_shared<nn::Linear>(kC, kK, nn::Init{.std = head_std, .gen = &gen}));
  }
  Tensor forward(const Indices& ids) const { return head->forward(sum(tok->forward(ids), 1)); }

  std::shared_ptr<nn::Embedding> tok;
  std::shared_ptr<nn::Linear> head;
};

struct MicroBatch {
  Indices ids, labels;
};

// B texts of T ids: every row of `rows` at least once, the other positions drawn from `rows`
// or the padding id 0.
MicroBatch micro_batch(const std::vector<int32_t>& rows, int64_t b, int64_t t, Generator& gen) {
  std::vector<int32_t> ids(rows);
  while (int64_t(ids.size()) < b * t) {
    const uint32_t draw = gen.next_u32() % uint32_t(rows.size() + 2);
    ids.push_back(draw < rows.size() ? rows[draw] : 0);
  }
  for (size_t i = ids.size() - 1; i > 0; --i) std::swap(ids[i], ids[gen.next_u32() % (i + 1)]);
  std::vector<int32_t> labels(static_cast<size_t>(b));
  for (auto& label : labels) label = int32_t(gen.next_u32() % kK);
  return {Indices(ids, {b, t}), Indices(labels, {b})};
}

struct Run {
  std::vector<StepResult> steps;
  std::vector<ScalerStep> scaler;
  std::vector<float> table, master, exp_avg, exp_avg_sq, head;
};

// Trains a Bag on `plan` (per step, its micro-batches) with AdamW; returns what each step did
// and the table's final weights (model dtype, widened), master and moments.
Run train(bool sparse, Precision precision, const std::vector<std::vector<MicroBatch>>& plan, float max_norm,
          float table_std = 0.5f, float head_std = 0.5f) {
  Bag model(sparse, table_std, head_std);
  MixedPrecision mp(model, {.precision = precision});
  std::vector<Tensor> params;
  for (const auto& [name, t] : mp.optimizer_parameters()) params.push_back(t);
  AdamW opt({{.params = params, .lr = 0.05f, .weight_decay = 0.1f}});
  Run run;
  for (const std::vector<MicroBatch>& micro_batches : plan) {
    for (const MicroBatch& m : micro_batches) {
      Tensor loss;
      {
        Autocast guard = mp.autocast();
        loss = mul_scalar(cross_entropy(model.forward(m.ids), m.labels), 1.0f / float(micro_batches.size()));
      }
      backward(mp.scale(loss));
    }
    run.steps.push_back(mp.step(opt, max_norm));
    opt.zero_grad();
    model.zero_grad();
  }
  run.scaler = mp.scaler().history();
  run.table = model.tok->weight.to_vector();
  run.master = params[0].to_vector();
  const OptimizerState state = opt.state_dict();
  run.exp_avg = state.tensors.at("state.0.exp_avg").to_vector();
  run.exp_avg_sq = state.tensors.at("state.0.exp_avg_sq").to_vector();
  run.head = model.head->weight.to_vector();
  return run;
}

}  // namespace

TEST_CASE("sparse AdamW training matches the dense run bit for bit on rows touched at every step", "[sparse][optim]") {
  // 16 of 300 rows touched at every step (plus padding), clipped, in f32 and fp16 O2 (f16 table,
  // f32 masters, dynamic loss scaling), with one and with two micro-batches per step.
  const std::vector<int32_t> touched = {3, 17, 18, 40, 41, 77, 101, 150, 151, 152, 199, 230, 255, 271, 298, 299};
  constexpr float kMaxNorm = 0.05f;
  for (const Precision precision : {Precision::kNo, Precision::kFp16}) {
    for (const int micro : {1, 2}) {
      INFO(mixed_precision_to_json({.precision = precision}).dump() << ", " << micro << " micro-batch(es) per step");
      Generator gen(5);
      std::vector<std::vector<MicroBatch>> plan(6);
      for (auto& step : plan) {
        for (int m = 0; m < micro; ++m) step.push_back(micro_batch(touched, 4, 10, gen));
      }
      const Run dense = train(false, precision, plan, kMaxNorm), sparse = train(true, precision, plan, kMaxNorm);
      const Bag initial(false, 0.5f, 0.5f);  // its table in the model's dtype
      const std::vector<float> table0 =
          initial.tok->weight.to(precision == Precision::kFp16 ? DType::f16 : DType::f32).to_vector();
      for (size_t s = 0; s < plan.size(); ++s) {
        INFO("step " << s);
        CHECK(sparse.steps[s].stepped == dense.steps[s].stepped);
        CHECK(std::bit_cast<uint32_t>(sparse.steps[s].grad_norm) == std::bit_cast<uint32_t>(dense.steps[s].grad_norm));
        CHECK(sparse.steps[s].grad_norm > kMaxNorm);  // clipping was active
        CHECK(sparse.steps[s].scale == dense.steps[s].scale);
      }
      REQUIRE(sparse.scaler.size() == dense.scaler.size());
      for (size_t s = 0; s < sparse.scaler.size(); ++s) {
        CHECK(sparse.scaler[s].zero_grad_elements == dense.scaler[s].zero_grad_elements);
        CHECK(sparse.scaler[s].grad_elements == dense.scaler[s].grad_elements);
      }
      CHECK(sparse.steps.back().stepped);
      CHECK(bits(sparse.head) == bits(dense.head));
      const std::set<int32_t> rows(touched.begin(), touched.end());
      for (int64_t r = 0; r < kV; ++r) {
        INFO("row " << r);
        if (rows.contains(int32_t(r))) {
          CHECK(bits(row(sparse.table, r)) == bits(row(dense.table, r)));
          CHECK(bits(row(sparse.master, r)) == bits(row(dense.master, r)));
          CHECK(bits(row(sparse.exp_avg, r)) == bits(row(dense.exp_avg, r)));
          CHECK(bits(row(sparse.exp_avg_sq, r)) == bits(row(dense.exp_avg_sq, r)));
          CHECK(row(sparse.table, r) != row(table0, r));
        } else {  // untouched (and the padding row 0): value and zero moments kept
          CHECK(bits(row(sparse.table, r)) == bits(row(table0, r)));
          CHECK(row(sparse.exp_avg, r) == std::vector<float>(kC, 0.0f));
          CHECK(row(sparse.exp_avg_sq, r) == std::vector<float>(kC, 0.0f));
        }
      }
      // The dense run decays untouched rows (weight decay 0.1): the lazy choice is visible.
      CHECK(row(dense.master, 5) != row(table0, 5));
    }
  }
}

TEST_CASE("lazy AdamW and SGD: a row missing from a step keeps its value and state through it", "[sparse][optim]") {
  // Rows {1, 2} at step 1, row {2} at step 2. Row 2, touched at both, follows a dense twin;
  // row 1 is frozen at its step-1 state; rows 0 and 3 never move.
  const std::vector<SparseRows> grads = {{{1, 2}, Tensor::from_vector({0.5f, -1.0f, 2.0f, 0.25f}, {2, 2})},
                                         {{2}, Tensor::from_vector({-0.75f, 1.5f}, {1, 2})}};
  for (const bool adam : {true, false}) {
    INFO((adam ? "AdamW" : "SGD with momentum"));
    const std::vector<float> init = {1, 2, 3, 4, 5, 6, 7, 8};
    Tensor sparse = Tensor::from_vector(init, {4, 2}).set_requires_grad();
    Tensor dense = Tensor::from_vector(init, {4, 2}).set_requires_grad();
    auto make = [adam](const Tensor& p) -> std::unique_ptr<Optimizer> {
      if (adam) return std::make_unique<AdamW>(std::vector<ParamGroup>{{{p}, 0.1f, 0.2f}});
      return std::make_unique<SGD>(std::vector<ParamGroup>{{{p}, 0.1f, 0.2f}}, SGDOptions{.momentum = 0.9f});
    };
    const auto sparse_opt = make(sparse), dense_opt = make(dense);
    const std::string first_state = adam ? "state.0.exp_avg" : "state.0.momentum_buffer";
    std::vector<float> row1_after_step1, state1_after_step1;
    for (const SparseRows& g : grads) {
      sparse.set_sparse_grad(g);
      dense.set_grad(to_dense(g, dense.shape()));
      sparse_opt->step();
      dense_opt->step();
      if (row1_after_step1.empty()) {
        row1_after_step1 = row(sparse.to_vector(), 1, 2);
        state1_after_step1 = row(sparse_opt->state_dict().tensors.at(first_state).to_vector(), 1, 2);
      }
    }
    const std::vector<float> p = sparse.to_vector();
    const std::vector<float> state = sparse_opt->state_dict().tensors.at(first_state).to_vector();
    CHECK(bits(row(p, 2, 2)) == bits(row(dense.to_vector(), 2, 2)));
    CHECK(bits(row(state, 2, 2)) == bits(row(dense_opt->state_dict().tensors.at(first_state).to_vector(), 2, 2)));
    CHECK(bits(row(p, 1, 2)) == bits(row1_after_step1));
    CHECK(bits(row(state, 1, 2)) == bits(state1_after_step1));
    CHECK(row(p, 1, 2) != row(dense.to_vector(), 1, 2));  // the dense twin moved row 1 at step 2
    CHECK(row(p, 0, 2) == std::vector<float>{1, 2});
    CHECK(row(p, 3, 2) == std::vector<float>{7, 8});
    CHECK(row(state, 0, 2) == std::vector<float>{0, 0});
  }
}

TEST_CASE("an inf in a sparse gradient is found and the step skipped as on the dense path, fp16 O2",
          "[sparse][optim]") {
  // Every position holds id 5 and every label is 0, so the 4 x 64 activation gradients of row 5
  // all point one way. Each is about scale / 4 * |head^T (p - e0)| ~ 1e4 at scale 2^16: finite in
  // f16. Their sum in row 5's gradient is 256 times that, past f16's 65504: inf. The head's own
  // gradients stay finite (tiny table values, std 1e-3). So only the sparse gradient overflows,
  // and the scaler must find it there: the step is skipped and the scale halves until the sum
  // fits, exactly as on the dense path.
  const MicroBatch batch{Indices(std::vector<int32_t>(256, 5), {4, 64}), Indices({0, 0, 0, 0}, {4})};
  const std::vector<std::vector<MicroBatch>> plan(10, {batch});
  const Run dense = train(false, Precision::kFp16, plan, 0.0f, 1e-3f, 0.5f);
  const Run sparse = train(true, Precision::kFp16, plan, 0.0f, 1e-3f, 0.5f);
  REQUIRE_FALSE(sparse.steps[0].stepped);
  CHECK(sparse.scaler[0].first_nonfinite == "tok.weight");
  CHECK(sparse.steps.back().stepped);
  for (size_t s = 0; s < plan.size(); ++s) {
    INFO("step " << s);
    CHECK(sparse.steps[s].stepped == dense.steps[s].stepped);
    CHECK(sparse.steps[s].scale == dense.steps[s].scale);
    CHECK(sparse.scaler[s].first_nonfinite == dense.scaler[s].first_nonfinite);
  }
  CHECK(bits(row(sparse.table, 5)) == bits(row(dense.table, 5)));
  CHECK(bits(row(sparse.master, 5)) == bits(row(dense.master, 5)));
  CHECK(bits(sparse.head) == bits(dense.head));

  // The overflow is the sparse gradient's alone: after the backward of the first step, the
  // head's gradients are finite and row 5's stored values are not.
  Bag model(true, 1e-3f, 0.5f);
  MixedPrecision mp(model, {.precision = Precision::kFp16});
  {
    Autocast guard = mp.autocast();
    backward(mp.scale(cross_entropy(model.forward(batch.ids), batch.labels)));
  }
  REQUIRE(model.tok->weight.sparse_grad() != nullptr);
  CHECK(model.tok->weight.sparse_grad()->rows == std::vector<int64_t>{5});
  bool table_inf = false, head_finite = true;
  for (float v : model.tok->weight.grad_values().to_vector()) table_inf = table_inf || std::isinf(v);
  for (const Tensor& t : {model.head->weight, model.head->bias}) {
    for (float v : t.grad().to_vector()) head_finite = head_finite && std::isfinite(v);
  }
  CHECK(table_inf);
  CHECK(head_finite);
}

TEST_CASE("converting a model drops its sparse gradients with the dense ones", "[sparse][optim]") {
  Bag model(true, 0.5f, 0.5f);
  backward(cross_entropy(model.forward(Indices({1, 2, 3, 4}, {2, 2})), Indices({0, 1}, {2})));
  REQUIRE(model.tok->weight.sparse_grad() != nullptr);
  model.to(DType::f16);
  CHECK_FALSE(model.tok->weight.has_grad());
  CHECK_FALSE(model.head->weight.has_grad());
}

TEST_CASE("a sparse step over many rows, in chunks and on a team, matches the dense step bit for bit",
          "[sparse][optim]") {
  // About 600 touched rows of width 128: the update runs in chunks of 128 rows, and after the
  // first step the chunks after the first on a team when there are threads (enough elements for
  // one). Every step touches the same rows, so they follow the dense twin.
  constexpr int64_t kRows = 1000, kWidth = 128;
  Generator gen(23);
  std::vector<int64_t> rows;
  for (int64_t r = 0; r < kRows; ++r) {
    if (gen.next_u32() % 5 < 3) rows.push_back(r);
  }
  REQUIRE((int64_t(rows.size()) - 128) * kWidth >= kParallelElements);  // enough for a team
  const Tensor init = Tensor::randn({kRows, kWidth}, gen);
  for (const bool adam : {true, false}) {
    INFO((adam ? "AdamW" : "SGD with momentum"));
    Tensor sparse = init.clone().set_requires_grad(), dense = init.clone().set_requires_grad();
    auto make = [adam](const Tensor& p) -> std::unique_ptr<Optimizer> {
      if (adam) return std::make_unique<AdamW>(std::vector<ParamGroup>{{{p}, 0.01f, 0.1f}});
      return std::make_unique<SGD>(std::vector<ParamGroup>{{{p}, 0.01f, 0.1f}}, SGDOptions{.momentum = 0.9f});
    };
    const auto sparse_opt = make(sparse), dense_opt = make(dense);
    for (int step = 0; step < 3; ++step) {
      const SparseRows g{rows, Tensor::randn({int64_t(rows.size()), kWidth}, gen)};
      sparse.set_sparse_grad(g);
      dense.set_grad(to_dense(g, dense.shape()));
      sparse_opt->step();
      dense_opt->step();
    }
    const std::vector<float> p = sparse.to_vector(), q = dense.to_vector(), p0 = init.to_vector();
    std::map<std::string, std::pair<std::vector<float>, std::vector<float>>> state;  // sparse, dense
    const OptimizerState s = sparse_opt->state_dict(), d = dense_opt->state_dict();
    REQUIRE(s.tensors.size() == d.tensors.size());
    for (const auto& [name, tensor] : s.tensors) state[name] = {tensor.to_vector(), d.tensors.at(name).to_vector()};
    const std::set<int64_t> touched(rows.begin(), rows.end());
    for (int64_t r = 0; r < kRows; ++r) {
      INFO("row " << r);
      if (touched.contains(r)) {
        CHECK(bits(row(p, r, kWidth)) == bits(row(q, r, kWidth)));
        for (const auto& [name, values] : state) {
          INFO(name);
          CHECK(bits(row(values.first, r, kWidth)) == bits(row(values.second, r, kWidth)));
        }
      } else {
        CHECK(bits(row(p, r, kWidth)) == bits(row(p0, r, kWidth)));
      }
    }
  }
}

}  // namespace hg::optim
