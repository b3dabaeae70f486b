// The mode table of mixed_precision.h, its parsing and JSON form, and the step sequence of one
// mixed-precision update.
#include "halfgrad/optim/mixed_precision.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdlib>

#include "halfgrad/autograd/json_read.h"
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

// "dynamic" and "none"; a static scale is written as its number.
constexpr EnumNames<LossScaling::Kind, 2> kLossScaleKeywords{
    {{{LossScaling::Kind::kDynamic, "dynamic"}, {LossScaling::Kind::kNone, "none"}}}};

std::string loss_scale_text(const LossScaling& s) {
  return s.kind == LossScaling::Kind::kStatic ? shortest(s.scale) : std::string(kLossScaleKeywords.name(s.kind));
}

// "dynamic" | "none" | a positive number (static scale); `field` names the value in errors.
LossScaling parse_loss_scale(const std::string& text, const std::string& field) {
  if (const std::optional<LossScaling::Kind> kind = kLossScaleKeywords.find(text)) return {*kind};
  char* end = nullptr;
  const float value = std::strtof(text.c_str(), &end);
  check(end != text.c_str() && *end == '\0' && std::isfinite(value) && value > 0, field, ": invalid loss scale '", text,
        "' (expected dynamic, none or a positive number)");
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
  check(s.kind == LossScaling::Kind::kNone ||
            (std::isfinite(s.scale) && s.scale >= limits.min_scale && s.scale <= limits.max_scale),
        "loss_scale (--loss-scale) ", s.scale, " is outside the scaler's range [", limits.min_scale, ", ",
        limits.max_scale, "] (init_scale <= max_scale)");
  check(s.kind != LossScaling::Kind::kDynamic || s.growth_interval >= 1,
        "loss_scale: the dynamic scaler's growth_interval must be >= 1, got ", s.growth_interval);
  check(precision == Precision::kFp8 || fp8 == Fp8Recipe{},
        "fp8 recipe (--fp8-*): applies to precision fp8 only: this mode has no fp8 GEMMs");
  fp8.validate();
  check(accumulation == Accumulation::kF32 || scales_loss(precision), "accumulate (--accumulate) ",
        kAccumulationNames.name(accumulation),
        " applies to fp16 and pure_fp16 only: f32, bf16 and fp8 runs have no f16 products "
        "to accumulate (and bf16's range would overflow an f16 accumulator)");
  check(kRoundingNames.name(rounding) != "?", "rounding (--rounding): ", int(rounding), " is not one of ",
        kRoundingNames.choices());
  check((rounding == precision::Rounding::kNearestEven && !flush_subnormals) || precision != Precision::kNo,
        "rounding (--rounding) and flush_subnormals (--flush-subnormals) apply to modes with f16 or bf16 stores: "
        "precision fp32 rounds nothing");
  check(master_weights == MasterWeightsKind::kF32 || precision == Precision::kBf16 ||
            (precision == Precision::kFp16 && opt_level == OptLevel::kO2),
        "master_weights (--master-weights) none applies to fp16 O2 and bf16 only: the other modes keep an f32 model");
  check(bf16_dot == Bf16Dot::kAuto || precision == Precision::kBf16 || precision == Precision::kFp8,
        "bf16_dot (--bf16-dot) ", kBf16DotNames.name(bf16_dot),
        " applies to bf16 and fp8 only: the other modes have no bf16 x bf16 products");
  check(update_rounding == UpdateRounding::kNearest || master_weights == MasterWeightsKind::kNone,
        "update_rounding (--update-rounding) ", kUpdateRoundingNames.name(update_rounding),
        " applies with --master-weights none only: f32 master weights take every update exactly");
}

MixedPrecisionOptions parse_mixed_precision(const std::string& precision, const std::string& opt_level,
                                            const std::string& loss_scale) {
  MixedPrecisionOptions o;
  if (precision == "pure_fp16") {  // fp16 O2 without master weights: the library's and the demos' name
    o.precision = Precision::kFp16;
    o.master_weights = MasterWeightsKind::kNone;
  } else {
    o.precision = kPrecisionNames.parse(precision, "precision (--precision)");
  }
  o.opt_level = kOptLevelNames.parse(opt_level, "fp16_opt_level (--opt-level)");
  o.loss_scaling = parse_loss_scale(loss_scale, "loss_scale (--loss-scale)");
  o.validate();
  return o;
}

namespace {

using Json = nlohmann::json;

using json_read::expect;

template <class E, std::size_t N, std::size_t A>
E as_enum(const EnumNames<E, N, A>& names, const Json& v, const std::string& at) {
  expect(v, v.is_string(), at, names.choices());
  return names.parse(v.get_ref<const std::string&>(), at);
}

// One JSON key of MixedPrecisionOptions: how it is written (from resolved options, only where the
// mode has it) and read (a present value; null for the mode's booleans, which read_mode reads
// together). The one list of the keys: to_json, from_json and is_mixed_precision_key use it.
struct JsonKey {
  const char* key;
  void (*write)(const MixedPrecisionOptions& o, Json& j);
  void (*read)(const Json& v, const std::string& at, MixedPrecisionOptions& o);
};

using O = MixedPrecisionOptions;
bool dynamic(const O& o) { return o.loss_scaling.kind == LossScaling::Kind::kDynamic; }
bool fp8(const O& o) { return o.precision == Precision::kFp8; }

const JsonKey kMixedPrecisionKeys[] = {
    {"fp16", [](const O& o, Json& j) { j["fp16"] = o.precision == Precision::kFp16; }, nullptr},
    {"bf16", [](const O& o, Json& j) { j["bf16"] = o.precision == Precision::kBf16; }, nullptr},
    {"pure_fp16",
     [](const O& o, Json& j) {
       j["pure_fp16"] = o.precision == Precision::kFp16 && o.master_weights == MasterWeightsKind::kNone;
     },
     nullptr},
    {"fp8",
     [](const O& o, Json& j) {
       if (fp8(o)) j["fp8"] = true;
     },
     nullptr},
    {"fp16_opt_level", [](const O& o, Json& j) { j["fp16_opt_level"] = std::string(kOptLevelNames.name(o.opt_level)); },
     [](const Json& v, const std::string& at, O& o) { o.opt_level = as_enum(kOptLevelNames, v, at); }},
    {"loss_scale", [](const O& o, Json& j) { j["loss_scale"] = loss_scale_text(o.loss_scaling); },
     [](const Json& v, const std::string& at, O& o) {
       expect(v, v.is_string(), at, "\"dynamic\", \"none\" or a number as a string");
       o.loss_scaling = parse_loss_scale(v.get<std::string>(), at);
     }},
    {"loss_scale_init",
     [](const O& o, Json& j) {
       if (dynamic(o) && o.loss_scaling.scale != LossScaling{}.scale) j["loss_scale_init"] = o.loss_scaling.scale;
     },
     [](const Json& v, const std::string& at, O& o) { json_read::read(v, at, o.loss_scaling.scale); }},
    {"loss_scale_growth_interval",
     [](const O& o, Json& j) {
       if (dynamic(o) && o.loss_scaling.growth_interval != LossScaling{}.growth_interval) {
         j["loss_scale_growth_interval"] = o.loss_scaling.growth_interval;
       }
     },
     [](const Json& v, const std::string& at, O& o) { json_read::read(v, at, o.loss_scaling.growth_interval); }},
    {"normalization_outputs",
     [](const O& o, Json& j) {
       j["normalization_outputs"] = std::string(kNormalizationOutputsNames.name(*o.normalization_outputs));
     },
     [](const Json& v, const std::string& at, O& o) {
       o.normalization_outputs = as_enum(kNormalizationOutputsNames, v, at);
     }},
    {"accumulate",
     [](const O& o, Json& j) {
       if (o.accumulation != Accumulation::kF32) j["accumulate"] = std::string(kAccumulationNames.name(o.accumulation));
     },
     [](const Json& v, const std::string& at, O& o) { o.accumulation = as_enum(kAccumulationNames, v, at); }},
    {"rounding",
     [](const O& o, Json& j) {
       if (o.rounding != precision::Rounding::kNearestEven)
         j["rounding"] = std::string(kRoundingNames.name(o.rounding));
     },
     [](const Json& v, const std::string& at, O& o) { o.rounding = as_enum(kRoundingNames, v, at); }},
    {"flush_subnormals",
     [](const O& o, Json& j) {
       if (o.flush_subnormals) j["flush_subnormals"] = true;
     },
     [](const Json& v, const std::string& at, O& o) { json_read::read(v, at, o.flush_subnormals); }},
    {"master_weights",
     [](const O& o, Json& j) {
       if (o.master_weights != MasterWeightsKind::kF32) {
         j["master_weights"] = std::string(kMasterWeightsNames.name(o.master_weights));
       }
     },
     [](const Json& v, const std::string& at, O& o) {
       const MasterWeightsKind kind = as_enum(kMasterWeightsNames, v, at);
       // read_mode set none for pure_fp16
       check(o.master_weights == MasterWeightsKind::kF32 || kind == MasterWeightsKind::kNone, at,
             " is not none, but key 'pure_fp16' is true");
       o.master_weights = kind;
     }},
    {"update_rounding",
     [](const O& o, Json& j) {
       if (o.update_rounding != UpdateRounding::kNearest) {
         j["update_rounding"] = std::string(kUpdateRoundingNames.name(o.update_rounding));
       }
     },
     [](const Json& v, const std::string& at, O& o) { o.update_rounding = as_enum(kUpdateRoundingNames, v, at); }},
    {"bf16_dot",
     [](const O& o, Json& j) {
       if (o.bf16_dot != Bf16Dot::kAuto) j["bf16_dot"] = std::string(kBf16DotNames.name(o.bf16_dot));
     },
     [](const Json& v, const std::string& at, O& o) { o.bf16_dot = as_enum(kBf16DotNames, v, at); }},
    {"fp8_format",
     [](const O& o, Json& j) {
       if (fp8(o)) j["fp8_format"] = std::string(kFp8FormatNames.name(o.fp8.format));
     },
     [](const Json& v, const std::string& at, O& o) { o.fp8.format = as_enum(kFp8FormatNames, v, at); }},
    {"fp8_amax_history_len",
     [](const O& o, Json& j) {
       if (fp8(o)) j["fp8_amax_history_len"] = o.fp8.amax_history_len;
     },
     [](const Json& v, const std::string& at, O& o) { json_read::read(v, at, o.fp8.amax_history_len); }},
    {"fp8_amax_compute_algo",
     [](const O& o, Json& j) {
       if (fp8(o)) j["fp8_amax_compute_algo"] = std::string(kFp8AmaxAlgoNames.name(o.fp8.amax_compute_algo));
     },
     [](const Json& v, const std::string& at, O& o) { o.fp8.amax_compute_algo = as_enum(kFp8AmaxAlgoNames, v, at); }},
    {"fp8_margin",
     [](const O& o, Json& j) {
       if (fp8(o)) j["fp8_margin"] = o.fp8.margin;
     },
     [](const Json& v, const std::string& at, O& o) { json_read::read(v, at, o.fp8.margin); }},
    {"fp8_scale",
     [](const O& o, Json& j) {
       if (fp8(o)) j["fp8_scale"] = std::string(kFp8ScaleNames.name(o.fp8.scale));
     },
     [](const Json& v, const std::string& at, O& o) { o.fp8.scale = as_enum(kFp8ScaleNames, v, at); }},
};

// The mode's booleans "fp16", "bf16", "pure_fp16" and "fp8", which must agree with each other.
void read_mode(const Json& j, const std::string& source, MixedPrecisionOptions& o) {
  auto flag = [&](const char* key) {
    return j.contains(key) && json_read::as<bool>(j.at(key), source + ": key '" + key + "'");
  };
  const bool fp16 = flag("fp16"), bf16 = flag("bf16"), pure = flag("pure_fp16"), fp8 = flag("fp8");
  check(!(fp16 && bf16), source, ": keys 'fp16' and 'bf16' are both true: give one");
  check(!pure || fp16, source, ": key 'pure_fp16' is true but 'fp16' is not (pure fp16 is an fp16 mode)");
  check(!fp8 || !(fp16 || bf16), source, ": key 'fp8' is true with 'fp16' or 'bf16': give one");
  o.precision = fp16 ? Precision::kFp16 : bf16 ? Precision::kBf16 : fp8 ? Precision::kFp8 : Precision::kNo;
  if (pure) o.master_weights = MasterWeightsKind::kNone;
}

}  // namespace

nlohmann::json mixed_precision_to_json(const MixedPrecisionOptions& options) {
  const MixedPrecisionOptions o = options.resolved();
  nlohmann::json j = nlohmann::json::object();
  for (const JsonKey& key : kMixedPrecisionKeys) key.write(o, j);
  return j;
}

bool is_mixed_precision_key(const std::string& key) {
  return std::any_of(std::begin(kMixedPrecisionKeys), std::end(kMixedPrecisionKeys),
                     [&](const JsonKey& k) { return key == k.key; });
}

MixedPrecisionOptions mixed_precision_from_json(const nlohmann::json& j, const std::string& source) {
  check(j.is_object(), source, ": expected a JSON object");
  MixedPrecisionOptions o;
  read_mode(j, source, o);
  for (const JsonKey& key : kMixedPrecisionKeys) {
    const auto it = j.find(key.key);
    if (key.read != nullptr && it != j.end()) key.read(*it, source + ": key '" + key.key + "'", o);
  }
  try {
    o.validate();
  } catch (const Error& e) {
    fail(source, ": ", e.what());
  }
  return o;
}

ForwardPrecision::ForwardPrecision(nn::Module& model, const MixedPrecisionOptions& options)
    : model_(model), options_(options.resolved()) {
  switch (options_.precision) {
    case Precision::kNo:
      break;
    case Precision::kBf16:
      autocast_ = DType::bf16;
      if (options_.master_weights == MasterWeightsKind::kNone) model.to(DType::bf16);  // pure bf16
      break;
    case Precision::kFp16:
      autocast_ = DType::f16;
      if (options_.opt_level == OptLevel::kO2) model.to(DType::f16);
      break;
    case Precision::kFp8:
      autocast_ = DType::bf16;
      fp8_ = std::make_shared<Fp8Scaling>(options_.fp8);
      model.named_parameters();  // names every weight: the fp8 scales are keyed by them
      break;
  }
}

nn::NamedTensors ForwardPrecision::optimizer_parameters() const {
  nn::NamedTensors named = model_.named_parameters();
  if (masters_) {
    for (size_t i = 0; i < named.size(); ++i) named[i].second = masters_->masters()[i];
  }
  return named;
}

AutocastOptions ForwardPrecision::autocast_options() const {
  return {.dtype = autocast_.value_or(DType::f16),
          .enabled = autocast_.has_value(),
          .normalizations = *options_.normalization_outputs,
          .fp8 = fp8_,
          .accumulation = options_.accumulation,
          .bf16_dot = options_.bf16_dot};
}

MixedPrecision::MixedPrecision(nn::Module& model, const MixedPrecisionOptions& options)
    : ForwardPrecision(model, options), scaler_(scaler_options(options_)) {
  if (options_.precision == Precision::kFp16 && options_.opt_level == OptLevel::kO2 &&
      options_.master_weights == MasterWeightsKind::kF32) {
    masters_ = std::make_unique<MasterWeights>(model.parameters());  // f32 copies of the f16 model
  }
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
