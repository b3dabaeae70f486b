// manual_loop: API level 1 -- the PyTorch AMP training loop, written with halfgrad.
//
//   scaler = GradScaler()
//   for ids, mask, labels in loader:
//       with autocast(dtype=float16):
//           loss = cross_entropy(model(ids, mask), labels)
//       scaler.scale(loss).backward()
//       scaler.unscale_(optimizer); clip_grad_norm_(params, 1.0)
//       scaler.step(optimizer); scaler.update(); optimizer.zero_grad()
//
// Here the model stays f32 (fp16 "O1": autocast casts per op, the casts' backward returns f32
// gradients). Compare with accelerator_loop.cpp and trainer.cpp: the same run at levels 2 and 3.
#include <CLI/CLI.hpp>
#include <cstdio>

#include "halfgrad/autograd/autocast.h"
#include "halfgrad/autograd/all_ops.h"
#include "halfgrad/autograd/tape.h"
#include "halfgrad/base/parallel.h"
#include "halfgrad/data/data_loader.h"
#include "halfgrad/nn/text_classifier.h"
#include "halfgrad/optim/adam.h"
#include "halfgrad/optim/clip_grad_norm.h"
#include "halfgrad/optim/grad_scaler.h"
#include "halfgrad/optim/param_groups.h"

using namespace hg;

int main(int argc, char** argv) {
  hg::use_default_wait_policy(argv);  // before libgomp's threads exist: see halfgrad/base/parallel.h
  CLI::App app{"manual_loop: autocast + GradScaler by hand (PyTorch AMP style)"};
  int64_t steps = 200;
  uint64_t seed = 0;
  bool f32 = false;
  app.add_option("--steps", steps, "optimizer steps")->capture_default_str()->check(CLI::PositiveNumber);
  app.add_option("--seed", seed, "random seed")->capture_default_str();
  app.add_flag("--fp32", f32, "train in f32 (no autocast, scaler disabled)");
  CLI11_PARSE(app, argc, argv);

  const data::Dataset train = data::synthetic_dataset(2048, 4, seed);
  nn::ClassifierConfig config{
      .vocab = 256, .max_len = 16, .d_model = 32, .heads = 2, .d_ff = 64, .layers = 1, .classes = 4, .dropout = 0.0f};
  nn::TextClassifier model(config, seed);
  optim::AdamW optimizer(optim::decay_groups(model.named_parameters(), 3e-3f, 0.01f));
  optim::GradScaler scaler({.enabled = !f32});
  data::DataLoader loader(train, data::Tokenizer(), {.batch_size = 32, .seed = seed, .max_len = 16});

  for (int64_t step = 0; step < steps; ++step) {
    loader.set_epoch(step / loader.num_batches());
    const data::Batch batch = loader.batch(step % loader.num_batches());
    Tensor loss;
    {
      Autocast autocast({.dtype = DType::f16, .enabled = !f32});
      loss = cross_entropy(model.forward(batch.ids, batch.attention_mask), batch.labels);
    }
    backward(scaler.scale(loss));
    scaler.unscale(optimizer);
    optim::clip_grad_norm(optimizer.parameters(), 1.0f);
    scaler.step(optimizer);
    scaler.update();
    optimizer.zero_grad();
    if ((step + 1) % 50 == 0) {  // the loss of this step's batch, before the update
      std::printf("step %4lld  loss %.4f  scale %g\n", static_cast<long long>(step + 1), loss.item(),
                  scaler.get_scale());
    }
  }
  std::printf("skipped steps %lld, weights fingerprint %016llx\n", static_cast<long long>(scaler.skipped_steps()),
              static_cast<unsigned long long>(model.fingerprint()));
  return 0;
}
