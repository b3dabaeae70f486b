// TextClassifier against PyTorch golden values (tests/nn/golden/make_text_classifier.py), and
// the Module contract: dotted names, state dict round trip, named errors, train/eval, to().
//
// Tolerance: as in test_golden_encoder.cpp (f32 halfgrad vs a float64 reference on the same
// f32 weights): each f32 op rounds at 2^-24 relative; two layers double the chain of the
// encoder-layer test, so 2e-4 * (1 + |want|) keeps the same margin.
#include <catch2/catch.hpp>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "halfgrad/autograd/all_ops.h"
#include "halfgrad/autograd/tape.h"
#include "halfgrad/base/error.h"
#include "halfgrad/nn/text_classifier.h"
#include "halfgrad/optim/adam.h"
#include "halfgrad/optim/param_groups.h"
#include "halfgrad/precision/half.h"

namespace hg::nn {
namespace {

nlohmann::json load_golden() {
  // A path, not std::string + "...": GCC 12 warns falsely (-Warray-bounds) on that concatenation
  // when this file shares a translation unit with others (the test command's unity build).
  std::ifstream file(std::filesystem::path(HALFGRAD_SOURCE_DIR) / "tests/nn/golden/text_classifier.json");
  REQUIRE(file.good());
  return nlohmann::json::parse(file);
}

ClassifierConfig tiny_config(const nlohmann::json& g) {
  const auto& c = g["config"];
  ClassifierConfig config;
  config.vocab = c["vocab"];
  config.max_len = c["max_len"];
  config.d_model = c["d_model"];
  config.heads = c["heads"];
  config.d_ff = c["d_ff"];
  config.layers = c["layers"];
  config.classes = c["classes"];
  config.dropout = 0.0f;
  return config;
}

Indices indices(const nlohmann::json& values, Shape shape) {
  std::vector<int32_t> out;
  for (float v : values.get<std::vector<float>>()) out.push_back(int32_t(v));
  return Indices(out, shape);
}

void check_close(const std::vector<float>& got, const std::vector<float>& want, const std::string& what) {
  REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    INFO(what << "[" << i << "]: got " << got[i] << " want " << want[i]);
    CHECK(std::abs(got[i] - want[i]) <= 2e-4f * (1.0f + std::abs(want[i])));
  }
}

}  // namespace

TEST_CASE("TextClassifier forward, loss and every gradient match PyTorch", "[nn][golden]") {
  const nlohmann::json g = load_golden();
  TextClassifier model(tiny_config(g), 0);
  StateDict state;
  for (const auto& [name, tensor] : model.state_dict()) {
    state[name] = Tensor::from_vector(g["params"][name].get<std::vector<float>>(), tensor.shape());
  }
  model.load_state_dict(state);
  const int64_t b = g["B"], t = g["T"];
  const Tensor logits = model.forward(indices(g["ids"], {b, t}), indices(g["mask"], {b, t}));
  check_close(logits.to_vector(), g["logits"].get<std::vector<float>>(), "logits");
  const Tensor loss = cross_entropy(logits, indices(g["labels"], {b}));
  check_close({loss.item()}, {g["loss"].get<float>()}, "loss");
  backward(loss);
  for (const auto& [name, tensor] : model.named_parameters()) {
    check_close(tensor.grad().to_vector(), g["grads"][name].get<std::vector<float>>(), "grad " + name);
  }
}

TEST_CASE("Module names parameters with PyTorch-style dotted paths", "[nn]") {
  ClassifierConfig config;
  config.layers = 2;
  TextClassifier model(config, 3);
  const NamedTensors named = model.named_parameters();
  std::vector<std::string> names;
  for (const auto& [name, tensor] : named) names.push_back(name);
  CHECK(names.front() == "token_embedding.weight");
  CHECK(std::find(names.begin(), names.end(), "encoder.layers.0.attn.q_proj.weight") != names.end());
  CHECK(std::find(names.begin(), names.end(), "encoder.layers.1.ff.fc2.bias") != names.end());
  CHECK(names.back() == "head.bias");
  // 2 embeddings + 2 layers x (2 LN x 2 + 4 proj x 2 + 2 fc x 2 = 16) + norm 2 + head 2
  CHECK(names.size() == 2 + 2 * 16 + 2 + 2);
  // vocab 256 x 128 + 32 x 128 + per layer (4 (128x128 + 128) + 2 (2 x 128) + 128x512 + 512 + 512x128 + 128)
  // + norm 256 + head (128 x 2 + 2)
  const int64_t per_layer = 4 * (128 * 128 + 128) + 4 * 128 + 128 * 512 + 512 + 512 * 128 + 128;
  CHECK(model.parameter_count() == 256 * 128 + 32 * 128 + 2 * per_layer + 256 + 128 * 2 + 2);
  CHECK(named[0].second.name() == "token_embedding.weight");
}

TEST_CASE("state dict round trip, and a wrong shape or key is a named error", "[nn]") {
  ClassifierConfig config;
  config.d_model = 16;
  config.heads = 2;
  config.d_ff = 32;
  TextClassifier a(config, 1), b(config, 2);
  CHECK(a.state_dict().at("head.weight").to_vector() != b.state_dict().at("head.weight").to_vector());
  b.load_state_dict(a.state_dict());
  for (const auto& [name, tensor] : a.state_dict()) CHECK(b.state_dict().at(name).to_vector() == tensor.to_vector());
  a.head->weight.f32()[0] += 1.0f;  // b holds a copy, not a view
  CHECK(b.head->weight.f32()[0] != a.head->weight.f32()[0]);

  StateDict bad = a.state_dict();
  bad["head.weight"] = Tensor::zeros({3, 16});
  REQUIRE_THROWS_WITH(b.load_state_dict(bad),
                      Catch::Contains("'head.weight'") && Catch::Contains("(3, 16)") && Catch::Contains("(2, 16)"));
  StateDict missing = a.state_dict();
  missing.erase("norm.bias");
  REQUIRE_THROWS_WITH(b.load_state_dict(missing), Catch::Contains("missing key 'norm.bias'"));
  StateDict extra = a.state_dict();
  extra["extra.weight"] = Tensor::zeros({1});
  REQUIRE_THROWS_WITH(b.load_state_dict(extra), Catch::Contains("unexpected key 'extra.weight'"));
  CHECK_NOTHROW(b.load_state_dict(extra, /*strict=*/false));
}

TEST_CASE("config validation names the bad field", "[nn]") {
  ClassifierConfig config;
  config.heads = 3;
  REQUIRE_THROWS_WITH(TextClassifier(config, 0), Catch::Contains("heads (3) must divide d_model (128)"));
  config.heads = 4;
  config.layers = 0;
  config.pooling = Pooling::kCls;
  REQUIRE_THROWS_WITH(TextClassifier(config, 0), Catch::Contains("pooling cls needs layers >= 1"));
}

// The bag model (position_embedding kNone, layers 0): logits = head(mean over the real tokens of
// LayerNorm(embedding row)), checked against that formula in double; order and padding do not
// change the output, with or without encoder layers.
TEST_CASE("a bag model ignores token order and padding and matches the fastText formula", "[nn]") {
  ClassifierConfig config{.vocab = 50,
                          .max_len = 8,
                          .d_model = 8,
                          .heads = 2,
                          .d_ff = 16,
                          .layers = 0,
                          .classes = 3,
                          .dropout = 0.0f,
                          .position_embedding = PositionEmbedding::kNone};
  TextClassifier model(config, 7);
  for (const auto& [name, tensor] : model.named_parameters()) CHECK(name.find("position") == std::string::npos);
  CHECK(model.position_embedding == nullptr);
  CHECK(model.parameter_count() == 50 * 8 + 2 * 8 + 8 * 3 + 3);
  model.eval();
  NoGrad no_grad;
  auto logits = [&](const TextClassifier& m, std::vector<int32_t> ids, std::vector<int32_t> mask) {
    const int64_t t = int64_t(ids.size());
    return m.forward(Indices(std::move(ids), {1, t}), Indices(std::move(mask), {1, t})).to_vector();
  };
  const std::vector<float> got = logits(model, {5, 7, 9}, {1, 1, 1});
  // The formula, in double (LayerNorm eps 1e-5, its weight 1 and bias 0 at initialisation).
  const std::vector<float> table = model.token_embedding->weight.to_vector();
  std::vector<double> pooled(8, 0.0);
  for (int32_t id : {5, 7, 9}) {
    double mean = 0, var = 0;
    for (size_t c = 0; c < 8; ++c) mean += table[size_t(id) * 8 + c] / 8.0;
    for (size_t c = 0; c < 8; ++c) var += (table[size_t(id) * 8 + c] - mean) * (table[size_t(id) * 8 + c] - mean) / 8.0;
    for (size_t c = 0; c < 8; ++c) pooled[c] += (table[size_t(id) * 8 + c] - mean) / std::sqrt(var + 1e-5) / 3.0;
  }
  const std::vector<float> w = model.head->weight.to_vector(), b = model.head->bias.to_vector();
  for (size_t k = 0; k < 3; ++k) {
    double want = b[k];
    for (size_t c = 0; c < 8; ++c) want += w[k * 8 + c] * pooled[c];
    CHECK(got[k] == Approx(want).margin(1e-5));
  }
  const std::vector<float> shuffled_padded = logits(model, {9, 5, 7, 0, 0}, {1, 1, 1, 0, 0});
  for (size_t k = 0; k < 3; ++k) CHECK(shuffled_padded[k] == Approx(got[k]).margin(1e-6));

  config.layers = 1;  // attention without positions is permutation-equivariant; the mean, invariant
  TextClassifier deep(config, 7);
  deep.eval();
  const std::vector<float> a = logits(deep, {5, 7, 9, 0}, {1, 1, 1, 0}), c = logits(deep, {7, 9, 5}, {1, 1, 1});
  for (size_t k = 0; k < 3; ++k) CHECK(a[k] == Approx(c[k]).margin(1e-5));
}

// bag_skip: logits = head(pool(encoder path) + mean_t bag_norm(tok[ids_t])). The same seed without
// bag_skip builds the same weights (bag_norm, a LayerNorm, draws nothing), so the difference of
// the two models' logits is head.weight times the bag's mean, given in double by the formula of
// the bag test above with bag_norm's own weight and bias (set apart from norm's, so that using
// the final norm there, or the positions, would fail). Same f32 tolerance as the bag test.
TEST_CASE("bag_skip adds the mean of bag_norm over the token rows, without positions, to the pooled output", "[nn]") {
  ClassifierConfig config{.vocab = 50,
                          .max_len = 8,
                          .d_model = 8,
                          .heads = 2,
                          .d_ff = 16,
                          .layers = 1,
                          .classes = 3,
                          .dropout = 0.0f,
                          .position_embedding = PositionEmbedding::kLearned,
                          .bag_skip = true};
  TextClassifier skip(config, 7);
  config.bag_skip = false;
  TextClassifier plain(config, 7);
  StateDict state = skip.state_dict();
  CHECK(state.size() == plain.state_dict().size() + 2);
  for (const auto& [name, tensor] : plain.state_dict()) CHECK(state.at(name).to_vector() == tensor.to_vector());
  std::vector<float> gain(8), shift(8);
  for (size_t c = 0; c < 8; ++c) {
    gain[c] = 0.5f + 0.25f * float(c);
    shift[c] = 0.125f * float(c) - 0.5f;
  }
  state.at("bag_norm.weight") = Tensor::from_vector(gain, {8});
  state.at("bag_norm.bias") = Tensor::from_vector(shift, {8});
  skip.load_state_dict(state);
  skip.eval();
  plain.eval();
  NoGrad no_grad;
  const std::vector<int32_t> ids = {5, 7, 9, 0};
  const Indices in(ids, {1, 4}), mask({1, 1, 1, 0}, {1, 4});
  const std::vector<float> with = skip.forward(in, mask).to_vector(), without = plain.forward(in, mask).to_vector();
  const std::vector<float> table = skip.token_embedding->weight.to_vector();
  std::vector<double> bag(8, 0.0);
  for (int32_t id : {5, 7, 9}) {
    double mean = 0, var = 0;
    for (size_t c = 0; c < 8; ++c) mean += table[size_t(id) * 8 + c] / 8.0;
    for (size_t c = 0; c < 8; ++c) var += (table[size_t(id) * 8 + c] - mean) * (table[size_t(id) * 8 + c] - mean) / 8.0;
    for (size_t c = 0; c < 8; ++c) {
      bag[c] += (gain[c] * (table[size_t(id) * 8 + c] - mean) / std::sqrt(var + 1e-5) + shift[c]) / 3.0;
    }
  }
  const std::vector<float> w = skip.head->weight.to_vector();
  for (size_t k = 0; k < 3; ++k) {
    double want = 0;
    for (size_t c = 0; c < 8; ++c) want += w[k * 8 + c] * bag[c];
    CHECK(with[k] - without[k] == Approx(want).margin(1e-5));
  }

  config.layers = 0;  // a bag with bag_skip: refused, naming the field
  config.bag_skip = true;
  config.position_embedding = PositionEmbedding::kNone;
  CHECK_THROWS_WITH(TextClassifier(config, 7), Catch::Contains("bag_skip needs layers >= 1"));
}

// encoder_drop_path p: in training each example's pooled encoder output e is dropped or scaled by
// 1 / (1 - p) = 2 (p = 0.5), so, the head being linear, its logits are either the bag's alone
// (the model with norm's weight and bias zeroed: e = 0) or 2 * full - bag, where full are the
// logits of the model in evaluation, which the drop path leaves alone (they equal those of the
// same seed without it: no weight is drawn for it). dropout 0, so the drop path is the only
// random draw. 16 examples: each outcome must occur (both at once fail with probability 2^-15).
TEST_CASE("encoder_drop_path drops whole examples' encoder output in training and nothing in evaluation", "[nn]") {
  ClassifierConfig config{.vocab = 50,
                          .max_len = 8,
                          .d_model = 8,
                          .heads = 2,
                          .d_ff = 16,
                          .layers = 1,
                          .classes = 3,
                          .dropout = 0.0f,
                          .position_embedding = PositionEmbedding::kNone,
                          .bag_skip = true,
                          .encoder_drop_path = 0.5f};
  TextClassifier dropped(config, 7);
  config.encoder_drop_path = 0.0f;
  TextClassifier plain(config, 7), bag(config, 7);
  StateDict state = plain.state_dict();
  state.at("norm.weight") = Tensor::zeros({8});
  state.at("norm.bias") = Tensor::zeros({8});
  bag.load_state_dict(state);
  plain.eval();
  bag.eval();
  std::vector<int32_t> ids;
  for (int32_t i = 0; i < 16 * 4; ++i) ids.push_back(1 + (i * 7 + i / 4) % 49);
  const Indices in(ids, {16, 4}), mask(std::vector<int32_t>(64, 1), {16, 4});
  NoGrad no_grad;
  const std::vector<float> full = plain.forward(in, mask).to_vector(), alone = bag.forward(in, mask).to_vector();
  dropped.eval();
  CHECK(dropped.forward(in, mask).to_vector() == full);
  dropped.train();
  const std::vector<float> got = dropped.forward(in, mask).to_vector();
  int kept = 0, gone = 0;
  for (size_t row = 0; row < 16; ++row) {
    bool is_kept = true, is_gone = true;
    for (size_t k = 0; k < 3; ++k) {
      const size_t i = row * 3 + k;
      is_gone = is_gone && std::abs(got[i] - alone[i]) <= 1e-5f;
      is_kept = is_kept && std::abs(got[i] - (2.0f * full[i] - alone[i])) <= 1e-5f;
    }
    INFO("row " << row);
    CHECK(is_kept != is_gone);
    kept += is_kept;
    gone += is_gone;
  }
  CHECK(kept > 0);
  CHECK(gone > 0);

  config.encoder_drop_path = 0.5f;  // without the bag path: refused, naming the fields
  config.bag_skip = false;
  CHECK_THROWS_WITH(TextClassifier(config, 7), Catch::Contains("encoder_drop_path needs bag_skip"));
  config.bag_skip = true;
  config.encoder_drop_path = 1.0f;
  CHECK_THROWS_WITH(TextClassifier(config, 7), Catch::Contains("encoder_drop_path must be in [0, 1)"));
}

// Two texts of the same tokens in opposite orders, with opposite labels: learned positions
// separate them (the loss falls near 0 in 100 AdamW steps), while without positions the logits
// of the two are equal (up to the f32 rounding of a reordered mean over 3 rows; tolerance as in
// the bag test above), so no training can tell them apart and the loss stays at ln 2 or above.
TEST_CASE("learned positions separate two texts that differ only in token order, a bag cannot", "[nn]") {
  for (const int64_t layers : {int64_t{1}, int64_t{0}}) {
    for (const PositionEmbedding positions : {PositionEmbedding::kLearned, PositionEmbedding::kNone}) {
      INFO("layers " << layers << ", positions " << to_string(positions));
      const ClassifierConfig config{.vocab = 10,
                                    .max_len = 4,
                                    .d_model = 8,
                                    .heads = 2,
                                    .d_ff = 16,
                                    .layers = layers,
                                    .classes = 2,
                                    .dropout = 0.0f,
                                    .position_embedding = positions};
      TextClassifier model(config, 3);
      optim::AdamW optimizer(optim::decay_groups(model.named_parameters(), 3e-2f, 0.0f));
      const Indices ids({4, 7, 9, 9, 7, 4}, {2, 3}), mask({1, 1, 1, 1, 1, 1}, {2, 3}), labels({0, 1}, {2});
      float loss = 0;
      for (int step = 0; step < 100; ++step) {
        const Tensor l = cross_entropy(model.forward(ids, mask), labels);
        loss = l.item();
        backward(l);
        optimizer.step();
        optimizer.zero_grad();
        model.zero_grad();
      }
      NoGrad no_grad;
      const std::vector<float> logits = model.forward(ids, mask).to_vector();  // rows: 4 7 9, then 9 7 4
      if (positions == PositionEmbedding::kLearned) {
        CHECK(loss < 0.05f);
        CHECK(logits[0] > logits[1]);
        CHECK(logits[3] > logits[2]);
      } else {
        CHECK(loss >= std::log(2.0f) - 1e-4f);  // the best two equal rows can do against labels 0, 1
        CHECK(logits[0] == Approx(logits[2]).margin(1e-5));
        CHECK(logits[1] == Approx(logits[3]).margin(1e-5));
      }
    }
  }
}

TEST_CASE("to(dtype) converts parameters in place and train/eval toggles dropout", "[nn]") {
  ClassifierConfig config;
  config.d_model = 16;
  config.heads = 2;
  config.d_ff = 32;
  config.dropout = 0.5f;
  TextClassifier model(config, 4);
  const Tensor weight = model.head->weight;  // a handle held elsewhere (an optimizer)
  const std::vector<float> before = weight.to_vector();
  model.to(DType::f16);
  CHECK(weight.dtype() == DType::f16);
  const std::vector<float> after = weight.to_vector();
  for (size_t i = 0; i < before.size(); ++i) CHECK(after[i] == hg::half(before[i]).to_float());

  const Indices ids({1, 2, 3, 4}, {1, 4}), mask({1, 1, 1, 1}, {1, 4});
  model.eval();
  const std::vector<float> e1 = model.forward(ids, mask).to_vector(), e2 = model.forward(ids, mask).to_vector();
  CHECK(e1 == e2);
  model.train();
  CHECK(model.forward(ids, mask).to_vector() != e1);
  active_tape().clear();
}

}  // namespace hg::nn
