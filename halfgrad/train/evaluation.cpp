// Batched no-grad inference, and a checkpoint loaded for it.
#include "halfgrad/train/evaluation.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>

#include "halfgrad/autograd/autocast.h"
#include "halfgrad/autograd/all_ops.h"
#include "halfgrad/autograd/tape.h"
#include "halfgrad/base/error.h"
#include "halfgrad/data/data_loader.h"
#include "halfgrad/io/checkpoint.h"
#include "halfgrad/io/model_config.h"

namespace hg::train {

EvalPrediction run_evaluation(nn::TextClassifier& model, const data::Dataset& dataset, int64_t batch_size,
                              const optim::ForwardPrecision& mixed_precision,
                              const data::TokenizerConfig& tokenizer_config) {
  const data::Tokenizer tokenizer(tokenizer_config, model.config.pooling == nn::Pooling::kCls);
  data::DataLoader loader(dataset, tokenizer, {batch_size, false, false, 0, model.config.max_len});
  EvalPrediction p;
  p.classes = model.config.classes;
  p.truncated = loader.truncated();
  double loss_sum = 0;
  const bool was_training = model.is_training();
  model.eval();
  NoGrad no_grad;
  const RoundingScope rounding = mixed_precision.evaluation_rounding_scope();  // the run's rounding, as trained
  for (int64_t b = 0; b < loader.num_batches(); ++b) {
    const data::Batch batch = loader.batch(b);
    Tensor logits, loss;
    {  // the loss too, as training computes it (under f16 accumulation its sum is an f16 one)
      Autocast guard = mixed_precision.autocast();
      logits = model.forward(batch.ids, batch.attention_mask);
      loss = cross_entropy(logits, batch.labels);
    }
    loss_sum += double(loss.item()) * double(batch.size());
    const std::vector<float> values = logits.to_vector();
    p.logits.insert(p.logits.end(), values.begin(), values.end());
    const MaxResult best = max(logits, 1);
    p.predictions.insert(p.predictions.end(), best.indices.values.begin(), best.indices.values.end());
    p.label_ids.insert(p.label_ids.end(), batch.labels.values.begin(), batch.labels.values.end());
  }
  model.train(was_training);
  p.loss = loss_sum / double(dataset.size());
  return p;
}

namespace {

// The first element of `saved` whose narrowed value is not finite, as "element i holds v".
std::string first_overflow(const Tensor& saved, const Tensor& narrowed) {
  const std::vector<float> before = saved.to_vector(), after = narrowed.to_vector();
  for (size_t i = 0; i < after.size(); ++i) {
    if (!std::isfinite(after[i])) {
      char text[64];
      std::snprintf(text, sizeof text, "element %zu holds %.9g", i, double(before[i]));
      return text;
    }
  }
  return "an element";
}

}  // namespace

void load_checked_weights(optim::ForwardPrecision& mp, nn::Module& model, const nn::StateDict& weights,
                          const std::string& file) {
  const nn::NamedTensors targets = mp.optimizer_parameters();
  std::map<std::string, DType> computes_in;  // each parameter's dtype in the prepared model
  for (const auto& [name, tensor] : model.named_parameters()) computes_in[name] = tensor.dtype();
  for (const auto& [name, tensor] : weights) {
    check(computes_in.count(name) != 0, file, ": tensor '", name, "' (shape ", tensor.shape(),
          ") is not a parameter of this model");
  }
  NoGrad no_grad;
  for (const auto& [name, target] : targets) {
    const auto it = weights.find(name);
    check(it != weights.end(), file, ": missing tensor '", name, "'");
    const Tensor& saved = it->second;
    check(saved.shape() == target.shape(), file, ": tensor '", name, "' has shape ", saved.shape(),
          ", the model expects ", target.shape());
    check(saved.all_finite(), file, ": tensor '", name, "' holds inf or NaN");
    const DType dtype = computes_in.at(name);
    if (dtype != saved.dtype()) {  // a narrower dtype (widening is exact)
      const Tensor narrowed = saved.to(dtype);
      check(narrowed.all_finite(), file, ": tensor '", name, "' ", first_overflow(saved, narrowed),
            ", which is inf in ", dtype_name(dtype), " (the dtype this model computes in; largest finite ",
            dtype == DType::f16 ? "65504" : "3.3895e38", ")");
    }
  }
  for (const auto& [name, target] : targets) target.assign_nearest(weights.at(name).to_vector());
  if (optim::MasterWeights* masters = mp.masters()) masters->copy_masters_to_model();
}

void save_model_state(const optim::ForwardPrecision& precision, io::Checkpoint& state) {
  for (const auto& [name, tensor] : precision.optimizer_parameters()) state.model[name] = tensor;
  if (const Fp8Scaling* fp8 = precision.fp8()) state.fp8 = fp8->state_dict();  // fp8_scaling.json
}

void load_model_state(optim::ForwardPrecision& precision, nn::Module& model, const io::Checkpoint& state,
                      const std::string& dir) {
  load_checked_weights(precision, model, state.model, dir + "/model.safetensors");
  if (Fp8Scaling* fp8 = precision.fp8()) {  // fp8: the scales training ended with
    check(!state.fp8.is_null(), dir, ": an fp8 run's checkpoint without ", io::kFp8File);
    fp8->load_state_dict(state.fp8, dir + "/" + io::kFp8File);
  }
}

InferenceModel load_for_inference(const std::string& dir) {
  const io::Checkpoint c = io::load_checkpoint(dir);
  const io::ModelConfig config = io::model_config_from_checkpoint(c, dir);
  io::check_config_matches_weights(config, c.model, dir + "/model.safetensors");  // before allocating the model
  // The training run's mode, from the same keys its TrainingArguments wrote (absent: f32).
  const nlohmann::json args = c.trainer_state.value("training_args", nlohmann::json::object());
  const optim::MixedPrecisionOptions options =
      optim::mixed_precision_from_json(args, dir + "/trainer_state.json: training_args");
  InferenceModel m;
  m.model = std::make_unique<nn::TextClassifier>(config.classifier, 0);
  m.labels = config.labels;
  m.tokenizer = config.tokenizer;
  m.mixed_precision = std::make_unique<optim::ForwardPrecision>(*m.model, options);  // O2: the model -> f16
  load_model_state(*m.mixed_precision, *m.model, c, dir);
  return m;
}

std::vector<double> probabilities(const std::vector<float>& logits, int64_t row, int64_t classes) {
  std::vector<double> p(static_cast<size_t>(classes));
  double m = -INFINITY, total = 0;
  for (int64_t k = 0; k < classes; ++k) m = std::max(m, double(logits[size_t(row * classes + k)]));
  for (int64_t k = 0; k < classes; ++k) total += p[size_t(k)] = std::exp(double(logits[size_t(row * classes + k)]) - m);
  for (double& v : p) v /= total;
  return p;
}

}  // namespace hg::train
