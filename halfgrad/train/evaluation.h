// Running a TextClassifier over a dataset without gradients: logits, predictions and the mean
// loss, with the numerics it was trained with -- the forward pass runs under the training
// mode's autocast (optim::MixedPrecision::autocast), so under fp16 O2 softmax and layer norm
// store their outputs in f16 as in training, and the logits equal the training forward's in eval
// mode bit for bit. Shared by Trainer::evaluate/predict, the demos and the `halfgrad eval` /
// `predict` commands, which rebuild model and mode from a checkpoint with load_for_inference.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "halfgrad/data/dataset.h"
#include "halfgrad/data/tokenizer.h"
#include "halfgrad/nn/text_classifier.h"
#include "halfgrad/optim/mixed_precision.h"

namespace hg::io {
struct Checkpoint;
}

namespace hg::train {

struct EvalPrediction {
  std::vector<float> logits;  // (N, K) row-major
  int64_t classes = 0;
  std::vector<int32_t> label_ids;
  std::vector<int32_t> predictions;  // argmax of each row
  double loss = 0;                   // mean cross-entropy over the N examples
  int64_t truncated = 0;             // texts longer than max_len tokens, cut by the tokenizer
};

// `mixed_precision`: the mode `model` was prepared with (its autocast runs every forward).
// `tokenizer`: what the model was trained with (config.json's; bytes by default).
EvalPrediction run_evaluation(nn::TextClassifier& model, const data::Dataset& dataset, int64_t batch_size,
                              const optim::ForwardPrecision& mixed_precision,
                              const data::TokenizerConfig& tokenizer = {});

// A model rebuilt from a checkpoint directory for evaluation, in the mode it was trained in.
struct InferenceModel {
  std::unique_ptr<nn::TextClassifier> model;
  std::vector<std::string> labels;  // class id -> name
  data::TokenizerConfig tokenizer;
  // The training mode's forward numerics (no f32 masters, no loss scaler); refers to *model:
  // declared after it.
  std::unique_ptr<optim::ForwardPrecision> mixed_precision;
};

// Reads config.json (model, labels, tokenizer) and the mixed-precision options of
// trainer_state.json's training_args, prepares the model as training did (fp16 O2: an f16
// model) and loads the model's state (load_model_state: the weights, an fp8 run's scales). A
// checkpoint without training_args runs in f32. Throws hg::Error naming the file at fault: a corrupted file (its
// SHA-256), a config out of bounds or inconsistent (io::check_model_config,
// io::check_config_matches_weights, checked before the model is built), and weights that
// load_checked_weights refuses (else the predictions would be silently NaN).
InferenceModel load_for_inference(const std::string& checkpoint_dir);

// The model's part of a run's state (Accelerator::state_dict lists the whole): the weights that
// hold it (optimizer_parameters: the f32 masters under O2) into `state.model`, and an fp8 run's
// scales into `state.fp8`. What a model-only checkpoint holds besides its config.
void save_model_state(const optim::ForwardPrecision& precision, io::Checkpoint& state);
// Loads those parts of `state`, read from the checkpoint directory `dir`, into `model` prepared
// with `precision`: the weights through load_checked_weights, then an fp8 run's scales (refused,
// naming the file, when the checkpoint has none). Inference (load_for_inference),
// load_best_model_at_end and Accelerator::load_state_dict load the model this way.
void load_model_state(optim::ForwardPrecision& precision, nn::Module& model, const io::Checkpoint& state,
                      const std::string& dir);

// The one check every loaded checkpoint's weights pass before they are used (load_model_state
// runs it; so may any Accelerator loop that loads weights), then the load itself. `mp` is the mode `model` was
// prepared with, so each parameter already has the dtype it computes in. Refused, naming `file`,
// the tensor, the element and its value: a missing tensor, one the model does not have, a shape
// that differs, an inf or NaN, and a finite value that the parameter's dtype cannot hold (an f32
// master above 65504 for an fp16 O2 model: 65520 and up round to inf in f16). Then the values
// go into the optimizer's tensors (the f32 masters under O2, else the parameters) and the model
// follows the masters.
void load_checked_weights(optim::ForwardPrecision& mp, nn::Module& model, const nn::StateDict& weights,
                          const std::string& file);

// Softmax probabilities of each row of logits (K classes), in f64 for display.
std::vector<double> probabilities(const std::vector<float>& logits, int64_t row, int64_t classes);

}  // namespace hg::train
