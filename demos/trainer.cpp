// trainer: API level 3 -- the Hugging Face Trainer, written with halfgrad.
//
//   args = TrainingArguments(output_dir, max_steps=200, fp16=True, learning_rate=3e-3, ...)
//   trainer = Trainer(model, args, train_dataset=train)
//   trainer.train()
//
// The same run as manual_loop.cpp (level 1) and accelerator_loop.cpp (level 2): same data,
// model, seed and settings, so the printed weights fingerprint (a hash of every bit) is the same.
#include "halfgrad/train/trainer.h"

#include <CLI/CLI.hpp>
#include <cstdio>

#include "halfgrad/base/parallel.h"
#include "halfgrad/data/dataset.h"
#include "halfgrad/nn/text_classifier.h"

using namespace hg;

int main(int argc, char** argv) {
  hg::use_default_wait_policy(argv);  // before libgomp's threads exist: see halfgrad/base/parallel.h
  CLI::App app{"trainer: the same training through a Trainer (HF Trainer style)"};
  int64_t steps = 200;
  uint64_t seed = 0;
  bool f32 = false;
  std::string output_dir = "trainer-demo-output";
  app.add_option("--steps", steps, "optimizer steps")->capture_default_str()->check(CLI::PositiveNumber);
  app.add_option("--seed", seed, "random seed")->capture_default_str();
  app.add_flag("--fp32", f32, "train in f32 (fp16 = false)");
  app.add_option("--out", output_dir, "output directory (log.jsonl)")->capture_default_str();
  CLI11_PARSE(app, argc, argv);

  const data::Dataset train = data::synthetic_dataset(2048, 4, seed);
  nn::ClassifierConfig config{
      .vocab = 256, .max_len = 16, .d_model = 32, .heads = 2, .d_ff = 64, .layers = 1, .classes = 4, .dropout = 0.0f};
  nn::TextClassifier model(config, seed);
  train::TrainingArguments args;
  args.output_dir = output_dir;
  args.max_steps = steps;
  args.per_device_train_batch_size = 32;
  args.learning_rate = 3e-3f;
  args.weight_decay = 0.01f;
  args.lr_scheduler_type = optim::Schedule::kConstant;
  args.save_strategy = train::IntervalStrategy::kNo;
  args.mixed_precision = {.precision = f32 ? optim::Precision::kNo : optim::Precision::kFp16,
                          .opt_level = optim::OptLevel::kO1};
  args.max_grad_norm = 1.0f;
  args.logging_steps = 50;
  args.seed = seed;
  train::Trainer trainer(model, args, train);
  trainer.train();
  for (const nlohmann::json& entry : trainer.state().log_history) {
    if (entry.contains("loss") && entry.contains("learning_rate")) {
      std::printf("step %4lld  loss %.4f  scale %g\n", entry.at("step").get<long long>(),
                  entry.at("loss").get<double>(), entry.at("loss_scale").get<double>());
    }
  }
  std::printf("skipped steps %lld, weights fingerprint %016llx\n",
              static_cast<long long>(trainer.state().skipped_steps),
              static_cast<unsigned long long>(model.fingerprint()));
  return 0;
}
