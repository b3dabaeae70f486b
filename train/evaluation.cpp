// Batched no-grad inference.
#include "train/evaluation.h"

#include <cmath>

#include "autograd/autocast.h"
#include "autograd/ops.h"
#include "autograd/tape.h"
#include "data/data_loader.h"

namespace hg::train {

EvalPrediction run_evaluation(nn::TextClassifier& model, const data::Dataset& dataset, int64_t batch_size,
                              std::optional<DType> autocast, const data::TokenizerConfig& tokenizer_config) {
  const data::Tokenizer tokenizer(tokenizer_config, model.config.pooling == nn::Pooling::kCls);
  data::DataLoader loader(dataset, tokenizer, {batch_size, false, false, 0, model.config.max_len});
  EvalPrediction p;
  p.classes = model.config.classes;
  p.truncated = loader.truncated();
  double loss_sum = 0;
  const bool was_training = model.is_training();
  model.eval();
  NoGrad no_grad;
  for (int64_t b = 0; b < loader.num_batches(); ++b) {
    const data::Batch batch = loader.batch(b);
    Tensor logits;
    {
      Autocast guard(autocast.value_or(DType::f16), autocast.has_value());
      logits = model.forward(batch.ids, batch.attention_mask);
    }
    loss_sum += double(cross_entropy(logits, batch.labels).item()) * double(batch.size());
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

std::vector<double> probabilities(const std::vector<float>& logits, int64_t row, int64_t classes) {
  std::vector<double> p(static_cast<size_t>(classes));
  double m = -INFINITY, total = 0;
  for (int64_t k = 0; k < classes; ++k) m = std::max(m, double(logits[size_t(row * classes + k)]));
  for (int64_t k = 0; k < classes; ++k) total += p[size_t(k)] = std::exp(double(logits[size_t(row * classes + k)]) - m);
  for (double& v : p) v /= total;
  return p;
}

}  // namespace hg::train
