// MixedPrecision: the three switches of mixed-precision training -- autocast dtype, loss
// scaling, f32 master weights -- wired from one setting, as Accelerate's mixed_precision:
//   no         f32 model, no autocast, no scaling
//   fp16 O1    f32 model; autocast casts per op to f16 (the cast's backward returns f32 grads);
//              dynamic loss scaling
//   fp16 O2    f16 model with activations stored in f16: softmax and layer norm compute in
//              f32 and round their outputs to f16, as in apex's O2, while losses and sums stay
//              f32 through autocast; the optimizer updates f32 master copies (the f16 grads
//              are widened into master grads, unscaled and clipped there, and the masters
//              rounded back into the model after each step); dynamic loss scaling
//   bf16       f32 model; autocast to bf16; no scaling (bf16 has f32's range)
//   pure_fp16  f16 model and optimizer on the f16 weights, no masters: every update smaller
//              than half an ulp of its weight is lost (what the master_weights demo shows)
// Loss scaling can be overridden: dynamic (GradScaler defaults), none, or a static scale.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "autograd/autocast.h"
#include "nn/module.h"
#include "optim/grad_scaler.h"
#include "optim/master_weights.h"
#include "optim/optimizer.h"

namespace hg::optim {

enum class Precision { kNo, kFp16, kBf16, kPureFp16 };
enum class OptLevel { kO1, kO2 };

// "no" (or "fp32") | "fp16" | "bf16" | "pure_fp16"; throws naming the value otherwise.
Precision parse_precision(const std::string& name);
std::string precision_name(Precision precision);
OptLevel parse_opt_level(const std::string& name);  // "O1" | "O2"

struct LossScaling {
  enum class Kind { kDefault, kDynamic, kNone, kStatic } kind = Kind::kDefault;  // default: dynamic for fp16
  float scale = 65536.0f;  // static scale, or the dynamic initial scale
  int64_t growth_interval = 2000;
};
// "dynamic" | "none" | a positive number (static scale); throws naming the value otherwise.
LossScaling parse_loss_scale(const std::string& text);

struct MixedPrecisionOptions {
  Precision precision = Precision::kNo;
  OptLevel opt_level = OptLevel::kO2;
  LossScaling loss_scaling;
};

struct StepResult {
  bool stepped = false;  // false: inf/NaN gradients, the step was skipped
  float grad_norm = 0;   // before clipping, of the unscaled gradients
  float scale = 1;       // the loss scale this step used
};

class MixedPrecision {
 public:
  // Converts the model's parameters for the mode (f16 for O2 and pure_fp16).
  MixedPrecision(nn::Module& model, MixedPrecisionOptions options);

  // The tensors the optimizer must update, by name: f32 masters (O2) or the model's own.
  nn::NamedTensors optimizer_parameters() const;
  // The autocast guard for forward passes (a disabled guard when the mode has none).
  Autocast autocast() const;
  Tensor scale(const Tensor& loss) const { return scaler_.scale(loss); }
  // After backward: (O2) copy grads to masters, unscale, clip if max_grad_norm > 0, step
  // unless a gradient is inf/NaN, (O2) copy masters back, update the scale. The same as
  // unscale_gradients(), clip_gradients() and finish_step() in turn (for callers that clip
  // separately, like Accelerator).
  StepResult step(Optimizer& optimizer, float max_grad_norm = 0.0f);
  // Moves the gradients where the optimizer reads them (O2: into the f32 masters) and divides
  // out the loss scale. Idempotent within one step.
  void unscale_gradients(Optimizer& optimizer);
  // Clips the optimizer's (unscaled) gradients to max_norm; returns the norm before clipping.
  float clip_gradients(Optimizer& optimizer, float max_norm);
  // Steps unless a gradient was inf/NaN, (O2) rounds the masters into the model, updates the
  // scale. Returns whether the optimizer stepped.
  bool finish_step(Optimizer& optimizer);

  const MixedPrecisionOptions& options() const { return options_; }
  GradScaler& scaler() { return scaler_; }
  const GradScaler& scaler() const { return scaler_; }
  MasterWeights* masters() { return masters_.get(); }
  std::optional<DType> autocast_dtype() const { return autocast_; }

 private:
  nn::Module& model_;
  MixedPrecisionOptions options_;
  std::optional<DType> autocast_;
  // kInputDtype for an f16 model (O2, pure fp16): its normalizations store f16, as apex's O2.
  NormalizationOutputs normalizations_ = NormalizationOutputs::kFloat32;
  GradScaler scaler_;
  std::unique_ptr<MasterWeights> masters_;
  bool unscaled_ = false;  // within the current step
  // The unscaled gradients' norm before clipping, once step() or clip_gradients() computed it in
  // the current step: finish_step() checks it for inf/NaN instead of computing it again.
  std::optional<float> grad_norm_;
};

}  // namespace hg::optim
