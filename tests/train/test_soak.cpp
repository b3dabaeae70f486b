// Soak (ctest label `soak`, registered in the sanitized build only: ctest --test-dir build-asan
// -L soak): the main job's model, data and precision (d_model 128, 4 heads, 2 layers, d_ff 512,
// max_len 32, fp16 O2, dynamic loss scaling, batch 64, language-id set, a checkpoint every 50
// steps) for 300 steps -- 10x a 30-step short run; the full job's 10x would be 52,560 steps,
// days under ASan -- on one thread (the machine is shared, and libgomp's spinning barriers
// crawl when another process holds the second core), with memory sampled every 25 steps.
// Resident memory must be flat once ASan's quarantine of freed blocks (256 MB) has filled, by
// step 100; the numbers go to BENCHMARKS.md.
#include <catch2/catch.hpp>

#include <omp.h>

#include <cstdio>
#include <fstream>
#include <map>
#include <string>

#include "halfgrad/data/dataset.h"
#include "halfgrad/nn/text_classifier.h"
#include "tests/temp_dir.h"
#include "halfgrad/train/trainer.h"

namespace hg::train {
namespace {

// A field of /proc/self/status in MiB ("VmRSS", "VmHWM").
double status_mib(const std::string& field) {
  std::ifstream in("/proc/self/status");
  for (std::string line; std::getline(in, line);) {
    if (line.rfind(field + ":", 0) == 0) return std::stod(line.substr(field.size() + 1)) / 1024.0;  // kB
  }
  return -1;
}

struct MemorySampler : TrainerCallback {
  std::map<int64_t, std::pair<double, double>> samples;  // step -> (VmRSS, VmHWM)
  void on_step_end(const TrainerState& state, const nlohmann::json&) override {
    if (state.global_step % 25 == 0) samples[state.global_step] = {status_mib("VmRSS"), status_mib("VmHWM")};
  }
};

TEST_CASE("soak: 300 steps of the main job's model keep resident memory flat", "[.soak]") {
  const testing::TempDir dir("soak");
  omp_set_num_threads(1);
  const data::Split split = data::language_id_dataset();
  nn::TextClassifier model({.vocab = 256,
                            .max_len = 32,
                            .d_model = 128,
                            .heads = 4,
                            .d_ff = 512,
                            .layers = 2,
                            .classes = 7,
                            .dropout = 0.1f},
                           0);
  TrainingArguments args{.output_dir = dir.path.string(),
                         .max_steps = 300,
                         .learning_rate = 1e-3f,
                         .warmup_steps = 100,
                         .lr_scheduler_type = optim::Schedule::kCosine,
                         .save_strategy = train::IntervalStrategy::kSteps,
                         .save_steps = 50,
                         .save_total_limit = 2,
                         .mixed_precision = {.precision = optim::Precision::kFp16, .opt_level = optim::OptLevel::kO2},
                         .seed = 0};
  auto sampler = std::make_shared<MemorySampler>();
  Trainer trainer(model, args, split.train, nullptr, {}, {sampler});
  trainer.train();
  for (const auto& [step, m] : sampler->samples)
    std::printf("soak step %4lld: VmRSS %7.1f MiB, VmHWM %7.1f MiB\n", static_cast<long long>(step), m.first, m.second);
  const double early = sampler->samples.at(100).first, late = sampler->samples.at(300).first;
  INFO("VmRSS at step 100: " << early << " MiB, at step 300: " << late << " MiB");
  // Flat: 200 more steps add less than 8 MiB, so a leak of 40 KiB or more per step fails.
  CHECK(late <= early + 8.0);
}

}  // namespace
}  // namespace hg::train
