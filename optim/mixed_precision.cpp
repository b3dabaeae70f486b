// The mode table of mixed_precision.h, and the step sequence of one mixed-precision update.
#include "optim/mixed_precision.h"

#include <cmath>
#include <cstdlib>

#include "base/error.h"
#include "optim/clip_grad_norm.h"

namespace hg::optim {

Precision parse_precision(const std::string& name) {
  if (name == "no" || name == "fp32" || name == "f32") return Precision::kNo;
  if (name == "fp16" || name == "f16") return Precision::kFp16;
  if (name == "bf16") return Precision::kBf16;
  if (name == "pure_fp16") return Precision::kPureFp16;
  fail("unknown precision '", name, "' (expected no, fp32, fp16, bf16 or pure_fp16)");
}

std::string precision_name(Precision p) {
  switch (p) {
    case Precision::kNo: return "fp32";
    case Precision::kFp16: return "fp16";
    case Precision::kBf16: return "bf16";
    case Precision::kPureFp16: return "pure_fp16";
  }
  return "?";
}

OptLevel parse_opt_level(const std::string& name) {
  if (name == "O1") return OptLevel::kO1;
  if (name == "O2") return OptLevel::kO2;
  fail("unknown opt level '", name, "' (expected O1 or O2)");
}

LossScaling parse_loss_scale(const std::string& text) {
  if (text == "dynamic") return {LossScaling::Kind::kDynamic};
  if (text == "none") return {LossScaling::Kind::kNone};
  char* end = nullptr;
  const float value = std::strtof(text.c_str(), &end);
  check(end != text.c_str() && *end == '\0' && std::isfinite(value) && value > 0, "invalid loss scale '", text,
        "' (expected dynamic, none or a positive number)");
  return {LossScaling::Kind::kStatic, value};
}

namespace {

GradScalerOptions scaler_options(const MixedPrecisionOptions& o) {
  const bool fp16 = o.precision == Precision::kFp16 || o.precision == Precision::kPureFp16;
  LossScaling::Kind kind = o.loss_scaling.kind;
  if (kind == LossScaling::Kind::kDefault) kind = fp16 ? LossScaling::Kind::kDynamic : LossScaling::Kind::kNone;
  GradScalerOptions s;
  s.enabled = kind != LossScaling::Kind::kNone;
  s.dynamic = kind == LossScaling::Kind::kDynamic;
  s.init_scale = o.loss_scaling.scale;
  s.growth_interval = o.loss_scaling.growth_interval;
  return s;
}

}  // namespace

MixedPrecision::MixedPrecision(nn::Module& model, MixedPrecisionOptions options)
    : model_(model), options_(options), scaler_(scaler_options(options)) {
  switch (options.precision) {
    case Precision::kNo: break;
    case Precision::kBf16: autocast_ = DType::bf16; break;
    case Precision::kFp16:
      autocast_ = DType::f16;
      if (options.opt_level == OptLevel::kO2) {
        model.to(DType::f16);
        normalizations_ = NormalizationOutputs::kInputDtype;
        masters_ = std::make_unique<MasterWeights>(model.parameters());
      }
      break;
    case Precision::kPureFp16:
      autocast_ = DType::f16;
      model.to(DType::f16);
      normalizations_ = NormalizationOutputs::kInputDtype;
      break;
  }
}

nn::NamedTensors MixedPrecision::optimizer_parameters() const {
  nn::NamedTensors named = model_.named_parameters();
  if (masters_) {
    for (size_t i = 0; i < named.size(); ++i) named[i].second = masters_->masters()[i];
  }
  return named;
}

Autocast MixedPrecision::autocast() const {
  return Autocast(autocast_.value_or(DType::f16), autocast_.has_value(), normalizations_);
}

void MixedPrecision::unscale_gradients(Optimizer& optimizer) {
  if (unscaled_) return;
  if (masters_) masters_->copy_grads_to_masters();
  scaler_.unscale(optimizer, /*allow_fp16=*/options_.precision == Precision::kPureFp16);
  unscaled_ = true;
}

float MixedPrecision::clip_gradients(Optimizer& optimizer, float max_norm) {
  unscale_gradients(optimizer);
  grad_norm_ = clip_grad_norm(optimizer.parameters(), max_norm);
  return *grad_norm_;
}

bool MixedPrecision::finish_step(Optimizer& optimizer) {
  unscale_gradients(optimizer);
  bool stepped = false;
  if (scaler_.is_enabled()) {
    stepped = scaler_.step(optimizer, /*allow_fp16=*/options_.precision == Precision::kPureFp16);
  } else if (std::isfinite(grad_norm_ ? *grad_norm_ : grad_norm(optimizer.parameters()))) {
    optimizer.step();  // no scaler: never step on inf/NaN
    stepped = true;
  }
  if (masters_ && stepped) masters_->copy_step_to_model();
  scaler_.update();
  unscaled_ = false;
  grad_norm_.reset();
  return stepped;
}

StepResult MixedPrecision::step(Optimizer& optimizer, float max_grad_norm) {
  StepResult result;
  result.scale = scaler_.get_scale();
  unscale_gradients(optimizer);
  if (max_grad_norm > 0) {
    result.grad_norm = clip_gradients(optimizer, max_grad_norm);
  } else {
    grad_norm_ = result.grad_norm = grad_norm(optimizer.parameters());
  }
  result.stepped = finish_step(optimizer);
  return result;
}

}  // namespace hg::optim
