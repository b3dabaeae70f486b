// MixedPrecision: the three switches of mixed-precision training -- autocast dtype, loss scaling,
// f32 master weights -- wired from one value, MixedPrecisionOptions, as Accelerate's mixed_precision:
// parsed from the flags once, held by TrainingArguments, written into every checkpoint and rebuilt
// by inference, so training, evaluation and prediction run the same numerics. The modes and their
// wiring: docs/design_notes.md#mixedprecision.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "halfgrad/autograd/autocast.h"
#include "halfgrad/autograd/fp8_scaling.h"
#include "halfgrad/autograd/rounding_scope.h"
#include "halfgrad/base/enum_names.h"
#include "halfgrad/nn/module.h"
#include "halfgrad/optim/grad_scaler.h"
#include "halfgrad/optim/master_weights.h"
#include "halfgrad/optim/optimizer.h"

namespace hg::optim {

enum class Precision { kNo, kFp16, kBf16, kFp8 };
// --precision's names (pure_fp16, which is fp16 with master_weights none, is parse_mixed_precision's).
inline constexpr EnumNames<Precision, 4, 3> kPrecisionNames{
    {{{Precision::kNo, "fp32"}, {Precision::kFp16, "fp16"}, {Precision::kBf16, "bf16"}, {Precision::kFp8, "fp8"}}},
    {{{Precision::kNo, "no"}, {Precision::kNo, "f32"}, {Precision::kFp16, "f16"}}}};
enum class OptLevel { kO1, kO2 };
inline constexpr EnumNames<OptLevel, 2> kOptLevelNames{{{{OptLevel::kO1, "O1"}, {OptLevel::kO2, "O2"}}}};
// Where normalizations store their outputs (halfgrad/autograd/autocast.h), as the JSON key
// "normalization_outputs" spells it.
inline constexpr EnumNames<NormalizationOutputs, 2> kNormalizationOutputsNames{
    {{{NormalizationOutputs::kFloat32, "float32"}, {NormalizationOutputs::kInputDtype, "input_dtype"}}}};
// How GEMMs and sums accumulate (halfgrad/autograd/kernels/accumulate.h), as --accumulate and the
// JSON key "accumulate" spell it.
inline constexpr EnumNames<Accumulation, 3> kAccumulationNames{
    {{{Accumulation::kF32, "f32"}, {Accumulation::kF16, "f16"}, {Accumulation::kF16Blocked, "f16-blocked"}}}};
// Whether the optimizer updates f32 copies of 16-bit weights (f32) or the 16-bit weights
// themselves (none: pure fp16 or pure bf16 training, with MixedPrecisionOptions::update_rounding).
enum class MasterWeightsKind { kF32, kNone };
inline constexpr EnumNames<MasterWeightsKind, 2> kMasterWeightsNames{
    {{{MasterWeightsKind::kF32, "f32"}, {MasterWeightsKind::kNone, "none"}}}};

// The loss scaling of fp16 (with or without master weights). The other modes never scale: f32 and
// bf16 have f32's exponent range, so no gradient underflows that scaling would save.
struct LossScaling {
  enum class Kind { kDynamic, kNone, kStatic } kind = Kind::kDynamic;
  float scale = 65536.0f;  // static scale, or the dynamic initial scale
  int64_t growth_interval = 2000;
  bool operator==(const LossScaling&) const = default;
};

struct MixedPrecisionOptions {
  Precision precision = Precision::kNo;
  OptLevel opt_level = OptLevel::kO2;  // fp16 only (Hugging Face's TrainingArguments default to O1)
  LossScaling loss_scaling;            // fp16 only
  // Where softmax and layer norm store their outputs under autocast (halfgrad/autograd/autocast.h). Unset:
  // the mode's -- the input dtype for a 16-bit model (fp16 O2, master_weights none), as apex's O2 runs them;
  // f32 otherwise, as torch.autocast does.
  std::optional<NormalizationOutputs> normalization_outputs;
  // fp8 only: the delayed-scaling recipe (TE's DelayedScaling, its defaults).
  Fp8Recipe fp8;
  // How GEMMs and sums accumulate (halfgrad/autograd/kernels/accumulate.h): f32 (the default, and
  // Micikevicius et al.'s third technique), or f16 rounded after every addition, plain or in
  // blocks with an f32 carry. fp16 only: the mode whose products are f16.
  Accumulation accumulation = Accumulation::kF32;
  // How every op output and gradient stored in f16/bf16 is rounded (a RoundingScope over each
  // step's forward and backward passes and over evaluation; docs/autograd.md): nearest even (the
  // default, as GPUs do), stochastic (seeded by the run's seed and the step, so a resumed run
  // draws the same bits) or toward zero; and whether subnormal results flush to zero (GPU modes
  // without gradual underflow). Modes with low-precision stores only (not fp32). The optimizer's
  // write of the updated weights is not an op's output: it rounds to nearest.
  precision::Rounding rounding = precision::Rounding::kNearestEven;
  bool flush_subnormals = false;
  // none (fp16 O2 and bf16 only): the model is 16-bit and the optimizer updates it directly,
  // writing each new weight under update_rounding (halfgrad/optim/optimizer.h: nearest loses updates below
  // half an ulp; stochastic and kahan keep them). fp16 with none is "pure fp16".
  MasterWeightsKind master_weights = MasterWeightsKind::kF32;
  UpdateRounding update_rounding = UpdateRounding::kNearest;  // master_weights none only
  // How bf16 x bf16 GEMMs with f32 sums are summed (halfgrad/autograd/kernels/gemm_bf16dot.h):
  // auto (VDPBF16PS where the CPU has it: another order, subnormals flushed), exact (the f32
  // chain of every other GEMM, on every CPU) or emulated (VDPBF16PS's bits in scalar code, on any
  // CPU: slow). bf16 and fp8 only (their autocast dtype is bf16). The environment variable
  // HALFGRAD_EXACT_BF16, when set, overrides it for the process.
  Bf16Dot bf16_dot = Bf16Dot::kAuto;

  // These options with every unset field replaced by the mode's value, and the fields the mode
  // ignores at one value (opt level O2 unless fp16, loss scaling none unless fp16,
  // the fp8 recipe at its defaults unless fp8):
  // the one place where a default that depends on the mode is decided. MixedPrecision runs the
  // resolved options, and two options compute the same way exactly when their resolved forms are
  // equal. Validates first.
  MixedPrecisionOptions resolved() const;
  // Throws hg::Error naming the field and the `halfgrad train` flag that sets it: a static loss
  // scale outside GradScaler's range, or one given to a mode that does not scale; an fp8 recipe
  // out of range (Fp8Recipe::validate) or given to another mode; f16 accumulation in a mode
  // without f16 products.
  void validate() const;
  bool operator==(const MixedPrecisionOptions&) const = default;
};

// The bf16 GEMM's summations `bf16_dot` may take, as --bf16-dot and the JSON key "bf16_dot" spell them.
inline constexpr EnumNames<Bf16Dot, 3> kBf16DotNames{
    {{{Bf16Dot::kAuto, "auto"}, {Bf16Dot::kExact, "exact"}, {Bf16Dot::kEmulated, "emulated"}}}};

// The roundings `rounding` may take, as --rounding and the JSON key "rounding" spell them.
inline constexpr EnumNames<precision::Rounding, 3> kRoundingNames{
    {{{precision::Rounding::kNearestEven, "nearest"},
      {precision::Rounding::kStochastic, "stochastic"},
      {precision::Rounding::kTowardZero, "toward-zero"}}}};

// The options the `halfgrad train` flags select: --precision (no | fp32 | fp16 | bf16 |
// pure_fp16 | fp8), --opt-level (O1 | O2) and --loss-scale (dynamic | none | a positive number);
// the --fp8-* flags set the fp8 recipe (kFp8FormatNames, ...) after it. Throws hg::Error
// naming the field, the flag and the value (validate() included).
MixedPrecisionOptions parse_mixed_precision(const std::string& precision, const std::string& opt_level = "O2",
                                            const std::string& loss_scale = "dynamic");

// The accumulation's name (kAccumulationNames), for the demos that print it.
inline const char* accumulation_name(Accumulation accumulation) {
  return kAccumulationNames.name(accumulation).data();  // NUL-terminated: the table's literals
}

// The JSON form, as keys of a flat object (TrainingArguments' JSON holds them beside its own):
// Hugging Face's "fp16", "bf16" (booleans) and "fp16_opt_level" ("O1" | "O2"), and halfgrad's
// "pure_fp16" (true with "fp16" and master_weights none), "master_weights" ("none" only when
// none), "update_rounding" (only when not nearest), "loss_scale" ("dynamic" | "none"
// | the static scale, as --loss-scale takes it; "none" for f32 and bf16; "loss_scale_init" and
// "loss_scale_growth_interval" only when a dynamic scaler's differ from GradScaler's defaults)
// and "normalization_outputs" (kNormalizationOutputsNames); "accumulate" (kAccumulationNames) only
// when not f32; in fp8 mode only, "fp8": true with the recipe as "fp8_format" (kFp8FormatNames),
// "fp8_amax_history_len", "fp8_amax_compute_algo" (kFp8AmaxAlgoNames), "fp8_margin" and
// "fp8_scale" (kFp8ScaleNames); "rounding" (kRoundingNames) only when not nearest,
// "flush_subnormals": true only when set, and "bf16_dot" (kBf16DotNames) only when not auto.
// Written resolved, so a checkpoint states what it ran.
// The keys, their types and both directions are one table (kMixedPrecisionKeys, mixed_precision.cpp).
nlohmann::json mixed_precision_to_json(const MixedPrecisionOptions& options);
// Whether `key` is one of the keys above.
bool is_mixed_precision_key(const std::string& key);
// Reads the keys above from the object `j`, ignoring any other key; a missing key keeps its
// default (a checkpoint older than the key ran with it). A mistyped or invalid value is an
// hg::Error naming `source` (the file and object) and the key.
MixedPrecisionOptions mixed_precision_from_json(const nlohmann::json& j, const std::string& source);

// The RoundingScope of `options`' rounding and flush_subnormals (MixedPrecision::rounding_scope).
inline RoundingScope rounding_scope(const MixedPrecisionOptions& options, uint64_t seed, uint64_t first_event = 0) {
  return RoundingScope({.mode = options.rounding, .flush_subnormals = options.flush_subnormals}, seed, first_event);
}

struct StepResult {
  bool stepped = false;  // false: inf/NaN gradients, the step was skipped
  float grad_norm = 0;   // before clipping, of the unscaled gradients
  float scale = 1;       // the loss scale this step used
};

// The numerics of a mode's forward passes: the model converted to the dtype it computes in (f16
// under fp16 O2, the 16-bit dtype without master weights), the autocast guard, evaluation's
// rounding and the fp8 scales. What inference builds (halfgrad/train/evaluation.h): no f32
// masters, no loss scaler. MixedPrecision adds training's parts to it.
class ForwardPrecision {
 public:
  // Converts the model's parameters for the mode. Throws hg::Error for invalid options
  // (MixedPrecisionOptions::validate).
  ForwardPrecision(nn::Module& model, const MixedPrecisionOptions& options);
  virtual ~ForwardPrecision() = default;
  ForwardPrecision(const ForwardPrecision&) = delete;
  ForwardPrecision& operator=(const ForwardPrecision&) = delete;

  // The tensors that hold the weights, by name: the f32 masters when there are (MixedPrecision
  // under O2: what the optimizer updates and a checkpoint saves), else the model's own.
  nn::NamedTensors optimizer_parameters() const;
  // What the mode's autocast guards set -- dtype, normalization outputs, fp8 scaling, accumulation,
  // bf16 dot -- built here alone from the options (enabled = false when the mode has no autocast).
  AutocastOptions autocast_options() const;
  // The autocast guard for forward passes, training's and evaluation's: Autocast(autocast_options()).
  Autocast autocast() const { return Autocast(autocast_options()); }
  // An evaluation's rounding (the options' `rounding`, `flush_subnormals`): seed 0 whatever the
  // run's, so an evaluation during training and `halfgrad eval` of its checkpoint (which knows no
  // seed) round alike.
  RoundingScope evaluation_rounding_scope() const { return optim::rounding_scope(options_, /*seed=*/0); }
  // The options in force (resolved: every field set).
  const MixedPrecisionOptions& options() const { return options_; }
  std::optional<DType> autocast_dtype() const { return autocast_; }
  // The fp8 scale state (fp8 mode), else null; its state_dict goes into checkpoints.
  Fp8Scaling* fp8() { return fp8_.get(); }
  const Fp8Scaling* fp8() const { return fp8_.get(); }
  // The f32 master weights (MixedPrecision under fp16 O2), else null.
  MasterWeights* masters() { return masters_.get(); }
  const MasterWeights* masters() const { return masters_.get(); }

 protected:
  nn::Module& model_;
  MixedPrecisionOptions options_;
  std::optional<DType> autocast_;
  std::shared_ptr<Fp8Scaling> fp8_;         // fp8 mode; shared with the autocast guards and linear's backward
  std::unique_ptr<MasterWeights> masters_;  // MixedPrecision only
};

// Training's mixed precision: ForwardPrecision plus the loss scaler, the f32 master weights (fp16
// O2) and the step that ties them together.
class MixedPrecision : public ForwardPrecision {
 public:
  // Converts the model's parameters for the mode (f16 for O2, the 16-bit dtype without masters)
  // and makes their f32 masters (O2). Throws hg::Error for invalid options
  // (MixedPrecisionOptions::validate).
  MixedPrecision(nn::Module& model, const MixedPrecisionOptions& options);

  // The rounding of the options (`rounding`, `flush_subnormals`) for the forward and backward
  // passes of one step while it lives. Stochastic rounding draws from the seed (set_seed) with
  // event numbers from `first_event` on (Trainer: the step times 2^40, so every step draws fresh
  // bits and a resumed step the same ones).
  RoundingScope rounding_scope(uint64_t first_event = 0) const {
    return optim::rounding_scope(options_, seed_, first_event);
  }
  Tensor scale(const Tensor& loss) const { return scaler_.scale(loss); }
  // After backward: (O2) copy grads to masters, unscale, clip if max_grad_norm > 0, step
  // unless a gradient is inf/NaN, (O2) copy masters back, update the scale. The same as
  // unscale_gradients(), clip_gradients() and finish_step() in turn (for callers that clip
  // separately, like Accelerator).
  StepResult step(Optimizer& optimizer, float max_grad_norm = 0.0f);
  // Moves the gradients where the optimizer reads them (O2: into the f32 masters), runs the
  // gradient reduction if one is set, and divides out the loss scale. Idempotent within one step.
  void unscale_gradients(Optimizer& optimizer);
  // A function run on the optimizer's gradients once per step, where they are still multiplied
  // by the loss scale: data-parallel training averages them across processes there
  // (halfgrad/dist/ddp.h), so that a 16-bit wire format carries the scaled values.
  void set_gradient_reduction(std::function<void(Optimizer&)> reduce) { reduce_ = std::move(reduce); }
  // Clips the optimizer's (unscaled) gradients to max_norm; returns the norm before clipping.
  float clip_gradients(Optimizer& optimizer, float max_norm);
  // Steps unless a gradient was inf/NaN, (O2) rounds the masters into the model, updates the
  // scale. Returns whether the optimizer stepped.
  bool finish_step(Optimizer& optimizer);

  GradScaler& scaler() { return scaler_; }
  const GradScaler& scaler() const { return scaler_; }
  // The seed of stochastic rounding, in op outputs (rounding_scope) and in updates (update_rounding):
  // the run's --seed; 0 unless set.
  void set_seed(uint64_t seed) { seed_ = seed; }

 private:
  GradScaler scaler_;
  std::function<void(Optimizer&)> reduce_;
  bool unscaled_ = false;  // within the current step
  uint64_t seed_ = 0;
  // The unscaled gradients' norm before clipping, once step() or clip_gradients() computed it in
  // the current step: finish_step() checks it for inf/NaN instead of computing it again.
  std::optional<float> grad_norm_;
};

}  // namespace hg::optim
