// quickstart: the README's "library in 20 lines" -- a byte-level transformer classifier trained
// on a `label<TAB>text` file in fp16 O2 (f16 model, f32 master weights, dynamic loss scaling),
// with the three switches of mixed precision held by one optim::MixedPrecision object.
//   build/bin/example_quickstart [FILE.tsv]     (no file: a small synthetic set)
// ctest runs it on the synthetic set (label `example`), so the README's code keeps compiling.
#include <cstdio>

#include "halfgrad/autograd/all_ops.h"
#include "halfgrad/autograd/tape.h"
#include "halfgrad/data/data_loader.h"
#include "halfgrad/data/dataset.h"
#include "halfgrad/nn/text_classifier.h"
#include "halfgrad/optim/adam.h"
#include "halfgrad/optim/mixed_precision.h"
#include "halfgrad/optim/param_groups.h"

using namespace hg;

int main(int argc, char** argv) try {
  const data::Dataset train = argc > 1 ? data::read_tsv(argv[1]) : data::synthetic_dataset(512, 4, /*seed=*/0);
  nn::TextClassifier model({.vocab = 256,
                            .max_len = 32,
                            .d_model = 64,
                            .heads = 4,
                            .d_ff = 128,
                            .layers = 1,
                            .classes = int64_t(train.label_names.size())},
                           /*seed=*/0);
  optim::MixedPrecision mp(model, {.precision = optim::Precision::kFp16, .opt_level = optim::OptLevel::kO2});
  optim::AdamW optimizer(optim::decay_groups(mp.optimizer_parameters(), /*lr=*/1e-3f, /*weight_decay=*/0.01f));
  data::DataLoader loader(train, data::Tokenizer(), {.batch_size = 64, .max_len = 32});
  for (int64_t epoch = 0; epoch < 3; ++epoch) {
    loader.set_epoch(epoch);
    double loss_sum = 0;
    for (int64_t i = 0; i < loader.num_batches(); ++i) {
      const data::Batch batch = loader.batch(i);
      Tensor loss;
      {
        Autocast autocast = mp.autocast();  // f16 products, f32 losses and sums
        loss = cross_entropy(model.forward(batch.ids, batch.attention_mask), batch.labels);
      }
      backward(mp.scale(loss));                    // f16 gradients, scaled so they do not underflow
      mp.step(optimizer, /*max_grad_norm=*/1.0f);  // unscale, clip, AdamW on the f32 masters (or skip)
      optimizer.zero_grad();
      model.zero_grad();
      loss_sum += loss.item();
    }
    std::printf("epoch %lld: mean loss %.4f, loss scale %g, skipped steps %lld\n", static_cast<long long>(epoch + 1),
                loss_sum / double(loader.num_batches()), mp.scaler().get_scale(),
                static_cast<long long>(mp.scaler().skipped_steps()));
  }
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "quickstart: error: %s\n", e.what());
  return 1;
}
