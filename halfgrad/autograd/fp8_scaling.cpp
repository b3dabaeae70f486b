// The delayed-scaling recipe's scale update, the saturating operand cast, the scale state's JSON
// and the cast records handed to a CastObserver (see fp8_scaling.h, fp8_cast.h).
#include "halfgrad/autograd/fp8_scaling.h"

#include <algorithm>
#include <bit>
#include <cfloat>
#include <cmath>
#include <utility>

#include "halfgrad/autograd/fp8_cast.h"
#include "halfgrad/base/error.h"
#include "halfgrad/precision/convert.h"

namespace hg {

precision::FloatFormat Fp8Recipe::format_of(Fp8Role role) const {
  return format == Format::kHybrid && role == Fp8Role::kGradOutput ? precision::kE5M2 : precision::kE4M3;
}

void Fp8Recipe::validate() const {
  check(amax_history_len >= 1 && amax_history_len <= 65536,
        "fp8_amax_history_len (--fp8-amax-history-len) must be in [1, 65536], got ", amax_history_len);
  check(margin >= 0 && margin <= 64, "fp8_margin (--fp8-margin) must be in [0, 64], got ", margin);
}

float fp8_scale_from_amax(const Fp8Recipe& recipe, float amax, float previous_scale, float fp8_max) {
  if (recipe.scale == Fp8Recipe::Scale::kNone) return 1.0f;
  if (!(std::isfinite(amax) && amax > 0)) return previous_scale;
  if (recipe.scale == Fp8Recipe::Scale::kExact) {
    const float scale = std::ldexp(fp8_max, -int(recipe.margin)) / amax;
    return std::isinf(scale) ? FLT_MAX : scale;
  }
  // floor(log2(fp8_max / amax)) without rounding: amax * 2^e lies in fp8_max's binade for
  // e = ilogb(fp8_max) - ilogb(amax); one less if it exceeds fp8_max (exact in double).
  int e = std::ilogb(fp8_max) - std::ilogb(amax);
  if (std::ldexp(double(amax), e) > double(fp8_max)) --e;
  return std::ldexp(1.0f, int(std::clamp<int64_t>(e - recipe.margin, -126, 127)));
}

void Fp8TensorScale::update(const Fp8Recipe& recipe, float fp8_max) {
  if (recipe.scale == Fp8Recipe::Scale::kNone) {
    amax_history[0] = 0;
    return;
  }
  if (amax_history[0] == 0) return;
  float amax = amax_history[0];
  if (recipe.amax_compute_algo == Fp8Recipe::AmaxAlgo::kMax) {
    for (float a : amax_history) amax = std::fmax(amax, a);
  }
  scale = fp8_scale_from_amax(recipe, amax, scale, fp8_max);
  std::rotate(amax_history.begin(), amax_history.begin() + 1, amax_history.end());
  amax_history[0] = 0;
}

Fp8Scaling::Fp8Scaling(Fp8Recipe recipe) : recipe_(recipe) { recipe_.validate(); }

std::string Fp8Scaling::key_of(const Tensor& weight) {
  const std::string& name = weight.name();
  check(!name.empty(), "linear under fp8: the weight ", weight.shape(),
        " has no name, and its scales are keyed by it (register it in a Module, or set_name)");
  const std::string suffix = ".weight";
  const bool module_weight = name.size() > suffix.size() && name.ends_with(suffix);
  return module_weight ? name.substr(0, name.size() - suffix.size()) : name;
}

Fp8Scaling::Gemm& Fp8Scaling::gemm(const std::string& key) {
  auto it = gemms_.find(key);
  if (it == gemms_.end()) {
    Gemm fresh;
    for (Fp8TensorScale& s : fresh) s.amax_history.assign(size_t(recipe_.amax_history_len), 0.0f);
    it = gemms_.emplace(key, std::move(fresh)).first;
  }
  return it->second;
}

Fp8Operand Fp8Scaling::quantize(const std::string& key, Fp8Role role, const Tensor& x, bool record_amax) {
  Fp8TensorScale& s = gemm(key)[size_t(role)];
  const precision::FloatFormat format = recipe_.format_of(role);
  std::vector<float> values = x.to_vector();
  // max |x| on the bits: without the sign, a float's bits order as its magnitude, and every NaN's
  // lie above inf's, so NaN is skipped (as CUDA's fmaxf does); an integer max that vectorizes.
  uint32_t amax_bits = 0;
#pragma omp simd reduction(max : amax_bits)
  for (size_t i = 0; i < values.size(); ++i) {
    const uint32_t magnitude = std::bit_cast<uint32_t>(values[i]) & 0x7FFFFFFFu;
    amax_bits = std::max(amax_bits, magnitude <= 0x7F800000u ? magnitude : 0u);
  }
  const float amax = std::bit_cast<float>(amax_bits);
  if (s.scale != 1.0f) {
    for (float& v : values) v *= s.scale;  // in f32, as TE's cast computes elt * scale
  }
  Fp8CastObserver* observer = record_amax ? fp8_cast_observer() : nullptr;  // training's casts only
  Fp8Cast cast{.key = key, .role = role, .format = format, .scale = s.scale, .amax = amax};
  const RoundingOptions saturating{.saturate = true, .saturate_inf = true};
  precision::round_to(format, values, {.rounding = saturating, .stats = observer ? &cast.stats : nullptr});
  if (record_amax) s.amax_history[0] = std::fmax(s.amax_history[0], amax);
  if (observer != nullptr) observer->add(std::move(cast));
  return {Tensor::from_vector(values, x.shape()), 1.0f / s.scale};
}

void Fp8Scaling::update() {
  for (auto& [key, gemm] : gemms_) {
    for (Fp8Role role : kFp8Roles) {
      const precision::FloatFormat format = recipe_.format_of(role);
      gemm[size_t(role)].update(recipe_, decode(format, format.max_finite_bits()));  // 448 or 57344
    }
  }
}

std::vector<float> Fp8Scaling::staged_amaxes() const {
  std::vector<float> amaxes;
  amaxes.reserve(gemms_.size() * kFp8Roles.size());
  for (const auto& [key, gemm] : gemms_) {
    for (const Fp8TensorScale& s : gemm) amaxes.push_back(s.amax_history[0]);
  }
  return amaxes;
}

void Fp8Scaling::set_staged_amaxes(const std::vector<float>& amaxes) {
  check(amaxes.size() == gemms_.size() * kFp8Roles.size(), "fp8 scaling: ", amaxes.size(), " staged amaxes for ",
        gemms_.size() * kFp8Roles.size(), " scaled tensors");
  size_t i = 0;
  for (auto& [key, gemm] : gemms_) {
    for (Fp8TensorScale& s : gemm) s.amax_history[0] = amaxes[i++];
  }
}

namespace {

// JSON has no inf: an infinite amax (the only non-finite value a history holds) is "inf".
nlohmann::json amax_json(float a) { return std::isinf(a) ? nlohmann::json("inf") : nlohmann::json(a); }

}  // namespace

nlohmann::json Fp8Scaling::state_dict() const {
  nlohmann::json state = nlohmann::json::object();
  for (const auto& [key, gemm] : gemms_) {
    for (Fp8Role role : kFp8Roles) {
      const Fp8TensorScale& s = gemm[size_t(role)];
      nlohmann::json history = nlohmann::json::array();
      for (float a : s.amax_history) history.push_back(amax_json(a));
      state[key][fp8_role_name(role)] = {{"scale", s.scale}, {"amax_history", history}};
    }
  }
  return state;
}

void Fp8Scaling::load_state_dict(const nlohmann::json& state, const std::string& source) {
  check(state.is_object(), source, ": expected a JSON object of fp8 scales");
  std::map<std::string, Gemm> loaded;
  for (const auto& [key, entry] : state.items()) {
    Gemm& gemm = loaded[key];
    for (Fp8Role role : kFp8Roles) {
      const std::string where = source + ": '" + key + "' " + fp8_role_name(role);
      check(entry.is_object() && entry.contains(fp8_role_name(role)), where, ": missing");
      const nlohmann::json& t = entry[fp8_role_name(role)];
      check(t.is_object() && t.contains("scale") && t["scale"].is_number(), where, ": missing or mistyped 'scale'");
      Fp8TensorScale& s = gemm[size_t(role)];
      s.scale = t["scale"].get<float>();
      check(std::isfinite(s.scale) && s.scale > 0, where, ": scale ", s.scale, " is not finite and > 0");
      check(t.contains("amax_history") && t["amax_history"].is_array() &&
                int64_t(t["amax_history"].size()) == recipe_.amax_history_len,
            where, ": 'amax_history' is not an array of ", recipe_.amax_history_len, " amaxes (fp8_amax_history_len)");
      for (const nlohmann::json& a : t["amax_history"]) {
        check(a.is_number() || a == "inf", where, ": amax_history holds ", a.dump(), " (expected a number or \"inf\")");
        s.amax_history.push_back(a.is_number() ? a.get<float>() : INFINITY);
        check(s.amax_history.back() >= 0, where, ": negative amax ", s.amax_history.back());
      }
    }
  }
  gemms_ = std::move(loaded);
}

}  // namespace hg
