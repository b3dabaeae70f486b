// The training run the teaching demos (loss_scaling, master_weights, formats, underflow, fp8,
// accumulation) share:
// the main job's language-id classifier, trained from one seed under one mixed-precision
// setting through the Accelerator (API level 2), with a NumericsInspector counting zero
// gradients along the way, and evaluated on the test split. Header-only because every
// demos/*.cpp is its own program. What differs between the demos is only the RunSpec.
#pragma once

#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "halfgrad/autograd/all_ops.h"
#include "halfgrad/autograd/rounding_scope.h"
#include "halfgrad/base/error.h"
#include "halfgrad/data/data_loader.h"
#include "halfgrad/data/dataset.h"
#include "halfgrad/nn/text_classifier.h"
#include "halfgrad/optim/adam.h"
#include "halfgrad/optim/lr_scheduler.h"
#include "halfgrad/optim/param_groups.h"
#include "halfgrad/precision/convert.h"
#include "halfgrad/precision/numerics_stats.h"
#include "halfgrad/train/accelerator.h"
#include "halfgrad/train/evaluation.h"
#include "halfgrad/report/numerics_inspector.h"

namespace hg::demos {

struct RunSpec {
  std::string label;
  optim::MixedPrecisionOptions mixed_precision;  // the Accelerator's (f32 by default)
  bool track_weight_changes = false;             // share of model weight elements an optimizer step changed
  // At every optimizer step, every element's update u (the change of the optimizer's f32
  // parameter, the master under O2 or bf16) against the 16-bit weight w it started from (bf16
  // for a bf16 run, else f16). Needs f32 optimizer parameters (f32 masters): in pure 16-bit
  // training a lost update leaves no trace.
  bool track_updates = false;
};

struct RunSettings {
  int64_t steps = 600;
  uint64_t seed = 0;
  int64_t batch = 64;
  float lr = 1e-3f;
  int64_t log_every = 25;      // loss curve resolution
  int64_t inspect_every = 10;  // NumericsInspector (gradients only) on every n-th step
  std::string model = "main";  // language_id_config's size
};

struct RunResult {
  std::string label;
  std::vector<double> log_steps, losses;  // mean training loss over each log window
  double final_loss = 0;                  // mean over the last log window
  double test_accuracy = 0;
  // Over the inspected steps: shares of parameter-gradient and activation-gradient elements that
  // were exactly zero, and of activation-gradient elements that a cast to fp16 would flush (only
  // nonzero where the gradient is still wider than fp16, e.g. the f32 run).
  double param_grad_zero = 0, act_grad_zero = 0, act_grad_fp16_underflow = 0;
  int64_t skipped = 0;
  std::vector<double> scales, skipped_steps;  // scale of every step; steps that were skipped
  std::string first_anomaly;                  // of the first skipped step, if any
  std::vector<double> weights_unchanged;      // per step, with track_weight_changes
  // With track_updates: log2 histogram of |u| / |w| (u = 0 in its zero bin, u != 0 to w = 0 in
  // its inf bin); nonzero updates, and those a pure 16-bit step would lose: r(w + u) == w, the
  // f32 sum rounded once to nearest, as Optimizer::step rounds a 16-bit parameter.
  precision::Log2Histogram update_ratios;
  int64_t updates = 0, updates_lost_in_f16 = 0;
  // fp8 mode: every scaled GEMM operand over the inspected steps (amax, last scale, flushed and
  // saturated counts), in first-seen order.
  std::vector<Fp8Cast> fp8;
  // fp8 mode: the same per inspected step (its step number in fp8_steps), for the scales over time.
  std::vector<double> fp8_steps;
  std::vector<std::vector<Fp8Cast>> fp8_by_step;
  double seconds = 0;
};

// "main": the byte-level transformer the demos teach with (README, "Results of the byte-level
// transformer"; the main job's model before docs/classifier.md's recipe): d_model 128, 4 heads,
// 2 layers, d_ff 512, max_len 32, dropout 0.1. "small": the same architecture at d_model 32,
// 2 heads, 1 layer, d_ff 64 (about 1/30 of the work): the sanitized test tree runs the demos with
// it, where ASan makes every GEMM load 20x slower; the Release tests run "main".
inline nn::ClassifierConfig language_id_config(int64_t classes, const std::string& model = "main") {
  if (model == "small") {
    return {.vocab = 256, .max_len = 32, .d_model = 32, .heads = 2, .d_ff = 64, .layers = 1, .classes = classes};
  }
  return {.vocab = 256, .max_len = 32, .d_model = 128, .heads = 4, .d_ff = 512, .layers = 2, .classes = classes};
}

// Trains `model` (built by the caller from language_id_config and the seed) and evaluates it.
inline RunResult train_language_id(const data::Split& split, const RunSpec& spec, const RunSettings& settings,
                                   nn::TextClassifier& model) {
  const auto start = std::chrono::steady_clock::now();
  // The mode's rounding (--flush-subnormals, --rounding) around the whole run, evaluation included.
  const RoundingScope rounding = optim::rounding_scope(spec.mixed_precision, settings.seed);
  optim::AdamW optimizer(optim::decay_groups(model.named_parameters(), settings.lr, 0.01f));
  optim::LrScheduler scheduler(optimizer, optim::Schedule::kCosine, std::min<int64_t>(100, settings.steps / 10),
                               settings.steps);
  train::Accelerator accelerator({.mixed_precision = spec.mixed_precision});
  const auto prepared = accelerator.prepare(model, optimizer, &scheduler);
  data::DataLoader loader(split.train, data::Tokenizer(),
                          {.batch_size = settings.batch, .seed = settings.seed, .max_len = model.config.max_len});
  report::NumericsInspector inspector(
      {.every = settings.inspect_every,
       .activations = false,
       .name_anomalies = spec.mixed_precision.loss_scaling.kind != optim::LossScaling::Kind::kNone});

  RunResult r{.label = spec.label};
  double window = 0;
  int64_t window_n = 0;
  model.train();
  for (int64_t step = 0; step < settings.steps; ++step) {
    loader.set_epoch(step / loader.num_batches());
    const data::Batch batch = loader.batch(step % loader.num_batches());
    std::vector<std::vector<float>> before;
    if (spec.track_weight_changes) {
      for (const Tensor& p : model.parameters()) before.push_back(p.to_vector());
    }
    std::vector<std::vector<float>> masters_before;
    if (spec.track_updates) {
      for (const Tensor& p : optimizer.parameters()) {
        check(p.dtype() == DType::f32, "demo run '", spec.label,
              "': track_updates needs f32 optimizer parameters (f32 or O2), got ", dtype_name(p.dtype()));
        masters_before.push_back(p.to_vector());
      }
    }
    inspector.begin_step(step);
    const Tensor loss = cross_entropy(prepared.forward(batch.ids, batch.attention_mask), batch.labels);
    r.scales.push_back(accelerator.mixed_precision().scaler().get_scale());
    inspector.note_loss_scale(r.scales.back());
    accelerator.backward(loss);
    accelerator.clip_grad_norm(1.0f);
    const bool stepped = accelerator.step();
    inspector.end_step(!stepped);
    if (!inspector.anomaly().empty() && r.first_anomaly.empty()) {
      r.first_anomaly = "step " + std::to_string(step) + ": " + inspector.anomaly();
    }
    if (!stepped) r.skipped_steps.push_back(double(step));
    if (spec.track_weight_changes) {
      int64_t same = 0, total = 0;
      const std::vector<Tensor> params = model.parameters();
      for (size_t i = 0; i < params.size(); ++i) {
        const std::vector<float> after = params[i].to_vector();
        for (size_t j = 0; j < after.size(); ++j) same += after[j] == before[i][j] ? 1 : 0;
        total += int64_t(after.size());
      }
      if (stepped) r.weights_unchanged.push_back(double(same) / double(total));
    }
    if (spec.track_updates && stepped) {
      const std::vector<Tensor> params = optimizer.parameters();
      for (size_t i = 0; i < params.size(); ++i) {
        const std::vector<float> after = params[i].to_vector();
        const std::vector<float>& master = masters_before[i];
        const precision::FloatFormat format =
            spec.mixed_precision.precision == optim::Precision::kBf16 ? precision::kBFloat16 : precision::kBinary16;
        std::vector<float> w = master, u(w.size()), sum(w.size());
        precision::round_to(format, w);
        for (size_t j = 0; j < w.size(); ++j) {
          u[j] = after[j] - master[j];  // exact while the step changes the master by less than a factor 2 (Sterbenz)
          sum[j] = w[j] + u[j];
        }
        precision::round_to(format, sum);
        for (size_t j = 0; j < w.size(); ++j) {
          r.update_ratios.add(u[j] == 0.0f   ? 0.0f
                              : w[j] == 0.0f ? std::numeric_limits<float>::infinity()
                                             : std::fabs(u[j]) / std::fabs(w[j]));
          if (u[j] == 0.0f) continue;
          ++r.updates;
          r.updates_lost_in_f16 += sum[j] == w[j] ? 1 : 0;
        }
      }
    }
    window += loss.item();
    if (++window_n == settings.log_every || step + 1 == settings.steps) {
      r.log_steps.push_back(double(step + 1));
      r.losses.push_back(window / double(window_n));
      window = 0;
      window_n = 0;
    }
  }
  r.final_loss = r.losses.back();
  r.skipped = int64_t(r.skipped_steps.size());
  precision::NumericsStats params, activations;
  for (const report::StepNumerics& s : inspector.steps()) {
    params.merge(s.merged(report::TensorKind::kParamGrad));
    activations.merge(s.merged(report::TensorKind::kActivationGrad));
  }
  auto share = [](uint64_t part, uint64_t whole) { return whole ? double(part) / double(whole) : 0.0; };
  r.param_grad_zero = share(params.input.zero, params.total());
  r.act_grad_zero = share(activations.input.zero, activations.total());
  r.act_grad_fp16_underflow = share(activations.underflow, activations.total());
  r.fp8 = report::merged_fp8(inspector.steps());
  for (const report::StepNumerics& s : inspector.steps()) {
    if (s.fp8.empty()) continue;
    r.fp8_steps.push_back(double(s.step));
    r.fp8_by_step.push_back(s.fp8);
  }
  const train::EvalPrediction eval = train::run_evaluation(model, split.test, 256, accelerator.mixed_precision());
  int64_t correct = 0;
  for (size_t i = 0; i < eval.predictions.size(); ++i) correct += eval.predictions[i] == eval.label_ids[i] ? 1 : 0;
  r.test_accuracy = double(correct) / double(eval.predictions.size());
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return r;
}

inline RunResult train_language_id(const data::Split& split, const RunSpec& spec, const RunSettings& settings) {
  nn::TextClassifier model(language_id_config(int64_t(split.train.label_names.size()), settings.model), settings.seed);
  return train_language_id(split, spec, settings, model);
}

// One curve of a figure.
struct Curve {
  std::string name;
  std::vector<double> x, y;
};

// "a", "a and b", "a, b and c".
inline std::string joined(const std::vector<std::string>& names) {
  std::string out;
  for (size_t i = 0; i < names.size(); ++i) out += (i == 0 ? "" : i + 1 == names.size() ? " and " : ", ") + names[i];
  return out;
}

// Adds the curves to `plot`, drawing once, and naming together ("f32, fp16 and fp16 scaled
// coincide"), the curves that a reader could not tell apart: same x, and y within 1/100 of the
// y range of all curves at every point (about 3 pixels of a default figure).
inline void add_curves(report::SvgPlot& plot, const std::vector<Curve>& curves) {
  double lo = std::numeric_limits<double>::infinity(), hi = -lo;
  for (const Curve& c : curves) {
    for (const double y : c.y) lo = std::min(lo, y), hi = std::max(hi, y);
  }
  const double tolerance = (hi - lo) / 100;
  std::vector<bool> drawn(curves.size(), false);
  for (size_t i = 0; i < curves.size(); ++i) {
    if (drawn[i]) continue;
    std::vector<std::string> names = {curves[i].name};
    for (size_t j = i + 1; j < curves.size(); ++j) {
      bool same = !drawn[j] && curves[j].x == curves[i].x;
      for (size_t k = 0; same && k < curves[i].y.size(); ++k)
        same = std::fabs(curves[j].y[k] - curves[i].y[k]) <= tolerance;
      if (same) names.push_back(curves[j].name), drawn[j] = true;
    }
    plot.add_line(names.size() == 1 ? names[0] : joined(names) + " coincide", curves[i].x, curves[i].y);
  }
}

// The runs' loss curves, through add_curves.
inline void add_loss_curves(report::SvgPlot& plot, const std::vector<RunResult>& runs) {
  std::vector<Curve> curves;
  for (const RunResult& r : runs) curves.push_back({r.label, r.log_steps, r.losses});
  add_curves(plot, curves);
}

// The common flags of every teaching demo, and the setup they imply.
struct DemoFlags {
  int64_t steps;
  uint64_t seed = 0;
  std::string out = "demo-output";
  int threads = 1;
  int64_t eval_size = 1000;    // test words per language
  std::string model = "main";  // language_id_config's size

  // Sets the OpenMP thread count and creates the output directory.
  void apply() const {
    omp_set_num_threads(threads);
    std::filesystem::create_directories(out);
  }
  std::string path(const std::string& file) const { return (std::filesystem::path(out) / file).string(); }
};

template <class App>
void add_demo_flags(App& app, DemoFlags& flags) {
  app.add_option("--steps", flags.steps, "optimizer steps of each training run")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--seed", flags.seed, "random seed (model, data order, split)")->capture_default_str();
  app.add_option("--out", flags.out, "directory for the SVG figures")->capture_default_str();
  app.add_option("--threads", flags.threads, "OpenMP threads")->capture_default_str()->check(CLI::Range(1, 256));
  app.add_option("--eval-size", flags.eval_size, "test words per language (1000: the whole test split)")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{1}, int64_t{1000}));
  app.add_option("--model", flags.model, "main (the model the demo teaches with) | small (a quick check)")
      ->capture_default_str()
      ->check(CLI::IsMember({"main", "small"}));
}

inline data::Split language_id_split(const DemoFlags& flags) {
  data::Split split = data::language_id_dataset({.test_per_language = flags.eval_size, .seed = flags.seed});
  std::printf("data: %s\n      %s\n\n", split.train.summary().c_str(), split.test.summary().c_str());
  return split;
}

}  // namespace hg::demos
