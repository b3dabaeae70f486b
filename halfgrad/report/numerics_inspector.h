// NumericsInspector: what fp16 does to a real model's numbers, per tensor, every N steps: each
// parameter's gradient, each activation ("<op>#<k>") and its gradient, as precision::NumericsStats
// plus abs-max and abs-min-nonzero, taken from the cast that stored the tensor where there was one
// (a CastObserver), and under fp8 each scaled operand's amax, scale and losses. Output: a text
// table, a JSONL line per inspected step, SVG figures. How each statistic is taken:
// docs/autograd.md, "The numerics inspector".
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include <nlohmann/json.hpp>

#include "halfgrad/autograd/cast_observer.h"
#include "halfgrad/autograd/fp8_cast.h"
#include "halfgrad/autograd/fp8_scaling.h"
#include "halfgrad/autograd/tape.h"
#include "halfgrad/autograd/tensor.h"
#include "halfgrad/precision/fidelity.h"
#include "halfgrad/precision/numerics_stats.h"
#include "halfgrad/report/svg_plot.h"
#include "halfgrad/train/trainer.h"

namespace hg::report {

enum class TensorKind { kParamGrad, kActivationGrad, kActivation };
const char* kind_name(TensorKind kind);  // "grad", "act_grad", "act"

// One tensor at one inspected step (several contributions to one gradient are merged).
struct TensorNumerics {
  std::string name;
  TensorKind kind = TensorKind::kActivation;
  std::string op;  // the op that produced it (for gradients: whose backward did)
  Shape shape;
  DType dtype = DType::f32;
  precision::NumericsStats stats;  // of the cast that stored an f16/bf16 tensor, else of a cast to fp16
  double abs_max = 0, abs_min_nonzero = 0;
  // With InspectorOptions::mx: what storing the values in MXFP8 (e4m3, OCP scale rule) and in
  // MXFP4 blocks of 32 would keep (halfgrad/precision/fidelity.h), as a what-if next to the fp16 numbers.
  std::optional<precision::Fidelity> mxfp8, mxfp4;

  uint64_t count() const { return stats.total(); }
  double zero_share() const;
  double underflow_share() const;  // nonzero values the cast made zero
  double subnormal_share() const;  // values that are subnormal after the cast
  double nonfinite_share() const;  // inf or NaN
  double headroom_log2() const;    // log2(65504 / abs_max): doublings left before fp16 overflows
};

// Data-parallel training with a 16-bit wire format (halfgrad/dist/ddp.h): what this rank's cast of its
// gradients (divided by the world size, still loss-scaled) to the wire format did in one step.
struct WireNumerics {
  std::string format;  // "fp16" | "bf16"
  uint64_t values = 0, flushed = 0, subnormal = 0, overflowed = 0;
};

struct StepNumerics {
  int64_t step = 0;
  bool skipped = false;
  std::string anomaly;                  // when skipped: the first op that produced inf/NaN (Anomaly::message)
  std::vector<TensorNumerics> tensors;  // in the order first seen
  // fp8 mode: every scaled GEMM operand (key = the linear layer's module path), its casts of the
  // step merged, in the order first cast.
  std::vector<Fp8Cast> fp8;
  std::optional<WireNumerics> ddp_wire;  // set by the Trainer's step_info under mpirun, 16-bit wire
  // The loss scale the step's backward ran with (note_loss_scale): every gradient it holds is
  // that many times the true one.
  double loss_scale = 1;
  // Every tensor of `kind` merged.
  precision::NumericsStats merged(TensorKind kind) const;
  // The record of tensor `name` of `kind`, or null when the step saw none.
  const TensorNumerics* find(TensorKind kind, const std::string& name) const;
};

struct InspectorOptions {
  int64_t every = 1;  // inspect steps 0, every, 2 * every, ...
  bool activations = true;
  bool name_anomalies = true;  // anomaly mode for the life of the inspector (costs a scan per op)
  // Also measure each tensor under MX block quantization (TensorNumerics::mxfp8/mxfp4): opt-in,
  // it quantizes every observed tensor twice.
  bool mx = false;
};

class NumericsInspector {
 public:
  // Starts observing on this thread (the tape's observers are per thread). While a step is
  // inspected the process-wide CastObserver is taken: one inspecting inspector at a time.
  explicit NumericsInspector(InspectorOptions options = {});
  ~NumericsInspector();
  NumericsInspector(const NumericsInspector&) = delete;
  NumericsInspector& operator=(const NumericsInspector&) = delete;

  // Opens step `step`; tensors are recorded only if step % every == 0.
  void begin_step(int64_t step);
  // Records the gradient wire cast of the step being inspected (no-op when none is).
  void note_wire(const WireNumerics& wire);
  // Records the loss scale of the step being inspected (no-op when none is).
  void note_loss_scale(double scale);
  // Closes the step; `skipped`: the loss scaler skipped it (then the anomaly, if any, is named).
  // Returns the step's record if it was inspected, else nullptr.
  const StepNumerics* end_step(bool skipped);
  bool inspecting() const { return current_ != nullptr; }
  // The first inf/NaN (Anomaly::message) of the step end_step() just closed, inspected or not,
  // if it was skipped; else empty.
  const std::string& anomaly() const { return anomaly_message_; }
  const std::vector<StepNumerics>& steps() const { return steps_; }

 private:
  TensorNumerics& entry(const std::string& name, TensorKind kind, const char* op, const Tensor& t);
  // Takes the counts of the roundings since the previous observation as the cast that produced `t`.
  void note_cast(const Tensor& t);
  void observe(TensorNumerics& entry, const Tensor& values);

  InspectorOptions options_;
  int forward_id_ = -1, grad_id_ = -1;
  std::unique_ptr<DetectAnomaly> anomaly_;
  std::string anomaly_message_;
  std::vector<StepNumerics> steps_;
  StepNumerics* current_ = nullptr;
  std::unordered_map<std::string, size_t> index_;  // (kind, name) -> position in current_->tensors
  std::unordered_map<const TensorImpl*, std::string> activation_names_;
  std::unordered_map<std::string, int64_t> op_counts_;
  std::unique_ptr<CastObserver> casts_;         // installed while a step is inspected
  std::unique_ptr<Fp8CastObserver> fp8_casts_;  // likewise
  Tensor last_output_;                          // the tensor observed last (op output or gradient)
  precision::NumericsStats last_cast_;          // what the roundings just before that observation did
};

// The fp8 records of several steps merged per operand (Fp8Cast::merge), in first-seen order.
std::vector<Fp8Cast> merged_fp8(std::span<const StepNumerics> steps);

// The per-tensor table of one step, under a header that names the loss scale and a one-line
// legend of the columns: name, kind, dtype, abs-max, abs-min-nonzero, then the
// shares (%) exactly zero before the cast, flushed to zero by it, subnormal after it, inf/NaN,
// and the headroom to fp16's max in doublings, e.g.
//   encoder.layers.0.attn.k_proj.bias  grad  f32  5.61e-04  7.15e-06  0.00  0.00  31.25  0.00  26.8
// When the step has MX figures (InspectorOptions::mx), four more columns: the RMS relative error
// and the share flushed to zero (%) under MXFP8 and under MXFP4. Under fp8 a second table
// follows: per scaled operand, its format, amax, scale and the shares (%) its cast flushed to
// zero and saturated. Under mpirun with a 16-bit wire format a last line says what this rank's
// cast of the gradients to the wire format flushed, made subnormal and overflowed.
std::string numerics_table(const StepNumerics& step);
// One JSON object: step, skipped, anomaly, and per tensor every number of the table plus the
// non-empty histogram bins {"log2 bin": count}; with MX figures also "mxfp8" and "mxfp4", each
// {"rms_relative_error", "flushed", "clamped"}; under fp8 also "fp8": per operand {"key", "role",
// "format", "amax", "scale", "count", "flushed", "saturated"}; under a 16-bit wire format also
// "ddp_wire": {"format", "values", "flushed", "subnormal", "overflowed"}.
nlohmann::json numerics_json(const StepNumerics& step);

// Micikevicius et al. 2018, Figure 3: share of values per log2|x| bin, fp16's underflow,
// subnormal, normal and overflow regions shaded, one series per histogram, and `annotation`
// (e.g. "12.3% become zero in fp16") written on the figure.
SvgPlot histogram_figure(const std::string& title, const std::vector<std::string>& names,
                         const std::vector<precision::Log2Histogram>& histograms, const std::string& annotation);

// Attaches an inspector to a Trainer: inspects every N-th optimizer step, prints the table of
// each inspected step, appends numerics.jsonl to output_dir, and at the end of training writes
// numerics-grad-histogram.svg (the last inspected step's activation gradients) there.
class InspectorCallback : public train::TrainerCallback {
 public:
  InspectorCallback(InspectorOptions options, std::string output_dir);
  void on_train_begin(const train::TrainerState& state, const train::TrainingArguments& args) override;
  void on_step_end(const train::TrainerState& state, const nlohmann::json& step_info) override;
  void on_train_end(const train::TrainerState& state) override;
  // The inspected steps of the run, once on_train_end ran (halfgrad/report/html_report.h draws them).
  const std::vector<StepNumerics>& inspected() const { return inspected_; }

 private:
  InspectorOptions options_;
  std::string output_dir_;
  std::unique_ptr<NumericsInspector> inspector_;
  std::vector<StepNumerics> inspected_;
};

}  // namespace hg::report
