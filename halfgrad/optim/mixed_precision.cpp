// The mode table of mixed_precision.h, its parsing and JSON form, and the step sequence of one
// mixed-precision update.
#include "halfgrad/optim/mixed_precision.h"

#include <charconv>
#include <cmath>
#include <cstdlib>

#include "halfgrad/base/error.h"
#include "halfgrad/optim/clip_grad_norm.h"

namespace hg::optim {

namespace {

bool scales_loss(Precision p) { return p == Precision::kFp16; }

// The shortest decimal that reads back as `value` ("1024", "0.5").
std::string shortest(float value) {
  char text[32];
  return std::string(text, std::to_chars(text, text + sizeof text, value).ptr);
}

std::string loss_scale_text(const LossScaling& s) {
  switch (s.kind) {
    case LossScaling::Kind::kDynamic: return "dynamic";
    case LossScaling::Kind::kNone: return "none";
    case LossScaling::Kind::kStatic: return shortest(s.scale);
  }
  return "?";
}

// "dynamic" | "none" | a positive number (static scale); `field` names the value in errors.
LossScaling parse_loss_scale(const std::string& text, const std::string& field) {
  if (text == "dynamic") return {LossScaling::Kind::kDynamic};
  if (text == "none") return {LossScaling::Kind::kNone};
  char* end = nullptr;
  const float value = std::strtof(text.c_str(), &end);
  check(end != text.c_str() && *end == '\0' && std::isfinite(value) && value > 0, field, ": invalid loss scale '",
        text, "' (expected dynamic, none or a positive number)");
  return {LossScaling::Kind::kStatic, value};
}

// `o` resolved: kNone for the modes that do not scale.
GradScalerOptions scaler_options(const MixedPrecisionOptions& o) {
  const LossScaling::Kind kind = o.loss_scaling.kind;
  GradScalerOptions s;
  s.enabled = kind != LossScaling::Kind::kNone;
  s.dynamic = kind == LossScaling::Kind::kDynamic;
  s.init_scale = o.loss_scaling.scale;
  s.growth_interval = o.loss_scaling.growth_interval;
  return s;
}

const char* opt_level_name(OptLevel level) { return level == OptLevel::kO1 ? "O1" : "O2"; }

// `field` names the flag or key for the message.
OptLevel parse_opt_level(const std::string& text, const std::string& field) {
  for (const OptLevel level : {OptLevel::kO1, OptLevel::kO2}) {
    if (text == opt_level_name(level)) return level;
  }
  fail(field, ": unknown opt level '", text, "' (expected O1 or O2)");
}

}  // namespace

MixedPrecisionOptions MixedPrecisionOptions::resolved() const {
  validate();
  MixedPrecisionOptions r = *this;
  const bool f16_model =
      master_weights == MasterWeightsKind::kNone || (precision == Precision::kFp16 && opt_level == OptLevel::kO2);
  // Fields a mode ignores take one value, so that equal numerics compare equal.
  if (precision != Precision::kFp16) r.opt_level = OptLevel::kO2;
  if (!scales_loss(precision)) r.loss_scaling = {LossScaling::Kind::kNone};
  if (precision != Precision::kFp8) r.fp8 = {};
  if (!r.normalization_outputs) {
    r.normalization_outputs = f16_model ? NormalizationOutputs::kInputDtype : NormalizationOutputs::kFloat32;
  }
  return r;
}

void MixedPrecisionOptions::validate() const {
  const LossScaling& s = loss_scaling;
  check(s.kind != LossScaling::Kind::kStatic || scales_loss(precision), "loss_scale (--loss-scale): a static scale (",
        s.scale, ") applies to fp16 and pure_fp16 only: the other modes do not scale the loss");
  const GradScalerOptions limits;
  check(s.kind == LossScaling::Kind::kNone || (std::isfinite(s.scale) && s.scale >= limits.min_scale &&
                                               s.scale <= limits.max_scale),
        "loss_scale (--loss-scale) ", s.scale, " is outside the scaler's range [", limits.min_scale, ", ",
        limits.max_scale, "] (init_scale <= max_scale)");
  check(s.kind != LossScaling::Kind::kDynamic || s.growth_interval >= 1,
        "loss_scale: the dynamic scaler's growth_interval must be >= 1, got ", s.growth_interval);
  check(precision == Precision::kFp8 || fp8 == Fp8Recipe{},
        "fp8 recipe (--fp8-*): applies to precision fp8 only: this mode has no fp8 GEMMs");
  fp8.validate();
  check(accumulation == Accumulation::kF32 || scales_loss(precision), "accumulate (--accumulate) ",
        accumulation_name(accumulation), " applies to fp16 and pure_fp16 only: f32, bf16 and fp8 runs have no f16 products "
        "to accumulate (and bf16's range would overflow an f16 accumulator)");
  check(kRoundingNames.name(rounding) != "?", "rounding (--rounding): ", int(rounding), " is not one of ",
        kRoundingNames.choices());
  check((rounding == precision::Rounding::kNearestEven && !flush_subnormals) || precision != Precision::kNo,
        "rounding (--rounding) and flush_subnormals (--flush-subnormals) apply to modes with f16 or bf16 stores: "
        "precision fp32 rounds nothing");
  check(master_weights == MasterWeightsKind::kF32 || precision == Precision::kBf16 ||
            (precision == Precision::kFp16 && opt_level == OptLevel::kO2),
        "master_weights (--master-weights) none applies to fp16 O2 and bf16 only: the other modes keep an f32 model");
  check(update_rounding == UpdateRounding::kNearest || master_weights == MasterWeightsKind::kNone,
        "update_rounding (--update-rounding) ", kUpdateRoundingNames.name(update_rounding),
        " applies with --master-weights none only: f32 master weights take every update exactly");
}

// Accumulation (--accumulate, the JSON key "accumulate").
const char* accumulation_name(Accumulation accumulation) {
  switch (accumulation) {
    case Accumulation::kF32: return "f32";
    case Accumulation::kF16: return "f16";
    case Accumulation::kF16Blocked: return "f16-blocked";
  }
  return "?";
}

Accumulation parse_accumulation(const std::string& text, const std::string& field) {
  for (const Accumulation a : {Accumulation::kF32, Accumulation::kF16, Accumulation::kF16Blocked}) {
    if (text == accumulation_name(a)) return a;
  }
  fail(field, ": unknown accumulation '", text, "' (expected f32, f16 or f16-blocked)");
}

MixedPrecisionOptions parse_mixed_precision(const std::string& precision, const std::string& opt_level,
                                            const std::string& loss_scale) {
  MixedPrecisionOptions o;
  if (precision == "no" || precision == "fp32" || precision == "f32") o.precision = Precision::kNo;
  else if (precision == "fp16" || precision == "f16") o.precision = Precision::kFp16;
  else if (precision == "bf16") o.precision = Precision::kBf16;
  else if (precision == "pure_fp16") {
    o.precision = Precision::kFp16;
    o.master_weights = MasterWeightsKind::kNone;
  }
  else if (precision == "fp8") o.precision = Precision::kFp8;
  else fail("precision (--precision): unknown precision '", precision,
            "' (expected no, fp32, fp16, bf16, pure_fp16 or fp8)");
  o.opt_level = parse_opt_level(opt_level, "fp16_opt_level (--opt-level)");
  o.loss_scaling = parse_loss_scale(loss_scale, "loss_scale (--loss-scale)");
  o.validate();
  return o;
}

nlohmann::json mixed_precision_to_json(const MixedPrecisionOptions& options) {
  const MixedPrecisionOptions o = options.resolved();
  const LossScaling& s = o.loss_scaling;
  nlohmann::json j = {
      {"fp16", o.precision == Precision::kFp16},
      {"bf16", o.precision == Precision::kBf16},
      {"fp16_opt_level", opt_level_name(o.opt_level)},
      {"pure_fp16", o.precision == Precision::kFp16 && o.master_weights == MasterWeightsKind::kNone},
      {"loss_scale", loss_scale_text(s)},
      {"normalization_outputs",
       o.normalization_outputs == NormalizationOutputs::kInputDtype ? "input_dtype" : "float32"}};
  const LossScaling defaults;
  if (s.kind == LossScaling::Kind::kDynamic && s.scale != defaults.scale) j["loss_scale_init"] = s.scale;
  if (s.kind == LossScaling::Kind::kDynamic && s.growth_interval != defaults.growth_interval) {
    j["loss_scale_growth_interval"] = s.growth_interval;
  }
  if (o.precision == Precision::kFp8) {
    j["fp8"] = true;
    j["fp8_format"] = fp8_format_name(o.fp8.format);
    j["fp8_amax_history_len"] = o.fp8.amax_history_len;
    j["fp8_amax_compute_algo"] = fp8_amax_algo_name(o.fp8.amax_compute_algo);
    j["fp8_margin"] = o.fp8.margin;
    j["fp8_scale"] = fp8_scale_name(o.fp8.scale);
  }
  if (o.accumulation != Accumulation::kF32) j["accumulate"] = accumulation_name(o.accumulation);
  if (o.rounding != precision::Rounding::kNearestEven) j["rounding"] = std::string(kRoundingNames.name(o.rounding));
  if (o.flush_subnormals) j["flush_subnormals"] = true;
  if (o.master_weights != MasterWeightsKind::kF32) j["master_weights"] = std::string(kMasterWeightsNames.name(o.master_weights));
  if (o.update_rounding != UpdateRounding::kNearest) {
    j["update_rounding"] = std::string(kUpdateRoundingNames.name(o.update_rounding));
  }
  return j;
}

bool is_mixed_precision_key(const std::string& key) {
  for (const char* k : {"fp16", "bf16", "fp16_opt_level", "pure_fp16", "loss_scale", "loss_scale_init",
                        "loss_scale_growth_interval", "normalization_outputs", "fp8", "fp8_format",
                        "fp8_amax_history_len", "fp8_amax_compute_algo", "fp8_margin", "fp8_scale",
                        "accumulate", "rounding", "flush_subnormals", "master_weights", "update_rounding"}) {
    if (key == k) return true;
  }
  return false;
}

MixedPrecisionOptions mixed_precision_from_json(const nlohmann::json& j, const std::string& source) {
  check(j.is_object(), source, ": expected a JSON object");
  auto get = [&](const char* key, nlohmann::json::value_t type, const char* expected) -> const nlohmann::json* {
    const auto it = j.find(key);
    if (it == j.end()) return nullptr;
    const bool ok = it->type() == type || (type == nlohmann::json::value_t::number_float && it->is_number()) ||
                    (type == nlohmann::json::value_t::number_integer && it->is_number_integer());
    check(ok, source, ": key '", key, "' has the wrong type (", it->dump(), ", expected ", expected, ")");
    return &*it;
  };
  using T = nlohmann::json::value_t;
  auto flag = [&](const char* key) {
    const nlohmann::json* v = get(key, T::boolean, "true or false");
    return v != nullptr && v->get<bool>();
  };
  MixedPrecisionOptions o;
  const bool fp16 = flag("fp16"), bf16 = flag("bf16"), pure = flag("pure_fp16"), fp8 = flag("fp8");
  check(!(fp16 && bf16), source, ": keys 'fp16' and 'bf16' are both true: give one");
  check(!pure || fp16, source, ": key 'pure_fp16' is true but 'fp16' is not (pure fp16 is an fp16 mode)");
  check(!fp8 || !(fp16 || bf16), source, ": key 'fp8' is true with 'fp16' or 'bf16': give one");
  o.precision = fp16   ? Precision::kFp16
                : bf16 ? Precision::kBf16
                : fp8  ? Precision::kFp8
                       : Precision::kNo;
  if (const nlohmann::json* v = get("fp16_opt_level", T::string, "\"O1\" or \"O2\"")) {
    o.opt_level = parse_opt_level(v->get<std::string>(), source + ": key 'fp16_opt_level'");
  }
  if (const nlohmann::json* v = get("loss_scale", T::string, "\"dynamic\", \"none\" or a number as a string")) {
    o.loss_scaling = parse_loss_scale(v->get<std::string>(), source + ": key 'loss_scale'");
  }
  if (const nlohmann::json* v = get("loss_scale_init", T::number_float, "a number")) {
    o.loss_scaling.scale = v->get<float>();
  }
  if (const nlohmann::json* v = get("loss_scale_growth_interval", T::number_integer, "an integer")) {
    o.loss_scaling.growth_interval = v->get<int64_t>();
  }
  if (const nlohmann::json* v = get("normalization_outputs", T::string, "\"float32\" or \"input_dtype\"")) {
    const std::string& where = v->get_ref<const std::string&>();
    check(where == "float32" || where == "input_dtype", source, ": key 'normalization_outputs' is '", where,
          "' (expected float32 or input_dtype)");
    o.normalization_outputs = where == "float32" ? NormalizationOutputs::kFloat32 : NormalizationOutputs::kInputDtype;
  }
  if (const nlohmann::json* v = get("accumulate", T::string, "\"f32\", \"f16\" or \"f16-blocked\"")) {
    o.accumulation = parse_accumulation(v->get<std::string>(), source + ": key 'accumulate'");
  }
  if (const nlohmann::json* v = get("rounding", T::string, kRoundingNames.choices().c_str())) {
    o.rounding = kRoundingNames.parse(v->get<std::string>(), source + ": key 'rounding'");
  }
  o.flush_subnormals = flag("flush_subnormals");
  if (pure) o.master_weights = MasterWeightsKind::kNone;
  if (const nlohmann::json* v = get("master_weights", T::string, kMasterWeightsNames.choices().c_str())) {
    o.master_weights = kMasterWeightsNames.parse(v->get<std::string>(), source + ": key 'master_weights'");
    check(!pure || o.master_weights == MasterWeightsKind::kNone, source,
          ": key 'pure_fp16' is true but 'master_weights' is not none");
  }
  if (const nlohmann::json* v = get("update_rounding", T::string, kUpdateRoundingNames.choices().c_str())) {
    o.update_rounding = kUpdateRoundingNames.parse(v->get<std::string>(), source + ": key 'update_rounding'");
  }
  if (const nlohmann::json* v = get("fp8_format", T::string, "\"hybrid\" or \"e4m3\"")) {
    o.fp8.format = parse_fp8_format(v->get<std::string>(), source + ": key 'fp8_format'");
  }
  if (const nlohmann::json* v = get("fp8_amax_history_len", T::number_integer, "an integer")) {
    o.fp8.amax_history_len = v->get<int64_t>();
  }
  if (const nlohmann::json* v = get("fp8_amax_compute_algo", T::string, "\"max\" or \"most_recent\"")) {
    o.fp8.amax_compute_algo = parse_fp8_amax_algo(v->get<std::string>(), source + ": key 'fp8_amax_compute_algo'");
  }
  if (const nlohmann::json* v = get("fp8_margin", T::number_integer, "an integer")) {
    o.fp8.margin = v->get<int64_t>();
  }
  if (const nlohmann::json* v = get("fp8_scale", T::string, "\"pow2\", \"exact\" or \"none\"")) {
    o.fp8.scale = parse_fp8_scale(v->get<std::string>(), source + ": key 'fp8_scale'");
  }
  try {
    o.validate();
  } catch (const Error& e) {
    fail(source, ": ", e.what());
  }
  return o;
}

MixedPrecision::MixedPrecision(nn::Module& model, const MixedPrecisionOptions& options)
    : model_(model), options_(options.resolved()), scaler_(scaler_options(options_)) {
  switch (options_.precision) {
    case Precision::kNo: break;
    case Precision::kBf16:
      autocast_ = DType::bf16;
      if (options_.master_weights == MasterWeightsKind::kNone) model.to(DType::bf16);  // pure bf16
      break;
    case Precision::kFp16:
      autocast_ = DType::f16;
      if (options_.opt_level == OptLevel::kO2) {
        model.to(DType::f16);
        if (options_.master_weights == MasterWeightsKind::kF32) {
          masters_ = std::make_unique<MasterWeights>(model.parameters());
        }
      }
      break;
    case Precision::kFp8:
      autocast_ = DType::bf16;
      fp8_ = std::make_shared<Fp8Scaling>(options_.fp8);
      model.named_parameters();  // names every weight: the fp8 scales are keyed by them
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
  return Autocast(autocast_.value_or(DType::f16), autocast_.has_value(), *options_.normalization_outputs, fp8_,
                  options_.accumulation);
}
void MixedPrecision::unscale_gradients(Optimizer& optimizer) {
  if (unscaled_) return;
  if (masters_) masters_->copy_grads_to_masters();
  if (reduce_) reduce_(optimizer);
  scaler_.unscale(optimizer, /*allow_fp16=*/options_.master_weights == MasterWeightsKind::kNone);
  unscaled_ = true;
}

float MixedPrecision::clip_gradients(Optimizer& optimizer, float max_norm) {
  unscale_gradients(optimizer);
  grad_norm_ = clip_grad_norm(optimizer.parameters(), max_norm);
  return *grad_norm_;
}

bool MixedPrecision::finish_step(Optimizer& optimizer) {
  unscale_gradients(optimizer);
  optimizer.set_update_rounding(options_.update_rounding, seed_);
  bool stepped = false;
  if (scaler_.is_enabled()) {
    stepped = scaler_.step(optimizer, /*allow_fp16=*/options_.master_weights == MasterWeightsKind::kNone);
  } else if (std::isfinite(grad_norm_ ? *grad_norm_ : grad_norm(optimizer.parameters()))) {
    optimizer.step();  // no scaler: never step on inf/NaN
    stepped = true;
  }
  if (masters_ && stepped) masters_->copy_step_to_model();
  scaler_.update();
  if (fp8_) fp8_->update();  // the next step's fp8 scales, from the amaxes up to this one's
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
