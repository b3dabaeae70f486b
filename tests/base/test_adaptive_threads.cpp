// AdaptiveThreads (halfgrad/base/adaptive_threads.h) fed synthetic step times: it picks the faster team,
// leaves near-ties to one thread, follows a machine whose load changes at the next probe, ignores
// the warm-up steps, spaces its probes as documented and does nothing with one thread; before_step
// sets OpenMP's team. And the reason it is allowed at all: a Trainer run whose steps alternate
// between 2 threads and 1 trains the same bits as a run on 1 thread.
#include <omp.h>

#include <catch2/catch.hpp>
#include <functional>
#include <map>
#include <optional>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include "halfgrad/base/adaptive_threads.h"
#include "halfgrad/base/error.h"
#include "halfgrad/data/dataset.h"
#include "halfgrad/nn/text_classifier.h"
#include "tests/demos/run_program.h"
#include "tests/temp_dir.h"
#include "halfgrad/train/trainer.h"

namespace hg::adaptive_threads_test {

// Seconds a step takes at a team size, on step `i` (counted from 0 over the whole run).
using StepTime = std::function<double(int team, int64_t i)>;

// Runs `steps` steps from step `first`, feeding each the time `time` gives its team; returns the
// teams in order.
std::vector<int> run(AdaptiveThreads& a, int64_t steps, const StepTime& time, int64_t first = 0) {
  std::vector<int> teams;
  for (int64_t i = first; i < first + steps; ++i) {
    teams.push_back(a.team());
    a.after_step(time(teams.back(), i));
  }
  return teams;
}

// A machine where `max` threads take `max_seconds` a step and 1 thread 10 ms.
StepTime fixed(double max_seconds) {
  return [max_seconds](int team, int64_t) { return team == 1 ? 0.010 : max_seconds; };
}

// Restores OpenMP's team size when a test has changed it.
struct SavedTeam {
  int saved = omp_get_max_threads();
  ~SavedTeam() { omp_set_num_threads(saved); }
};

TEST_CASE("adaptive threads: warm-up at max, then an interleaved probe, then the faster team", "[threads]") {
  const AdaptiveThreadsOptions o;  // the defaults: 2 warm-up steps, 3 probe steps at each size, 50 between probes
  SECTION("two threads faster: 2 is kept") {
    AdaptiveThreads a(2);
    const std::vector<int> teams = run(a, 2 + 6 + 50, fixed(0.006));
    CHECK(std::vector<int>(teams.begin(), teams.begin() + 8) == std::vector<int>{2, 2, /*probe*/ 2, 1, 2, 1, 2, 1});
    CHECK(std::set<int>(teams.begin() + 8, teams.end()) == std::set<int>{2});
    REQUIRE(a.decisions().size() == 1);
    CHECK(a.decisions()[0].team == 2);
    CHECK(a.decisions()[0].step == o.warmup_steps + 2 * o.probe_steps);
    CHECK(a.decisions()[0].seconds_max == 0.006);
    CHECK(a.decisions()[0].seconds_one == 0.010);
    CHECK(a.steps_per_team().at(2) == 2 + 3 + 50);
    CHECK(a.steps_per_team().at(1) == 3);
    CHECK(a.best() == 2);
  }
  SECTION("one thread faster: 1 is chosen") {
    AdaptiveThreads a(2);
    const std::vector<int> teams = run(a, 2 + 6 + 50, fixed(0.012));
    CHECK(std::vector<int>(teams.begin(), teams.begin() + 8) == std::vector<int>{2, 2, 2, 1, 2, 1, 2, 1});
    CHECK(std::set<int>(teams.begin() + 8, teams.end()) == std::set<int>{1});
    REQUIRE(a.decisions().size() == 1);
    CHECK(a.decisions()[0].team == 1);
    CHECK(a.best() == 1);
  }
  SECTION("the median decides: one slow step of the faster team does not flip it") {
    AdaptiveThreads a(2);
    // Probe steps 2, 4, 6 run at max; the one at step 4 is preempted for 100 ms.
    run(a, 8, [](int team, int64_t i) { return team == 1 ? 0.010 : i == 4 ? 0.100 : 0.006; });
    REQUIRE(a.decisions().size() == 1);
    CHECK(a.decisions()[0].team == 2);
  }
}

TEST_CASE("adaptive threads: a near-tie goes to one thread", "[threads]") {
  // margin 0.03: max wins only below 0.97 x 1's 10 ms = 9.7 ms. 9.6 and 9.8 are 0.1 ms either
  // side, far beyond double rounding.
  for (const auto& [max_seconds, expected] : {std::pair{0.0096, 2}, std::pair{0.0098, 1}, std::pair{0.0100, 1}}) {
    AdaptiveThreads a(4);
    run(a, 8, fixed(max_seconds));
    INFO("max takes " << max_seconds << " s");
    REQUIRE(a.decisions().size() == 1);
    CHECK(a.decisions()[0].team == (expected == 2 ? 4 : 1));
  }
}

TEST_CASE("adaptive threads: a machine that becomes busy, then quiet, is followed at the next probe", "[threads]") {
  AdaptiveThreads a(2);
  // Quiet until step 20 (2 threads 6 ms), busy from step 20 to 200 (2 threads 12 ms), then quiet.
  const auto machine = [](int team, int64_t i) { return team == 1 ? 0.010 : i >= 20 && i < 200 ? 0.012 : 0.006; };
  run(a, 300, machine);
  // Decisions: step 8 (2 warm-up + 6 probe), quiet: 2. Then 50 steps at 2 and a probe: step 64,
  // busy: 1, a change, so 50 steps again: step 120, still busy: 1 confirmed, the interval doubles
  // to 100: step 226, quiet again: 2, a change: 50 steps, step 282: 2.
  std::vector<std::pair<int64_t, int>> got;
  for (const AdaptiveThreads::Decision& d : a.decisions()) got.emplace_back(d.step, d.team);
  CHECK(got == std::vector<std::pair<int64_t, int>>{{8, 2}, {64, 1}, {120, 1}, {226, 2}, {282, 2}});
}

TEST_CASE("adaptive threads: probes space out while they confirm the winner, capped in steps and seconds",
          "[threads]") {
  SECTION("steps: 50, 100, 200, then the cap") {
    AdaptiveThreads a(2, {.max_reprobe_steps = 200});
    run(a, 1000, fixed(0.006));
    std::vector<int64_t> steps;
    for (const AdaptiveThreads::Decision& d : a.decisions()) steps.push_back(d.step);
    // Each probe takes 6 steps; between decisions: the interval's steps plus the next probe's 6.
    CHECK(steps == std::vector<int64_t>{8, 8 + 56, 64 + 106, 170 + 206, 376 + 206, 582 + 206, 788 + 206});
  }
  SECTION("seconds: after reprobe_steps, no more than reprobe_seconds of steps between probes") {
    // 2 threads take 0.125 s a step (exact in binary, so the sums are): 1 s is 8 steps.
    AdaptiveThreads a(2, {.reprobe_steps = 4, .reprobe_seconds = 1.0});
    run(a, 60, [](int team, int64_t) { return team == 1 ? 0.25 : 0.125; });
    std::vector<int64_t> steps;
    for (const AdaptiveThreads::Decision& d : a.decisions()) steps.push_back(d.step);
    // Intervals 4, 8, then 16 and 32 cut to the 8 steps of 1 s (each + the 6 probe steps).
    CHECK(steps == std::vector<int64_t>{8, 8 + 10, 18 + 14, 32 + 14, 46 + 14});
  }
  SECTION("seconds never bring the probes closer than reprobe_steps") {
    // 0.5 s steps: 1 s is 2 steps, but the interval stays at least 4.
    AdaptiveThreads a(2, {.reprobe_steps = 4, .reprobe_seconds = 1.0});
    run(a, 38, [](int team, int64_t) { return team == 1 ? 1.0 : 0.5; });
    std::vector<int64_t> steps;
    for (const AdaptiveThreads::Decision& d : a.decisions()) steps.push_back(d.step);
    CHECK(steps == std::vector<int64_t>{8, 8 + 10, 18 + 10, 28 + 10});
  }
}

TEST_CASE("adaptive threads: warm-up steps are run at max and never count as evidence", "[threads]") {
  AdaptiveThreads a(2, {.warmup_steps = 3});
  // The warm-up steps at max are 100x slower than 1 thread's; were they evidence, 1 would win.
  const std::vector<int> teams = run(a, 3 + 6, [](int team, int64_t i) {
    return i < 3 ? 1.0 : team == 1 ? 0.010 : 0.006;
  });
  CHECK(std::vector<int>(teams.begin(), teams.begin() + 3) == std::vector<int>{2, 2, 2});
  REQUIRE(a.decisions().size() == 1);
  CHECK(a.decisions()[0].team == 2);
  CHECK(a.decisions()[0].seconds_max == 0.006);
}

TEST_CASE("adaptive threads: with one thread at most nothing changes", "[threads]") {
  const SavedTeam saved;
  omp_set_num_threads(3);  // not what the policy would set: it must not touch it
  AdaptiveThreads a(1);
  for (int i = 0; i < 100; ++i) {
    CHECK(a.before_step() == 1);
    a.after_step(i % 2 ? 0.001 : 1.0);
  }
  CHECK(omp_get_max_threads() == 3);
  CHECK(a.decisions().empty());
  CHECK(a.steps_per_team() == std::map<int, int64_t>{{1, 100}});
  CHECK(a.summary() == "auto (1: 100 steps)");
}

TEST_CASE("adaptive threads: before_step sets OpenMP's team, summary counts the steps, bad options fail", "[threads]") {
  {
    const SavedTeam saved;
    AdaptiveThreads a(2, {.warmup_steps = 0, .probe_steps = 1});
    CHECK(a.before_step() == 2);
    CHECK(omp_get_max_threads() == 2);
    a.after_step(0.006);
    CHECK(a.before_step() == 1);
    CHECK(omp_get_max_threads() == 1);
    a.after_step(0.010);
    CHECK(a.summary() == "auto (2: 1 step, 1: 1 step)");
  }
  CHECK_THROWS_WITH(AdaptiveThreads(0), Catch::Contains("at least 1 thread"));
  CHECK_THROWS_WITH(AdaptiveThreads(2, {.probe_steps = 0}), Catch::Contains("probe_steps"));
  CHECK_THROWS_WITH(AdaptiveThreads(2, {.margin = 1.0}), Catch::Contains("margin"));
  AdaptiveThreads a(2);
  CHECK_THROWS_WITH(a.after_step(-1.0), Catch::Contains("step time"));
}

TEST_CASE("adaptive threads: a Trainer run switching between 2 threads and 1 trains the bits of a 1-thread run",
          "[threads][train]") {
  const SavedTeam saved;
  // Texts of 24 bytes, batch 32: 768 tokens a step, so the feed-forward GEMMs (2 x 768 x 32 x 128
  // = 6.3 MFLOP) and the elementwise ops (98,304 elements) are above halfgrad/base/parallel.h's
  // thresholds and do split over 2 threads. fp16 O2 with dropout: scaling, masters and the
  // dropout generator are in the step.
  const data::Dataset train_set = data::synthetic_dataset(256, 4, 11, 24, 24);
  const nn::ClassifierConfig config{
      .vocab = 256, .max_len = 24, .d_model = 32, .heads = 2, .d_ff = 128, .layers = 1, .classes = 4, .dropout = 0.1f};
  struct Record : train::TrainerCallback {
    std::vector<double> losses;
    std::vector<int> teams;
    void on_step_end(const train::TrainerState&, const nlohmann::json& info) override {
      losses.push_back(info.at("loss").get<double>());
      teams.push_back(omp_get_max_threads());  // the team the step ran at
    }
  };
  const auto train_run = [&](const std::string& name, std::optional<AdaptiveThreads> policy) {
    const testing::TempDir dir(name);
    train::TrainingArguments args{.output_dir = dir.path.string(),
                                  .max_steps = 6,
                                  .per_device_train_batch_size = 32,
                                  .save_strategy = train::IntervalStrategy::kNo,
                                  .mixed_precision = {.precision = optim::Precision::kFp16},
                                  .seed = 5};
    nn::TextClassifier model(config, 3);
    auto record = std::make_shared<Record>();
    train::Trainer trainer(model, args, train_set, nullptr, {}, {record});
    if (policy) trainer.adapt_threads(*policy);
    trainer.train();
    if (policy) {
      CHECK(trainer.state().log_history.back().at("threads") == trainer.adaptive_threads()->summary());
    }
    return std::tuple{model.fingerprint(), record->losses, record->teams};
  };
  omp_set_num_threads(1);
  const auto [fixed_bits, fixed_losses, fixed_teams] = train_run("threads_fixed", std::nullopt);
  // 1 warm-up step at 2, probes of one step each, 2 steps at the winner w between: 2 | 2 1 | w w | 2
  const auto [auto_bits, auto_losses, auto_teams] =
      train_run("threads_auto",
                AdaptiveThreads(2, {.warmup_steps = 1, .probe_steps = 1, .reprobe_steps = 2, .max_reprobe_steps = 2}));
  CHECK(std::set<int>(auto_teams.begin(), auto_teams.end()) == std::set<int>{1, 2});
  CHECK(auto_losses == fixed_losses);
  CHECK(auto_bits == fixed_bits);
}

TEST_CASE("halfgrad train --threads: auto reports the steps at each team in the log, N is fixed, others fail",
          "[threads][cli]") {
  const testing::TempDir dir("threads_flag");
  data::write_tsv(data::synthetic_dataset(16, 2, 3), dir / "train.tsv");
  const std::string tiny =
      "train --precision fp32 --d-model 8 --heads 2 --layers 1 --d-ff 16 --max-len 8 --batch-size 4"
      " --tokenizer bytes --max-steps 5 --save-strategy no --train " +
      dir / "train.tsv";
  // The summary, the log's last line.
  const auto logged_threads = [&](const std::string& out) {
    std::istringstream lines(testing::read_bytes(dir.path / out / "log.jsonl"));
    std::string line, last;
    while (std::getline(lines, line)) last = line;
    return nlohmann::json::parse(last).at("threads").get<std::string>();
  };
  const testing::ProgramResult adaptive =
      testing::run_program("halfgrad", tiny + " --threads auto --output-dir " + dir / "auto");
  INFO(adaptive.output);
  REQUIRE(adaptive.exit_code == 0);
  // "auto (2: 3 steps, 1: 2 steps)": whatever the machine chose, the counts cover the 5 steps.
  const std::string threads = logged_threads("auto");
  std::smatch m;
  REQUIRE(std::regex_match(threads, m, std::regex(R"(auto \((.*)\))")));
  int64_t steps = 0;
  const std::string counts = m[1];
  const std::regex count(R"(([0-9]+): ([0-9]+) steps?)");
  for (auto it = std::sregex_iterator(counts.begin(), counts.end(), count); it != std::sregex_iterator(); ++it) {
    steps += std::stoll((*it)[2]);
  }
  CHECK(steps == 5);
  const testing::ProgramResult one =
      testing::run_program("halfgrad", tiny + " --threads 1 --output-dir " + dir / "one");
  REQUIRE(one.exit_code == 0);
  CHECK(logged_threads("one") == "1");
  CHECK_THAT(one.output, Catch::Contains("; 1 threads"));
  for (const char* bad : {"0", "fast", "2.5"}) {
    const testing::ProgramResult r =
        testing::run_program("halfgrad", tiny + " --threads " + bad + " --output-dir " + dir / "bad");
    INFO("--threads " << bad << "\n" << r.output);
    CHECK(r.exit_code != 0);
    CHECK_THAT(r.output, Catch::Contains("--threads"));
  }
}

}  // namespace hg::adaptive_threads_test
