// Fp8Scaling: fp8 matrix products with delayed per-tensor scaling, as NVIDIA Transformer Engine's
// DelayedScaling recipe runs them: under an Autocast guard that carries one, `linear` casts its
// operands to e4m3 (forward) and e5m2 (backward) with per-tensor scales that update after each
// optimizer step from an amax history. The recipe, keys and storage: docs/design_notes.md#fp8scaling
// and docs/fp8.md.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "halfgrad/autograd/fp8_cast.h"
#include "halfgrad/autograd/tensor.h"
#include "halfgrad/base/enum_names.h"
#include "halfgrad/precision/float_format.h"
#include "halfgrad/precision/numerics_stats.h"

namespace hg {

// TE's DelayedScaling fields (defaults as TE's), plus the scale's rounding and a no-scaling mode.
struct Fp8Recipe {
  // kHybrid: e4m3 forward (448), e5m2 backward (57344), TE's default; kE4M3: e4m3 everywhere.
  enum class Format : uint8_t { kHybrid, kE4M3 };
  // kMax: the largest amax of the window (this step's included); kMostRecent: this step's.
  enum class AmaxAlgo : uint8_t { kMax, kMostRecent };
  // kPowerOfTwo: 2^(floor(log2(fp8_max / amax)) - margin), TE <= v0.12: multiplying by it and by
  // its inverse is exact. kExact: fp8_max * 2^-margin / amax, TE since PR #427. kNone: every
  // scale stays 1 (fp8 without scaling, for comparison).
  enum class Scale : uint8_t { kPowerOfTwo, kExact, kNone };

  Format format = Format::kHybrid;
  int64_t amax_history_len = 1024;
  AmaxAlgo amax_compute_algo = AmaxAlgo::kMax;
  int64_t margin = 0;  // the scale is divided by 2^margin
  Scale scale = Scale::kPowerOfTwo;

  precision::FloatFormat format_of(Fp8Role role) const;
  // Throws hg::Error naming the field and its `halfgrad train` flag: a history length outside
  // [1, 65536] or a margin outside [0, 64].
  void validate() const;
  bool operator==(const Fp8Recipe&) const = default;
};

// The recipe's names, as the JSON keys fp8_format, fp8_amax_compute_algo, fp8_scale and the
// --fp8-* flags spell them.
inline constexpr EnumNames<Fp8Recipe::Format, 2> kFp8FormatNames{
    {{{Fp8Recipe::Format::kHybrid, "hybrid"}, {Fp8Recipe::Format::kE4M3, "e4m3"}}}};
inline constexpr EnumNames<Fp8Recipe::AmaxAlgo, 2> kFp8AmaxAlgoNames{
    {{{Fp8Recipe::AmaxAlgo::kMax, "max"}, {Fp8Recipe::AmaxAlgo::kMostRecent, "most_recent"}}}};
inline constexpr EnumNames<Fp8Recipe::Scale, 3> kFp8ScaleNames{{{{Fp8Recipe::Scale::kPowerOfTwo, "pow2"},
                                                                 {Fp8Recipe::Scale::kExact, "exact"},
                                                                 {Fp8Recipe::Scale::kNone, "none"}}}};

// The scale TE's update computes from `amax` (the window's, see Fp8TensorScale::update) for a
// format whose largest value is fp8_max: the previous scale when amax is 0, inf or NaN; else per
// recipe.scale -- kExact: fp8_max * 2^-margin / amax in f32, FLT_MAX if that overflows (amax
// tiny); kPowerOfTwo: 2^(floor(log2(fp8_max / amax)) - margin) computed exactly, the exponent
// clamped to [-126, 127] so the scale and its inverse are f32 values; kNone: 1.
float fp8_scale_from_amax(const Fp8Recipe& recipe, float amax, float previous_scale, float fp8_max);

// One scaled tensor (TE's quantizer): its scale and its amax history.
struct Fp8TensorScale {
  float scale = 1;
  // amax_history_len slots: [0] stages this step's amax (the max over its casts), [1] holds the
  // oldest step, the last slot the latest one.
  std::vector<float> amax_history;

  // After a step, as TE's fused update (delayed_scaling.cu) does it: when the staged amax is 0
  // (the tensor was not cast, or was all zeros) nothing changes -- the scale is kept and the
  // history not rolled; otherwise the scale is computed (fp8_scale_from_amax) from the max of
  // the whole window including [0] (kMax; NaN entries ignored, an inf freezes the scale until it
  // leaves the window) or from [0] (kMostRecent), then the history is rotated by one ([0] moves
  // to the last slot, the oldest step drops out) and [0] is zeroed. kNone only clears [0].
  void update(const Fp8Recipe& recipe, float fp8_max);
  bool operator==(const Fp8TensorScale&) const = default;
};

// A GEMM operand cast to fp8: the fp8 values (held in f32) and TE's scale_inv = 1 / scale.
struct Fp8Operand {
  Tensor values;
  float scale_inv = 1;
};

class Fp8Scaling {
 public:
  explicit Fp8Scaling(Fp8Recipe recipe);

  // The key of the GEMM whose weight is `weight`: its parameter name without ".weight" (the
  // module path). Throws hg::Error for an unnamed weight (register it in a Module, or set_name).
  static std::string key_of(const Tensor& weight);
  // values = saturate(round_nearest_even(x * scale)) in the role's format, from x as stored
  // (widened to f32); NaN stays NaN, +-inf becomes +-max (OCP's saturating conversion, as TE's
  // SATFINITE casts). With record_amax, max |x| (NaN ignored, as CUDA's fmaxf) is merged into the
  // staging slot: forward casts pass grad_enabled(), so evaluation leaves the histories alone.
  Fp8Operand quantize(const std::string& key, Fp8Role role, const Tensor& x, bool record_amax);
  // After each optimizer step: every tensor's Fp8TensorScale::update. The new scales apply from
  // the next cast.
  void update();
  // This step's staged amaxes (every tensor's amax_history[0], in key and role order), and
  // replacing them: a data-parallel job takes their max over the ranks before update() (TE's
  // reduce_amax), so every rank computes the same scales from the same amaxes.
  std::vector<float> staged_amaxes() const;
  void set_staged_amaxes(const std::vector<float>& amaxes);

  const Fp8Recipe& recipe() const { return recipe_; }
  using Gemm = std::array<Fp8TensorScale, 3>;  // indexed by Fp8Role
  const std::map<std::string, Gemm>& gemms() const { return gemms_; }

  // {"<key>": {"input": {"scale": s, "amax_history": [...]}, "weight": ..., "grad_output": ...}}
  // (an inf amax as the string "inf"): every scale and history, for checkpoints.
  nlohmann::json state_dict() const;
  // Replaces the state with `state`; throws hg::Error naming `source`, the key and the field
  // (a history of another length than the recipe's, a scale that is not finite and > 0).
  void load_state_dict(const nlohmann::json& state, const std::string& source);

 private:
  Gemm& gemm(const std::string& key);

  Fp8Recipe recipe_;
  std::map<std::string, Gemm> gemms_;
};

}  // namespace hg
