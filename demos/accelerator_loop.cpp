// accelerator_loop: API level 2 -- the Hugging Face Accelerate loop, written with halfgrad.
//
//   accelerator = Accelerator(mixed_precision="fp16")
//   model, optimizer = accelerator.prepare(model, optimizer)
//   for ids, mask, labels in loader:
//       loss = cross_entropy(model(ids, mask), labels)     # autocast inside the prepared model
//       accelerator.backward(loss)                          # scaling inside
//       accelerator.clip_grad_norm_(params, 1.0); optimizer.step(); optimizer.zero_grad()
//
// The same run as manual_loop.cpp (level 1) and trainer.cpp (level 3): same data, model, seed
// and settings, so the printed weights fingerprint (a hash of every bit) is the same.
#include <CLI/CLI.hpp>
#include <cstdio>

#include "halfgrad/autograd/all_ops.h"
#include "halfgrad/base/parallel.h"
#include "halfgrad/data/data_loader.h"
#include "halfgrad/nn/text_classifier.h"
#include "halfgrad/optim/adam.h"
#include "halfgrad/optim/param_groups.h"
#include "halfgrad/train/accelerator.h"

using namespace hg;

int main(int argc, char** argv) {
  hg::use_default_wait_policy(argv);  // before libgomp's threads exist: see halfgrad/base/parallel.h
  CLI::App app{"accelerator_loop: the same training through an Accelerator (HF Accelerate style)"};
  int64_t steps = 200;
  uint64_t seed = 0;
  bool f32 = false;
  app.add_option("--steps", steps, "optimizer steps")->capture_default_str()->check(CLI::PositiveNumber);
  app.add_option("--seed", seed, "random seed")->capture_default_str();
  app.add_flag("--fp32", f32, "train in f32 (mixed_precision \"no\")");
  CLI11_PARSE(app, argc, argv);

  const data::Dataset train = data::synthetic_dataset(2048, 4, seed);
  nn::ClassifierConfig config{
      .vocab = 256, .max_len = 16, .d_model = 32, .heads = 2, .d_ff = 64, .layers = 1, .classes = 4, .dropout = 0.0f};
  nn::TextClassifier model(config, seed);
  optim::AdamW optimizer(optim::decay_groups(model.named_parameters(), 3e-3f, 0.01f));
  train::Accelerator accelerator(
      {.mixed_precision = {.precision = f32 ? optim::Precision::kNo : optim::Precision::kFp16,
                           .opt_level = optim::OptLevel::kO1}});
  auto prepared = accelerator.prepare(model, optimizer);
  data::DataLoader loader(train, data::Tokenizer(), {.batch_size = 32, .seed = seed, .max_len = 16});

  for (int64_t step = 0; step < steps; ++step) {
    loader.set_epoch(step / loader.num_batches());
    const data::Batch batch = loader.batch(step % loader.num_batches());
    const Tensor loss = cross_entropy(prepared.forward(batch.ids, batch.attention_mask), batch.labels);
    accelerator.backward(loss);
    accelerator.clip_grad_norm(1.0f);
    accelerator.step();
    if ((step + 1) % 50 == 0) {
      std::printf("step %4lld  loss %.4f  scale %g\n", static_cast<long long>(step + 1), loss.item(),
                  accelerator.mixed_precision().scaler().get_scale());
    }
  }
  std::printf("skipped steps %lld, weights fingerprint %016llx\n",
              static_cast<long long>(accelerator.mixed_precision().scaler().skipped_steps()),
              static_cast<unsigned long long>(model.fingerprint()));
  return 0;
}
