// A pre-LN transformer encoder layer built from halfgrad ops, forward and backward, against
// PyTorch golden values (tests/autograd/golden/make_encoder_layer.py regenerates them; the
// test needs only the committed JSON).
//
// Tolerance: the reference is float64 on the same f32 inputs; halfgrad rounds each f32 op's
// result (2^-24 relative). Through ~50 dependent roundings with condition numbers up to ~10
// (layer norm of a row with small variance), the error stays below 50 * 10 * 2^-24 = 3e-5
// relative; 1e-4 * (1 + |want|) leaves margin and still catches any wrong term.
#include <catch2/catch.hpp>

#include <cmath>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>

#include "halfgrad/autograd/all_ops.h"
#include "halfgrad/autograd/tape.h"

namespace hg {

TEST_CASE("transformer encoder layer matches PyTorch forward and backward", "[golden]") {
  std::ifstream file(std::string(HALFGRAD_SOURCE_DIR) + "/tests/autograd/golden/encoder_layer.json");
  REQUIRE(file.good());
  const nlohmann::json golden = nlohmann::json::parse(file);
  const auto& cfg = golden["config"];
  const int64_t b = cfg["B"], t = cfg["T"], c = cfg["C"], h = cfg["H"], ff = cfg["FF"], d = c / h;
  const std::map<std::string, Shape> shapes = {{"x", {b, t, c}},        {"ln1.weight", {c}},     {"ln1.bias", {c}},
                                               {"q.weight", {c, c}},    {"q.bias", {c}},         {"k.weight", {c, c}},
                                               {"k.bias", {c}},         {"v.weight", {c, c}},    {"v.bias", {c}},
                                               {"out.weight", {c, c}},  {"out.bias", {c}},       {"ln2.weight", {c}},
                                               {"ln2.bias", {c}},       {"ff1.weight", {ff, c}}, {"ff1.bias", {ff}},
                                               {"ff2.weight", {c, ff}}, {"ff2.bias", {c}}};
  std::map<std::string, Tensor> p;
  for (const auto& [name, shape] : shapes) {
    p[name] = Tensor::from_vector(golden["inputs"][name].get<std::vector<float>>(), shape).set_requires_grad();
  }
  std::vector<int32_t> mask;
  for (float m : golden["mask"].get<std::vector<float>>()) mask.push_back(int32_t(m));
  const Indices attention_mask(mask, {b, t});

  auto heads = [&](const Tensor& x) { return permute(reshape(x, {b, t, h, d}), {0, 2, 1, 3}); };
  const Tensor& x = p["x"];
  const Tensor a = layer_norm(x, p["ln1.weight"], p["ln1.bias"]);
  const Tensor q = heads(linear(a, p["q.weight"], p["q.bias"]));
  const Tensor k = heads(linear(a, p["k.weight"], p["k.bias"]));
  const Tensor v = heads(linear(a, p["v.weight"], p["v.bias"]));
  const Tensor att = reshape(permute(scaled_dot_product_attention(q, k, v, attention_mask), {0, 2, 1, 3}), {b, t, c});
  const Tensor hidden = add(x, linear(att, p["out.weight"], p["out.bias"]));
  const Tensor n2 = layer_norm(hidden, p["ln2.weight"], p["ln2.bias"]);
  const Tensor y =
      add(hidden, linear(gelu(linear(n2, p["ff1.weight"], p["ff1.bias"])), p["ff2.weight"], p["ff2.bias"]));

  auto check_close = [](const std::vector<float>& got, const std::vector<float>& want, const std::string& what) {
    REQUIRE(got.size() == want.size());
    for (size_t i = 0; i < got.size(); ++i) {
      INFO(what << "[" << i << "]: got " << got[i] << " want " << want[i]);
      CHECK(std::abs(got[i] - want[i]) <= 1e-4f * (1.0f + std::abs(want[i])));
    }
  };
  check_close(y.to_vector(), golden["y"].get<std::vector<float>>(), "y");
  const Tensor r = Tensor::from_vector(golden["R"].get<std::vector<float>>(), {b, t, c});
  backward(sum(mul(y, r)));
  for (const auto& [name, tensor] : p) {
    check_close(tensor.grad().to_vector(), golden["grads"][name].get<std::vector<float>>(), "grad " + name);
  }
}

}  // namespace hg
