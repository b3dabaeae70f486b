// The inspector's observers, its per-step records and their renderings (table, JSON, figure).
#include "halfgrad/report/numerics_inspector.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <span>
#include <utility>

#include "halfgrad/base/error.h"
#include "halfgrad/precision/convert.h"
#include "halfgrad/precision/finfo.h"
#include "halfgrad/precision/half.h"

namespace hg::report {
namespace {

using precision::Log2Histogram;
using precision::NumericsStats;

double share(uint64_t part, uint64_t whole) { return whole ? double(part) / double(whole) : 0.0; }

}  // namespace

const char* kind_name(TensorKind kind) {
  switch (kind) {
    case TensorKind::kParamGrad:
      return "grad";
    case TensorKind::kActivationGrad:
      return "act_grad";
    case TensorKind::kActivation:
      return "act";
  }
  return "";
}

double TensorNumerics::zero_share() const { return share(stats.input.zero, count()); }
double TensorNumerics::underflow_share() const { return share(stats.underflow, count()); }
double TensorNumerics::subnormal_share() const { return share(stats.subnormal, count()); }
double TensorNumerics::nonfinite_share() const { return share(stats.input.inf + stats.input.nan, count()); }
double TensorNumerics::headroom_log2() const {
  return abs_max > 0 ? std::log2(precision::finfo<half>().max / abs_max) : INFINITY;
}

namespace {

// Merges `cast` into the record of its operand in `records`, or appends one.
void add_fp8(std::vector<Fp8Cast>& records, const Fp8Cast& cast) {
  for (Fp8Cast& r : records) {
    if (r.key == cast.key && r.role == cast.role) return r.merge(cast);
  }
  records.push_back(cast);
}

}  // namespace

std::vector<Fp8Cast> merged_fp8(std::span<const StepNumerics> steps) {
  std::vector<Fp8Cast> all;
  for (const StepNumerics& s : steps) {
    for (const Fp8Cast& r : s.fp8) add_fp8(all, r);
  }
  return all;
}

NumericsStats StepNumerics::merged(TensorKind kind) const {
  NumericsStats all;
  for (const TensorNumerics& t : tensors) {
    if (t.kind == kind) all.merge(t.stats);
  }
  return all;
}

const TensorNumerics* StepNumerics::find(TensorKind kind, const std::string& name) const {
  for (const TensorNumerics& t : tensors) {
    if (t.kind == kind && t.name == name) return &t;
  }
  return nullptr;
}

NumericsInspector::NumericsInspector(InspectorOptions options) : options_(options) {
  check(options_.every >= 1, "NumericsInspector: every must be >= 1, got ", options_.every);
  if (options_.name_anomalies) anomaly_ = std::make_unique<DetectAnomaly>(/*throw_on_anomaly=*/false);
  forward_id_ = add_forward_observer([this](std::string_view op, const Tensor& out) {
    if (current_ == nullptr) return;
    // Every op, recording or not (backward closures run under NoGrad), rounds its output last.
    note_cast(out);
    // Forward passes without gradients (evaluation) are not part of a training step.
    if (!grad_enabled()) return;
    const std::string name = std::string(op) + "#" + std::to_string(op_counts_[std::string(op)]++);
    activation_names_[&out.impl()] = name;
    if (options_.activations) observe(entry(name, TensorKind::kActivation, op.data(), out), out);
  });
  grad_id_ = add_grad_observer([this](std::string_view op, const Tensor& tensor, const Tensor& grad) {
    if (current_ == nullptr) return;
    // A backward that rounds its GEMM result itself (matmul, linear) records no op for it.
    note_cast(grad);
    if (tensor.is_leaf()) {
      if (!tensor.name().empty()) observe(entry(tensor.name(), TensorKind::kParamGrad, op.data(), grad), grad);
      return;
    }
    const auto it = activation_names_.find(&tensor.impl());
    const std::string name = it != activation_names_.end() ? it->second : std::string(op) + "?";
    observe(entry(name, TensorKind::kActivationGrad, op.data(), grad), grad);
  });
}

NumericsInspector::~NumericsInspector() {
  remove_forward_observer(forward_id_);
  remove_grad_observer(grad_id_);
}

void NumericsInspector::begin_step(int64_t step) {
  current_ = nullptr;
  casts_.reset();
  fp8_casts_.reset();
  last_output_ = Tensor();
  index_.clear();
  activation_names_.clear();
  op_counts_.clear();
  if (anomaly_) reset_anomaly();
  if (step % options_.every != 0) return;
  steps_.push_back({.step = step});
  current_ = &steps_.back();
  casts_ = std::make_unique<CastObserver>();
  fp8_casts_ = std::make_unique<Fp8CastObserver>();
}

void NumericsInspector::note_wire(const WireNumerics& wire) {
  if (current_ != nullptr) current_->ddp_wire = wire;
}

void NumericsInspector::note_loss_scale(double scale) {
  if (current_ != nullptr) current_->loss_scale = scale;
}

const StepNumerics* NumericsInspector::end_step(bool skipped) {
  StepNumerics* step = current_;
  current_ = nullptr;
  if (fp8_casts_ && step != nullptr) {
    for (const Fp8Cast& c : fp8_casts_->take()) add_fp8(step->fp8, c);
  }
  casts_.reset();
  fp8_casts_.reset();
  last_output_ = Tensor();
  anomaly_message_ = skipped && anomaly_ && !last_anomaly().op.empty() ? last_anomaly().message() : "";
  if (step == nullptr) return nullptr;
  step->skipped = skipped;
  step->anomaly = anomaly_message_;
  return step;
}

TensorNumerics& NumericsInspector::entry(const std::string& name, TensorKind kind, const char* op, const Tensor& t) {
  const std::string key = std::string(kind_name(kind)) + ":" + name;
  const auto [it, inserted] = index_.try_emplace(key, current_->tensors.size());
  if (inserted)
    current_->tensors.push_back({.name = name, .kind = kind, .op = op, .shape = t.shape(), .dtype = t.dtype()});
  return current_->tensors[it->second];
}

void NumericsInspector::note_cast(const Tensor& t) {
  precision::NumericsStats pending = casts_->take();
  if (pending.total() == 0 && t.same(last_output_)) return;  // seen again, e.g. as a gradient
  last_output_ = t;
  last_cast_ = std::move(pending);
}

void NumericsInspector::observe(TensorNumerics& entry, const Tensor& values) {
  const std::vector<float> v = values.to_vector();
  // The counts are this tensor's cast only if they cover exactly its elements (a tensor created
  // between two observations, such as backward's seed, is counted with the next one).
  if (values.dtype() != DType::f32 && values.same(last_output_) && last_cast_.total() == v.size()) {
    entry.stats.merge(last_cast_);
  } else {
    std::vector<uint16_t> bits(v.size());
    precision::encode(precision::kBinary16, v, bits, {.stats = &entry.stats});
  }
  if (options_.mx) {
    const precision::Fidelity mxfp8 = precision::fidelity(precision::kMxfp8E4M3, v);
    const precision::Fidelity mxfp4 = precision::fidelity(precision::kMxfp4E2M1, v);
    if (entry.mxfp8) {
      entry.mxfp8->merge(mxfp8);
      entry.mxfp4->merge(mxfp4);
    } else {
      entry.mxfp8 = mxfp8;
      entry.mxfp4 = mxfp4;
    }
  }
  for (float x : v) {
    const double a = std::abs(double(x));
    if (!std::isfinite(a)) continue;
    entry.abs_max = std::max(entry.abs_max, a);
    if (a > 0 && (entry.abs_min_nonzero == 0 || a < entry.abs_min_nonzero)) entry.abs_min_nonzero = a;
  }
}

std::string numerics_table(const StepNumerics& step) {
  char line[320];
  std::snprintf(line, sizeof line, "numerics at step %lld%s, gradients scaled by the loss scale %g\n",
                static_cast<long long>(step.step), step.skipped ? " (skipped)" : "", step.loss_scale);
  std::string out = line;
  out +=
      "  (zero%: exactly 0; ->0%: nonzero values its cast to its dtype, or to fp16 if f32, made 0; subn%: subnormal "
      "after it; headroom: doublings from absmax to fp16's max 65504)\n";
  if (!step.anomaly.empty()) out += "  first inf/NaN: " + step.anomaly + "\n";
  const bool mx = std::any_of(step.tensors.begin(), step.tensors.end(),
                              [](const TensorNumerics& t) { return t.mxfp8.has_value(); });
  std::snprintf(line, sizeof line, "  %-40s %-8s %-5s %9s %9s %6s %6s %6s %7s %8s", "tensor", "kind", "dtype", "absmax",
                "min|x|>0", "zero%", "->0%", "subn%", "nan/inf", "headroom");
  out += line;
  out += mx ? "  mx8 err mx8->0%  mx4 err mx4->0%\n" : "\n";
  for (const TensorNumerics& t : step.tensors) {
    std::snprintf(line, sizeof line, "  %-40.40s %-8s %-5s %9.2e %9.2e %6.2f %6.2f %6.2f %7.2f %8.1f", t.name.c_str(),
                  kind_name(t.kind), std::string(dtype_name(t.dtype)).c_str(), t.abs_max, t.abs_min_nonzero,
                  100 * t.zero_share(), 100 * t.underflow_share(), 100 * t.subnormal_share(), 100 * t.nonfinite_share(),
                  t.headroom_log2());
    out += line;
    if (mx && t.mxfp8) {
      std::snprintf(line, sizeof line, "  %7.1e %7.2f  %7.1e %7.2f", t.mxfp8->rms_relative_error,
                    100 * t.mxfp8->flushed_fraction, t.mxfp4->rms_relative_error, 100 * t.mxfp4->flushed_fraction);
      out += line;
    }
    out += "\n";
  }
  if (!step.fp8.empty()) {
    std::snprintf(line, sizeof line, "  %-52s %-6s %9s %9s %6s %6s\n", "fp8 operand", "format", "amax", "scale", "->0%",
                  "sat%");
    out += line;
  }
  for (const Fp8Cast& f : step.fp8) {
    const std::string name = f.key + " " + fp8_role_name(f.role);
    std::snprintf(line, sizeof line, "  %-52.52s %-6s %9.2e %9.2e %6.2f %6.2f\n", name.c_str(), format_name(f.format),
                  f.amax, double(f.scale), 100 * f.flushed_share(), 100 * f.saturated_share());
    out += line;
  }
  if (const auto& w = step.ddp_wire) {
    const double n = double(std::max<uint64_t>(w->values, 1));
    std::snprintf(
        line, sizeof line,
        "  gradient wire %s (this rank's g / W times the loss scale): %llu values, %.2f%% flushed to zero, %.2f%% "
        "subnormal, %.2f%% overflowed\n",
        w->format.c_str(), static_cast<unsigned long long>(w->values), 100 * double(w->flushed) / n,
        100 * double(w->subnormal) / n, 100 * double(w->overflowed) / n);
    out += line;
  }
  return out;
}

nlohmann::json numerics_json(const StepNumerics& step) {
  nlohmann::json tensors = nlohmann::json::array();
  for (const TensorNumerics& t : step.tensors) {
    nlohmann::json histogram = nlohmann::json::object();
    for (int e = Log2Histogram::kMinExponent; e <= Log2Histogram::kMaxExponent; ++e) {
      if (t.stats.input.count(e) > 0) histogram[std::to_string(e)] = t.stats.input.count(e);
    }
    const double headroom = t.headroom_log2();
    tensors.push_back({{"name", t.name},
                       {"kind", kind_name(t.kind)},
                       {"op", t.op},
                       {"dtype", std::string(dtype_name(t.dtype))},
                       {"shape", t.shape.str()},
                       {"count", t.count()},
                       {"abs_max", t.abs_max},
                       {"abs_min_nonzero", t.abs_min_nonzero},
                       {"zero", t.zero_share()},
                       {"underflow", t.underflow_share()},
                       {"subnormal", t.subnormal_share()},
                       {"nonfinite", t.nonfinite_share()},
                       {"headroom_log2", std::isfinite(headroom) ? nlohmann::json(headroom) : nlohmann::json(nullptr)},
                       {"histogram", histogram}});
    if (t.mxfp8) {
      for (const auto& [key, f] : {std::pair{"mxfp8", *t.mxfp8}, std::pair{"mxfp4", *t.mxfp4}}) {
        tensors.back()[key] = {{"rms_relative_error", f.rms_relative_error},
                               {"flushed", f.flushed_fraction},
                               {"clamped", f.clamped_fraction}};
      }
    }
  }
  nlohmann::json j = {{"step", step.step},
                      {"skipped", step.skipped},
                      {"anomaly", step.anomaly},
                      {"loss_scale", step.loss_scale},
                      {"tensors", tensors}};
  for (const Fp8Cast& f : step.fp8) {
    j["fp8"].push_back({{"key", f.key},
                        {"role", fp8_role_name(f.role)},
                        {"format", format_name(f.format)},
                        {"amax", std::isfinite(f.amax) ? nlohmann::json(f.amax) : nlohmann::json("inf")},
                        {"scale", f.scale},
                        {"count", f.stats.total()},
                        {"flushed", f.flushed_share()},
                        {"saturated", f.saturated_share()}});
  }
  if (const auto& w = step.ddp_wire) {
    j["ddp_wire"] = {{"format", w->format},
                     {"values", w->values},
                     {"flushed", w->flushed},
                     {"subnormal", w->subnormal},
                     {"overflowed", w->overflowed}};
  }
  return j;
}

SvgPlot histogram_figure(const std::string& title, const std::vector<std::string>& names,
                         const std::vector<Log2Histogram>& histograms, const std::string& annotation) {
  check(names.size() == histograms.size(), "histogram_figure: ", names.size(), " names for ", histograms.size(),
        " histograms");
  SvgPlot plot({.title = title, .x_label = "log2 |x|", .y_label = "share of values"});
  int lo = 0, hi = -60;
  double top = 0;
  for (size_t i = 0; i < histograms.size(); ++i) {
    std::vector<double> x, y;
    const double total = double(histograms[i].total());
    int first = Log2Histogram::kMaxExponent + 1, last = Log2Histogram::kMinExponent - 1;
    for (int e = Log2Histogram::kMinExponent; e <= Log2Histogram::kMaxExponent; ++e) {
      if (histograms[i].count(e) == 0) continue;
      first = std::min(first, e);
      last = std::max(last, e);
    }
    for (int e = first; e <= last; ++e) {  // empty bins inside the range drawn at 0
      x.push_back(e);
      y.push_back(double(histograms[i].count(e)) / total);
      top = std::max(top, y.back());
      lo = std::min(lo, e);
      hi = std::max(hi, e + 1);
    }
    plot.add_line(names[i], std::move(x), std::move(y), /*steps=*/true);
  }
  lo = std::min(lo, -34);
  hi = std::max(hi, 18);
  plot.set_x_range(lo, hi);
  // fp16: below 2^-25 rounds to 0; [2^-25, 2^-14) subnormal; normal to 65504 < 2^16.
  plot.add_region(lo, -25, "fp16 -> 0");
  plot.add_region(-25, -14, "subnormal");
  plot.add_region(-14, 16, "normal");
  plot.add_region(16, hi, "inf");
  plot.add_text(lo + 1, 0.9 * top, annotation);
  return plot;
}

InspectorCallback::InspectorCallback(InspectorOptions options, std::string output_dir)
    : options_(options), output_dir_(std::move(output_dir)) {}

void InspectorCallback::on_train_begin(const train::TrainerState& state, const train::TrainingArguments&) {
  inspector_ = std::make_unique<NumericsInspector>(options_);
  inspector_->begin_step(state.global_step + 1);
}

void InspectorCallback::on_step_end(const train::TrainerState& state, const nlohmann::json& step_info) {
  if (const auto it = step_info.find("ddp_wire"); it != step_info.end()) {
    inspector_->note_wire({.format = it->at("format").get<std::string>(),
                           .values = it->at("values").get<uint64_t>(),
                           .flushed = it->at("flushed").get<uint64_t>(),
                           .subnormal = it->at("subnormal").get<uint64_t>(),
                           .overflowed = it->at("overflowed").get<uint64_t>()});
  }
  if (const auto it = step_info.find("scale"); it != step_info.end()) inspector_->note_loss_scale(it->get<double>());
  if (const StepNumerics* step = inspector_->end_step(!step_info.at("stepped").get<bool>())) {
    std::printf("%s", numerics_table(*step).c_str());
    std::ofstream out(std::filesystem::path(output_dir_) / "numerics.jsonl", std::ios::app);
    out << numerics_json(*step).dump() << '\n';
    check(out.good(), output_dir_, "/numerics.jsonl: cannot write");
  }
  inspector_->begin_step(state.global_step + 1);
}

void InspectorCallback::on_train_end(const train::TrainerState&) {
  // The step opened after the last optimizer step never ran: leave it out.
  const auto& all = inspector_->steps();
  const std::span<const StepNumerics> steps(all.data(), all.size() - (inspector_->inspecting() ? 1 : 0));
  if (!steps.empty()) {
    // Gradients stored in f16 count as underflow what the op's rounding flushed; the zeros are
    // those before the cast (structural ones such as padding).
    const NumericsStats grads = steps.back().merged(TensorKind::kActivationGrad);
    char text[96];
    std::snprintf(text, sizeof text, "%.1f%% exactly zero, %.1f%% more become zero in fp16",
                  100 * share(grads.input.zero, grads.total()), 100 * share(grads.underflow, grads.total()));
    char title[128];
    std::snprintf(title, sizeof title, "Activation gradients at step %lld, scaled by S = %g (the loss scale)",
                  static_cast<long long>(steps.back().step), steps.back().loss_scale);
    histogram_figure(title, {"activation gradients"}, {grads.input}, text)
        .save((std::filesystem::path(output_dir_) / "numerics-grad-histogram.svg").string());
  }
  inspected_.assign(steps.begin(), steps.end());
  inspector_.reset();
}

}  // namespace hg::report
