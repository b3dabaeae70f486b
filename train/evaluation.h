// Running a TextClassifier over a dataset without gradients: logits, predictions and the mean
// loss, in the precision it was trained in (the autocast dtype, if any). Shared by
// Trainer::evaluate/predict and the `halfgrad eval` / `predict` commands.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "autograd/dtype.h"
#include "data/dataset.h"
#include "data/tokenizer.h"
#include "nn/text_classifier.h"

namespace hg::train {

struct EvalPrediction {
  std::vector<float> logits;  // (N, K) row-major
  int64_t classes = 0;
  std::vector<int32_t> label_ids;
  std::vector<int32_t> predictions;  // argmax of each row
  double loss = 0;                   // mean cross-entropy over the N examples
  int64_t truncated = 0;             // texts longer than max_len tokens, cut by the tokenizer
};

// `tokenizer`: what the model was trained with (config.json's; bytes by default).
EvalPrediction run_evaluation(nn::TextClassifier& model, const data::Dataset& dataset, int64_t batch_size,
                              std::optional<DType> autocast, const data::TokenizerConfig& tokenizer = {});

// Softmax probabilities of each row of logits (K classes), in f64 for display.
std::vector<double> probabilities(const std::vector<float>& logits, int64_t row, int64_t classes);

}  // namespace hg::train
