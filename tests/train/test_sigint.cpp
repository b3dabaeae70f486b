// SIGINT during training (issue 7): the Trainer finishes the step in progress, saves a checkpoint
// of it and returns `interrupted`; `halfgrad train` then exits with 130 (as shells report a
// SIGINT death), and resuming from that checkpoint finishes the run.
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <fstream>
#include <sstream>
#include <thread>

#include "halfgrad/data/dataset.h"
#include "halfgrad/nn/text_classifier.h"
#include "tests/demos/run_program.h"
#include "tests/temp_dir.h"
#include "halfgrad/io/checkpoint.h"
#include "halfgrad/train/trainer.h"

extern char** environ;

namespace hg::train {
namespace {

namespace fs = std::filesystem;
using testing::TempDir;

// Sends SIGINT to this process when step `at` ends, as a user's Ctrl-C would arrive mid-run.
class InterruptAt : public TrainerCallback {
 public:
  explicit InterruptAt(int64_t at) : at_(at) {}
  void on_step_end(const TrainerState& state, const nlohmann::json&) override {
    if (state.global_step == at_) std::raise(SIGINT);
  }

 private:
  int64_t at_;
};

int64_t count_lines(const fs::path& path) {
  std::ifstream in(path);
  int64_t n = 0;
  for (std::string line; std::getline(in, line);) ++n;
  return n;
}

TEST_CASE("Trainer: SIGINT stops after the step in progress and saves it, then restores the handler",
          "[train][sigint]") {
  const TempDir dir("sigint_trainer");
  const data::Dataset d = data::synthetic_dataset(64, 2, 5);
  nn::TextClassifier model({.max_len = 16, .d_model = 8, .heads = 2, .d_ff = 16, .layers = 1, .classes = 2}, 1);
  TrainingArguments args{.output_dir = dir.path.string(),
                         .max_steps = 50,
                         .per_device_train_batch_size = 8,
                         .save_strategy = train::IntervalStrategy::kNo,
                         .mixed_precision = {.precision = optim::Precision::kFp16}};  // O2
  Trainer trainer(model, args, d, nullptr, {}, {std::make_shared<InterruptAt>(3)});
  struct sigaction before = {}, after = {};
  sigaction(SIGINT, nullptr, &before);
  const TrainOutput out = trainer.train();
  CHECK(out.interrupted);
  CHECK(out.global_step == 3);
  CHECK(io::list_checkpoints(dir.path) == std::vector<fs::path>{dir.path / "checkpoint-3"});
  sigaction(SIGINT, nullptr, &after);  // the handler from before train() is back
  CHECK(after.sa_handler == before.sa_handler);
}

TEST_CASE("halfgrad train: SIGINT saves a checkpoint and exits 130, and --resume finishes the run",
          "[train][sigint][cli]") {
  const TempDir dir("sigint_cli");
  data::write_tsv(data::synthetic_dataset(256, 2, 5), dir / "train.tsv");
  const std::string args =
      "train --tokenizer bytes --d-model 8 --heads 2 --layers 1 --d-ff 16 --max-len 8 --batch-size 8 --threads 1"
      " --logging-steps 1 --save-strategy no --train " +
      dir / "train.tsv" + " --output-dir " + dir / "out";
  // Started directly (not through a shell) so that the signal reaches halfgrad itself.
  const std::string program = std::string(HALFGRAD_BIN_DIR) + "/halfgrad";
  std::vector<std::string> argv_strings = {program};
  std::istringstream words(args + " --max-steps 100000");
  for (std::string w; words >> w;) argv_strings.push_back(w);
  std::vector<char*> argv;
  for (std::string& s : argv_strings) argv.push_back(s.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  const std::string log = dir / "output.txt";
  posix_spawn_file_actions_addopen(&actions, 1, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_adddup2(&actions, 1, 2);
  posix_spawnattr_t attributes;
  posix_spawnattr_init(&attributes);
  sigset_t defaults;
  sigemptyset(&defaults);
  sigaddset(&defaults, SIGINT);
  posix_spawnattr_setsigdefault(&attributes, &defaults);
  posix_spawnattr_setflags(&attributes, POSIX_SPAWN_SETSIGDEF);
  pid_t pid = 0;
  REQUIRE(posix_spawn(&pid, program.c_str(), &actions, &attributes, argv.data(), environ) == 0);
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attributes);

  // Training has begun once log.jsonl holds three steps (a generous bound, not a timing check).
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::minutes(3);
  while (count_lines(dir.path / "out/log.jsonl") < 3 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  REQUIRE(::kill(pid, SIGINT) == 0);
  int status = 0;
  REQUIRE(::waitpid(pid, &status, 0) == pid);
  const std::string output = testing::read_bytes(log);
  INFO(output);
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 130);
  const fs::path checkpoint = io::latest_checkpoint(dir.path / "out");
  REQUIRE(!checkpoint.empty());
  const int64_t step = *io::checkpoint_step(checkpoint);
  CHECK(step >= 3);
  CHECK_THAT(output,
             Catch::Contains("interrupted at step " + std::to_string(step) + "; checkpoint " + checkpoint.string()));
  CHECK_THAT(testing::read_bytes(dir.path / "out/log.jsonl"), Catch::Contains("\"interrupted\":true"));

  const hg::testing::ProgramResult resumed = hg::testing::run_program(
      "halfgrad", args + " --max-steps " + std::to_string(step + 2) + " --resume " + checkpoint.string());
  INFO(resumed.output);
  CHECK(resumed.exit_code == 0);
  CHECK_THAT(resumed.output, Catch::Contains("steps " + std::to_string(step + 2) + " ("));
}

}  // namespace
}  // namespace hg::train
