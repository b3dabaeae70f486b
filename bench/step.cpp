// bench_step: one full training step of nn::TextClassifier on random tokens, the model and
// step of bench/torch_step.py so the two can be compared side by side:
//   zero_grad, forward under autocast, cross_entropy, scaled backward, unscale, AdamW step
//   (lr 1e-3, weight decay 0.01 on every parameter), f32 master weights for fp16 O2, scale update.
// Configs (torch_step.py's): S vocab 256, batch 64, seq 32, d 128, heads 4, ff 512, layers 2,
// classes 8; M batch 32, seq 128, d 256, heads 8, ff 1024, layers 4. Dropout 0, every token real.
// --threads auto runs each step at all cores or 1 as halfgrad/base/adaptive_threads.h chooses (the JSON
// line adds "steps_per_team"); the median then includes its probes' steps at the slower size.
// Prints one JSON object: median (and best) ms per step over --steps after --warmup, the
// matmul GFLOP/s at the median (FLOPs counted as torch_step.py's matmul_flops), peak RSS, and
// the peak of tensor storage in use (the caching allocator's high-water mark: live tensors only,
// without the cache's free blocks, the program and its libraries).
#include <omp.h>
#include <sys/resource.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "bench/targets.h"
#include "halfgrad/autograd/allocator.h"
#include "halfgrad/autograd/all_ops.h"
#include "halfgrad/base/adaptive_threads.h"
#include "halfgrad/base/median.h"
#include "halfgrad/base/parallel.h"
#include "halfgrad/nn/text_classifier.h"
#include "halfgrad/optim/adam.h"
#include "halfgrad/train/accelerator.h"

namespace {

struct StepConfig {
  int64_t vocab, batch, seq, d, heads, ff, layers, classes;
};

const std::map<std::string, StepConfig> kConfigs = {
    {"S", {256, 64, 32, 128, 4, 512, 2, 8}},
    {"M", {256, 32, 128, 256, 8, 1024, 4, 8}},
};

// torch_step.py's matmul_flops: forward 2*M*N*K per GEMM, a step is 3x the forward.
double step_flops(const StepConfig& c) {
  const double bt = double(c.batch * c.seq);
  const double per_layer = 2 * bt * c.d * 3 * c.d + 2 * 2 * double(c.batch) * c.seq * c.seq * c.d + 2 * bt * c.d * c.d +
                           2 * bt * c.d * c.ff * 2;
  return 3 * (c.layers * per_layer + 2.0 * c.batch * c.d * c.classes);
}

double peak_rss_mb() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return double(usage.ru_maxrss) / 1024.0;  // ru_maxrss is in KiB on Linux
}

struct Batch {
  hg::Indices ids, mask, labels;
};

// Random tokens in [0, vocab) and labels in [0, classes), every position a real token.
Batch random_batch(const StepConfig& c, hg::Generator& gen) {
  const int64_t n = c.batch * c.seq;
  std::vector<float> u(size_t(n + c.batch));
  gen.uniform(u, 0.0f, 1.0f);
  std::vector<int32_t> ids(static_cast<size_t>(n)), labels(static_cast<size_t>(c.batch));
  for (int64_t i = 0; i < n; ++i)
    ids[size_t(i)] = std::min(int32_t(u[size_t(i)] * float(c.vocab)), int32_t(c.vocab - 1));
  for (int64_t i = 0; i < c.batch; ++i) {
    labels[size_t(i)] = std::min(int32_t(u[size_t(n + i)] * float(c.classes)), int32_t(c.classes - 1));
  }
  return {hg::Indices(ids, {c.batch, c.seq}), hg::Indices(std::vector<int32_t>(size_t(n), 1), {c.batch, c.seq}),
          hg::Indices(labels, {c.batch})};
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"bench_step: median time of one training step of the TextClassifier"};
  std::string config = "S", precision = "fp16-O2";
  std::string threads = "1";
  int steps = 30, warmup = 5;
  app.add_option("--config", config, "S or M")->check(CLI::IsMember({"S", "M"}));
  app.add_option("--precision", precision, "f32, fp16-O1, fp16-O2 or bf16")
      ->check(CLI::IsMember({"f32", "fp16-O1", "fp16-O2", "bf16"}));
  app.add_option("--threads", threads,
                 "OpenMP threads, or auto: each step at all cores or 1 as halfgrad/base/adaptive_threads.h chooses")
      ->check(CLI::IsMember({"auto"}) | CLI::Range(1, 1024));
  app.add_option("--steps", steps, "timed steps")->check(CLI::PositiveNumber);
  app.add_option("--warmup", warmup, "untimed steps first")->check(CLI::NonNegativeNumber);
  std::string target = "best";
  app.add_option("--target", target, "the best Highway target to use (AVX2: the AVX2 code paths on an AVX-512 CPU)");
  CLI11_PARSE(app, argc, argv);
  if (!hg::bench::restrict_targets(target, true)) {
    std::fprintf(stderr, "bench_step: target %s is not compiled in or not supported here\n", target.c_str());
    return 2;
  }
  hg::use_default_wait_policy(argv);            // re-executes once unless OMP_WAIT_POLICY/GOMP_SPINCOUNT are set
  std::optional<hg::AdaptiveThreads> adaptive;  // fed every step, --warmup's included (it has its own warm-up)
  if (threads == "auto") {
    adaptive.emplace(omp_get_max_threads());
  } else {
    omp_set_num_threads(std::stoi(threads));
  }

  const StepConfig& c = kConfigs.at(config);
  hg::nn::ClassifierConfig model_config{.vocab = c.vocab,
                                        .max_len = c.seq,
                                        .d_model = c.d,
                                        .heads = c.heads,
                                        .d_ff = c.ff,
                                        .layers = c.layers,
                                        .classes = c.classes,
                                        .dropout = 0.0f};
  hg::nn::TextClassifier model(model_config, 0);
  hg::optim::AdamW optimizer({{.params = model.parameters(), .lr = 1e-3f, .weight_decay = 0.01f}});
  const bool fp16 = precision.starts_with("fp16");
  hg::train::Accelerator accelerator({.mixed_precision = hg::optim::parse_mixed_precision(
                                          fp16 ? "fp16" : precision, precision == "fp16-O1" ? "O1" : "O2")});
  auto prepared = accelerator.prepare(model, optimizer);
  model.train();

  hg::Generator gen(1);
  std::vector<Batch> batches;
  for (int i = 0; i < 4; ++i) batches.push_back(random_batch(c, gen));

  std::vector<double> ms;
  float first_loss = 0, last_loss = 0;
  for (int i = 0; i < warmup + steps; ++i) {
    const Batch& batch = batches[size_t(i) % batches.size()];
    if (adaptive) adaptive->before_step();
    const auto start = std::chrono::steady_clock::now();
    const hg::Tensor loss = hg::cross_entropy(prepared.forward(batch.ids, batch.mask), batch.labels);
    const float value = loss.item();
    accelerator.backward(loss);
    accelerator.step();  // steps, updates the scale, zeroes the gradients
    const double elapsed = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    if (adaptive) adaptive->after_step(elapsed * 1e-3);
    if (i == 0) first_loss = value;
    last_loss = value;
    if (i >= warmup) ms.push_back(elapsed);
  }
  const double median_ms = hg::median(ms), best_ms = *std::min_element(ms.begin(), ms.end());
  nlohmann::json out = {{"bench", "step"},
                        {"config", config},
                        {"precision", precision},
                        {"threads", adaptive ? nlohmann::json("auto") : nlohmann::json(std::stoi(threads))},
                        {"parameters", model.parameter_count()},
                        {"ms_per_step", median_ms},
                        {"best_ms", best_ms},
                        {"gflops", step_flops(c) / (median_ms * 1e-3) / 1e9},
                        {"peak_rss_mb", peak_rss_mb()},
                        {"peak_tensor_mb", double(hg::allocator_stats().peak_in_use_bytes) / (1 << 20)},
                        {"wait_policy", hg::thread_wait_policy()},
                        {"target", hwy::TargetName(hwy::SupportedAndGeneratedTargets().front())},
                        {"loss_first", first_loss},
                        {"loss_last", last_loss}};
  if (adaptive) {  // every step's team, --warmup's included: {"2": 30, "1": 5}
    for (const auto& [team, count] : adaptive->steps_per_team()) out["steps_per_team"][std::to_string(team)] = count;
  }
  std::printf("%s\n", out.dump().c_str());
  return 0;
}
