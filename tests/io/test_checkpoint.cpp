// train/checkpoint: the directory layout and a real model/optimizer round trip, listing and
// rotation, missing and truncated files, the leftovers of crashed saves, and a process killed
// with SIGKILL at random moments while it saves 20 MB checkpoints.
#include <catch2/catch.hpp>

#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <random>
#include <set>
#include <thread>

#include "halfgrad/nn/text_classifier.h"
#include "halfgrad/optim/adam.h"
#include "halfgrad/optim/grad_scaler.h"
#include "halfgrad/optim/lr_scheduler.h"
#include "tests/sweep_stride.h"
#include "tests/temp_dir.h"
#include "halfgrad/io/checkpoint.h"
#include "halfgrad/io/digest.h"
#include "halfgrad/io/safetensors.h"

namespace hg::io {
namespace {

namespace fs = std::filesystem;
using testing::error_of;
using testing::read_bytes;
using testing::TempDir;
using testing::write_bytes;

uint64_t splitmix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// A tensor of pseudo-random bits (NaNs and subnormals included) that depend only on `seed`.
Tensor patterned(const Shape& shape, DType dtype, uint64_t seed) {
  Tensor t = Tensor::empty(shape, dtype);
  std::byte* p = t.bytes();
  const size_t n = t.nbytes();
  for (size_t i = 0; i < n; i += 8) {
    const uint64_t word = splitmix64(seed * 0x100000000ull + i);
    std::memcpy(p + i, &word, std::min<size_t>(8, n - i));
  }
  return t;
}

// Everything a checkpoint holds, derived from (step, version) alone, so whoever loads it can
// check every byte. model_rows x 1024 f32 + model_rows/2 x 1024 f16: 5 KiB per row.
Checkpoint synthetic_checkpoint(int64_t step, int version, int64_t model_rows = 4) {
  const uint64_t seed = uint64_t(step) * 1024 + uint64_t(version);
  Checkpoint c;
  c.model["encoder.weight"] = patterned({model_rows, 1024}, DType::f32, seed * 8 + 0);
  c.model["embed.weight"] = patterned({model_rows / 2, 1024}, DType::f16, seed * 8 + 1);
  c.model["head.bias"] = patterned({7}, DType::bf16, seed * 8 + 2);
  c.model["scale"] = patterned({}, DType::f32, seed * 8 + 3);
  c.optimizer.tensors["state.0.exp_avg"] = patterned({1000}, DType::f32, seed * 8 + 4);
  c.optimizer.tensors["state.0.exp_avg_sq"] = patterned({1000}, DType::f32, seed * 8 + 5);
  c.optimizer.meta = {{"steps", step}, {"param_steps", {step}}, {"version", version}};
  c.config = {{"d_model", 1024}, {"label_names", {"de", "en", "fr"}}};
  c.scheduler = {{"step", step}, {"base_lrs", {0.001}}};
  c.scaler = {{"scale", 65536.0 / double(1 + step % 5)}, {"_growth_tracker", step % 2000}};
  c.rng = {{"seed", 7}, {"offset", step * 1000 + version}};
  c.trainer_state = {{"global_step", step}, {"version", version}};
  return c;
}

// The first difference between two state dicts ("" when equal): names, dtypes, shapes, bytes.
std::string difference(const nn::StateDict& a, const nn::StateDict& b, const std::string& what) {
  if (a.size() != b.size())
    return what + ": " + std::to_string(a.size()) + " vs " + std::to_string(b.size()) + " tensors";
  for (auto i = a.begin(), j = b.begin(); i != a.end(); ++i, ++j) {
    if (i->first != j->first) return what + ": '" + i->first + "' vs '" + j->first + "'";
    const Tensor &x = i->second, &y = j->second;
    if (x.dtype() != y.dtype() || !(x.shape() == y.shape())) return what + " '" + i->first + "': dtype or shape";
    if (std::memcmp(x.bytes(), y.bytes(), x.nbytes()) != 0) return what + " '" + i->first + "': bytes differ";
  }
  return "";
}

std::string difference(const Checkpoint& a, const Checkpoint& b) {
  std::string d = difference(a.model, b.model, "model");
  if (d.empty()) d = difference(a.optimizer.tensors, b.optimizer.tensors, "optimizer");
  const std::pair<const nlohmann::json*, const nlohmann::json*> jsons[] = {{&a.config, &b.config},
                                                                           {&a.optimizer.meta, &b.optimizer.meta},
                                                                           {&a.scheduler, &b.scheduler},
                                                                           {&a.scaler, &b.scaler},
                                                                           {&a.rng, &b.rng},
                                                                           {&a.trainer_state, &b.trainer_state}};
  for (const auto& [x, y] : jsons) {
    if (d.empty() && *x != *y) d = "json " + x->dump() + " vs " + y->dump();
  }
  return d;
}

std::vector<std::string> names_in(const fs::path& dir) {
  std::set<std::string> names;
  for (const auto& entry : fs::directory_iterator(dir)) names.insert(entry.path().filename().string());
  return {names.begin(), names.end()};
}

std::vector<std::string> filenames(const std::vector<fs::path>& paths) {
  std::vector<std::string> out;
  for (const fs::path& p : paths) out.push_back(p.filename().string());
  return out;
}

bool has_dot_entries(const fs::path& dir) {
  for (const std::string& name : names_in(dir)) {
    if (name[0] == '.') return true;
  }
  return false;
}

// The id of a process that has exited and been reaped.
pid_t dead_pid() {
  const pid_t pid = ::fork();
  if (pid == 0) ::_exit(0);
  REQUIRE(pid > 0);
  int status = 0;
  REQUIRE(::waitpid(pid, &status, 0) == pid);
  return pid;
}

}  // namespace

TEST_CASE("a checkpoint of a real model, optimizer, scheduler and scaler round-trips", "[checkpoint]") {
  TempDir dir("ckpt_real");
  const nn::ClassifierConfig config{
      .vocab = 16, .max_len = 8, .d_model = 8, .heads = 2, .d_ff = 16, .layers = 1, .classes = 3};
  nn::TextClassifier model(config, 42);
  model.to(DType::f16);  // f16 parameters: the file keeps them f16, bit for bit
  optim::AdamW optimizer({{model.parameters(), 1e-3f, 0.01f}});
  optim::LrScheduler scheduler(optimizer, optim::Schedule::kLinear, 2, 10);
  optim::GradScaler scaler;
  for (Tensor p : model.parameters()) p.set_grad(Tensor::full(p.shape(), 0.25f, p.dtype()));
  optimizer.step();
  scheduler.step();

  Checkpoint saved;
  saved.model = model.state_dict();
  saved.config = {{"d_model", config.d_model}, {"label_names", {"de", "en", "fr"}}};
  saved.optimizer = optimizer.state_dict();
  saved.scheduler = scheduler.state_dict();
  saved.scaler = scaler.state_dict();
  saved.rng = {{"seed", model.dropout_gen->seed()}, {"offset", model.dropout_gen->offset()}};
  saved.trainer_state = {{"global_step", 1}, {"best_model_checkpoint", nullptr}};
  const fs::path path = save_checkpoint(dir.path / "out", 1, saved);

  CHECK(path == dir.path / "out" / "checkpoint-1");
  CHECK(names_in(dir.path / "out") == std::vector<std::string>{"checkpoint-1"});
  CHECK(names_in(path) == std::vector<std::string>{"checkpoint.json", "config.json", "model.safetensors",
                                                   "optimizer.json", "optimizer.safetensors", "rng_state.json",
                                                   "scaler.json", "scheduler.json", "trainer_state.json"});
  CHECK(checkpoint_files().size() == 9);
  CHECK(checkpoint_files().back() == "checkpoint.json");
  // The manifest records every other file's size and SHA-256 (as coreutils' sha256sum prints it);
  // model.safetensors carries transformers' format tag.
  const nlohmann::json manifest = nlohmann::json::parse(read_bytes(path / "checkpoint.json"));
  CHECK(manifest["format"] == "halfgrad-checkpoint");
  CHECK(manifest["version"] == 2);
  CHECK(manifest["step"] == 1);
  CHECK(manifest["files"].size() == 8);
  for (const auto& [name, entry] : manifest["files"].items()) {
    CHECK(fs::file_size(path / name) == entry["size"].get<uint64_t>());
    CHECK(entry["sha256"] == sha256_file(path / name));
  }
  // FIPS 180-4's example "abc" (Appendix B.1 of the SHA-256 examples): the digest itself is right.
  CHECK(sha256_hex("abc", 3) == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  CHECK(load_safetensors((path / "model.safetensors").string()).metadata ==
        std::map<std::string, std::string>{{"format", "pt"}});
  CHECK(nlohmann::json::parse(read_bytes(path / "scheduler.json")) == saved.scheduler);

  const Checkpoint loaded = load_checkpoint(path);
  CHECK(difference(loaded, saved) == "");
  CHECK(loaded.model.at("head.weight").dtype() == DType::f16);
  // The loaded state restores fresh objects.
  nn::TextClassifier model2(config, 7);
  model2.to(DType::f16);
  model2.load_state_dict(loaded.model);
  CHECK(difference(model2.state_dict(), saved.model, "model") == "");
  optim::AdamW optimizer2({{model2.parameters(), 1e-3f, 0.01f}});
  optimizer2.load_state_dict(loaded.optimizer);
  CHECK(difference(optimizer2.state_dict().tensors, saved.optimizer.tensors, "optimizer") == "");
  CHECK(optimizer2.state_dict().meta == saved.optimizer.meta);
  optim::LrScheduler scheduler2(optimizer2, optim::Schedule::kConstant, 0, 1);
  scheduler2.load_state_dict(loaded.scheduler);
  CHECK(scheduler2.state_dict() == saved.scheduler);
  CHECK(optimizer2.param_groups()[0].lr == optimizer.param_groups()[0].lr);
}

TEST_CASE("re-saving a step replaces the checkpoint whole, by exchange or by renaming aside", "[checkpoint]") {
  TempDir dir("ckpt_resave");
  const bool rename_aside = GENERATE(false, true);
  INFO("rename aside: " << rename_aside);
  detail::force_rename_aside(rename_aside);
  save_checkpoint(dir.path, 3, synthetic_checkpoint(3, 0));
  save_checkpoint(dir.path, 3, synthetic_checkpoint(3, 1, 8));  // bigger model, other bytes
  detail::force_rename_aside(false);
  CHECK(names_in(dir.path) == std::vector<std::string>{"checkpoint-3"});
  CHECK(difference(load_checkpoint(dir.path / "checkpoint-3"), synthetic_checkpoint(3, 1, 8)) == "");
  CHECK(error_of([&] { save_checkpoint(dir.path, -1, synthetic_checkpoint(1, 0)); }) ==
        "save_checkpoint: step must be >= 0, got -1");
}

TEST_CASE("a save that fails leaves nothing behind and the old checkpoint intact", "[checkpoint]") {
  TempDir dir("ckpt_fail");
  save_checkpoint(dir.path, 3, synthetic_checkpoint(3, 0));
  Checkpoint bad = synthetic_checkpoint(3, 1);
  bad.optimizer.tensors["state.1.exp_avg"] = Tensor();
  CHECK_THAT(error_of([&] { save_checkpoint(dir.path, 3, bad); }),
             Catch::EndsWith("optimizer.safetensors: tensor 'state.1.exp_avg' is undefined"));
  Checkpoint bad_json = synthetic_checkpoint(3, 1);
  bad_json.trainer_state["note"] = "\xFF";
  CHECK_THAT(error_of([&] { save_checkpoint(dir.path, 3, bad_json); }),
             Catch::Contains("trainer_state.json: cannot write JSON: [json.exception.type_error.316]"));
  CHECK(names_in(dir.path) == std::vector<std::string>{"checkpoint-3"});
  CHECK(difference(load_checkpoint(dir.path / "checkpoint-3"), synthetic_checkpoint(3, 0)) == "");
}

TEST_CASE("list_checkpoints returns complete checkpoints by numeric step", "[checkpoint]") {
  TempDir dir("ckpt_list");
  CHECK(list_checkpoints(dir.path / "absent").empty());
  CHECK(latest_checkpoint(dir.path / "absent").empty());
  for (int64_t step : {10, 9, 100, 2}) save_checkpoint(dir.path, step, synthetic_checkpoint(step, 0));
  fs::create_directory(dir.path / "checkpoint-7");  // incomplete: no files
  fs::copy(dir.path / "checkpoint-9", dir.path / "checkpoint-8", fs::copy_options::recursive);
  fs::remove(dir.path / "checkpoint-8" / "checkpoint.json");  // everything but the manifest
  write_bytes(dir.path / "checkpoint-6", "a file, not a directory");
  fs::copy(dir.path / "checkpoint-9", dir.path / "checkpoint-x", fs::copy_options::recursive);
  fs::copy(dir.path / "checkpoint-9", dir.path / "old-checkpoint-5", fs::copy_options::recursive);
  CHECK(filenames(list_checkpoints(dir.path)) ==
        std::vector<std::string>{"checkpoint-2", "checkpoint-9", "checkpoint-10", "checkpoint-100"});
  CHECK(latest_checkpoint(dir.path) == dir.path / "checkpoint-100");

  CHECK(checkpoint_step("out/checkpoint-12") == 12);
  CHECK(checkpoint_step("checkpoint-0") == 0);
  CHECK_FALSE(checkpoint_step("checkpoint-"));
  CHECK_FALSE(checkpoint_step("checkpoint--1"));
  CHECK_FALSE(checkpoint_step("checkpoint-1a"));
  CHECK_FALSE(checkpoint_step("xcheckpoint-1"));
  CHECK_FALSE(checkpoint_step(".tmp-checkpoint-1-123"));
}

TEST_CASE("rotate_checkpoints keeps the newest N and the best one", "[checkpoint]") {
  TempDir dir("ckpt_rotate");
  for (int64_t step = 1; step <= 6; ++step) save_checkpoint(dir.path, step, synthetic_checkpoint(step, 0));
  fs::create_directory(dir.path / "checkpoint-0");                  // incomplete: never deleted by rotation
  const fs::path best = dir.path / "." / "checkpoint-2";            // spelled differently on purpose
  CHECK(filenames(rotate_checkpoints(dir.path, 0, best)).empty());  // <= 0: no limit
  CHECK(filenames(rotate_checkpoints(dir.path, 2, best)) ==
        std::vector<std::string>{"checkpoint-1", "checkpoint-3", "checkpoint-4"});
  CHECK(filenames(list_checkpoints(dir.path)) ==
        std::vector<std::string>{"checkpoint-2", "checkpoint-5", "checkpoint-6"});
  CHECK(names_in(dir.path) == std::vector<std::string>{"checkpoint-0", "checkpoint-2", "checkpoint-5", "checkpoint-6"});
  CHECK(rotate_checkpoints(dir.path, 2, best).empty());  // the best one does not count as a deletion
  CHECK(filenames(rotate_checkpoints(dir.path, 1)) == std::vector<std::string>{"checkpoint-2", "checkpoint-5"});
  CHECK(names_in(dir.path) == std::vector<std::string>{"checkpoint-0", "checkpoint-6"});
  CHECK(difference(load_checkpoint(dir.path / "checkpoint-6"), synthetic_checkpoint(6, 0)) == "");
}

TEST_CASE("load_checkpoint names a missing, truncated or malformed file", "[checkpoint]") {
  TempDir dir("ckpt_broken");
  const fs::path good = save_checkpoint(dir.path, 4, synthetic_checkpoint(4, 0));
  const fs::path broken = dir.path / "checkpoint-5";
  const auto fresh_copy = [&] {
    fs::remove_all(broken);
    fs::copy(good, broken, fs::copy_options::recursive);
  };
  for (const std::string& name : checkpoint_files()) {
    INFO(name);
    fresh_copy();
    fs::remove(broken / name);
    const std::string expected = broken.string() + ": missing " + name +
                                 (name == "checkpoint.json" ? " (written last: the save did not finish)" : "");
    CHECK(error_of([&] { load_checkpoint(broken); }) == expected);
    CHECK_FALSE(checkpoint_complete(broken));
    CHECK(filenames(list_checkpoints(dir.path)) == std::vector<std::string>{"checkpoint-4"});
  }

  // Truncated: the manifest's size gives it away before any parsing.
  fresh_copy();
  const uint64_t size = fs::file_size(broken / "model.safetensors");
  fs::resize_file(broken / "model.safetensors", size / 2);
  CHECK(error_of([&] { load_checkpoint(broken); }) ==
        broken.string() + ": model.safetensors is " + std::to_string(size / 2) + " bytes but checkpoint.json records " +
            std::to_string(size) + " (truncated or replaced)");
  // Truncated with a manifest that agrees (corruption after the fact): the reader catches it.
  nlohmann::json manifest = nlohmann::json::parse(read_bytes(broken / "checkpoint.json"));
  manifest["files"]["model.safetensors"] = {{"size", size / 2}, {"sha256", sha256_file(broken / "model.safetensors")}};
  write_bytes(broken / "checkpoint.json", manifest.dump());
  CHECK(checkpoint_complete(broken));
  CHECK_THAT(error_of([&] { load_checkpoint(broken); }),
             Catch::StartsWith((broken / "model.safetensors").string() + ": tensor 'encoder.weight': data_offsets") &&
                 Catch::Contains("run past the end of the data section"));

  // A file of the right size with other bytes: its SHA-256 gives it away, naming the file; it
  // is still listed (listing compares sizes only), and loading refuses it.
  fresh_copy();
  const uint64_t json_size = fs::file_size(broken / "scheduler.json");
  write_bytes(broken / "scheduler.json", std::string(json_size, '{'));
  CHECK(checkpoint_complete(broken));
  CHECK_THAT(error_of([&] { load_checkpoint(broken); }),
             Catch::StartsWith(broken.string() + ": scheduler.json has SHA-256 ") &&
                 Catch::EndsWith(" (corrupted or replaced)"));
  // With a manifest that agrees, the JSON reader names it.
  manifest = nlohmann::json::parse(read_bytes(broken / "checkpoint.json"));
  manifest["files"]["scheduler.json"]["sha256"] = sha256_file(broken / "scheduler.json");
  write_bytes(broken / "checkpoint.json", manifest.dump());
  CHECK_THAT(error_of([&] { load_checkpoint(broken); }),
             Catch::StartsWith((broken / "scheduler.json").string() + ": not valid JSON: "));
  // A version-1 manifest (sizes only, before checksums) still loads.
  fresh_copy();
  manifest = nlohmann::json::parse(read_bytes(broken / "checkpoint.json"));
  manifest["version"] = 1;
  for (nlohmann::json& entry : manifest["files"]) entry = nlohmann::json(entry["size"]);
  write_bytes(broken / "checkpoint.json", manifest.dump());
  CHECK(difference(load_checkpoint(broken), load_checkpoint(dir.path / "checkpoint-4")) == "");

  // Manifests that are not ours.
  fresh_copy();
  write_bytes(broken / "checkpoint.json", R"({"format": "halfgrad-checkpoint", "version": 3, "files": {}})");
  CHECK(error_of([&] { load_checkpoint(broken); }) ==
        (broken / "checkpoint.json").string() + ": version 3, this halfgrad reads versions 1 and 2");
  write_bytes(broken / "checkpoint.json", R"({"format": "halfgrad-checkpoint", "version": 1, "files": []})");
  CHECK(error_of([&] { load_checkpoint(broken); }) ==
        (broken / "checkpoint.json").string() + ": does not record the size of model.safetensors");
  write_bytes(broken / "checkpoint.json", "[]");
  CHECK(error_of([&] { load_checkpoint(broken); }) ==
        (broken / "checkpoint.json").string() + ": not a halfgrad-checkpoint manifest");
  CHECK(error_of([&] { load_checkpoint(dir.path / "nowhere"); }) ==
        (dir.path / "nowhere").string() + ": not a checkpoint directory (does not exist or is not a directory)");
}

TEST_CASE("leftovers of crashed saves are ignored, then cleaned by the next save", "[checkpoint]") {
  TempDir dir("ckpt_crash");
  const fs::path out = dir.path;
  const std::string dead = std::to_string(dead_pid());
  for (int64_t step : {4, 5, 6}) save_checkpoint(out, step, synthetic_checkpoint(step, 0));
  // Crash while writing step 7: some files, no manifest.
  fs::create_directory(out / (".tmp-checkpoint-7-" + dead));
  write_bytes(out / (".tmp-checkpoint-7-" + dead) / "model.safetensors", "partial");
  write_bytes(out / (".tmp-checkpoint-7-" + dead) / ".config.json.tmp-1-0", "{");
  // Crash after writing step 8 completely, before the rename: not promoted, removed.
  fs::copy(out / "checkpoint-6", out / (".tmp-checkpoint-8-" + dead), fs::copy_options::recursive);
  // Crash between the two renames of a re-save without RENAME_EXCHANGE: the old checkpoint-4
  // sits aside, complete, and comes back.
  fs::rename(out / "checkpoint-4", out / (".old-checkpoint-4-" + dead));
  // Crash in the middle of rotating checkpoint-2 away.
  fs::create_directory(out / (".del-checkpoint-2-" + dead));
  write_bytes(out / (".del-checkpoint-2-" + dead) / "config.json", "{}");
  // A save in progress in another, running process: left alone.
  const pid_t live = ::fork();
  if (live == 0) {
    ::pause();
    ::_exit(0);
  }
  REQUIRE(live > 0);
  const std::string running = ".tmp-checkpoint-9-" + std::to_string(live);
  fs::create_directory(out / running);
  // Not ours: odd names are never touched.
  fs::create_directory(out / ".tmp-checkpoint-x-1");

  CHECK(filenames(list_checkpoints(out)) == std::vector<std::string>{"checkpoint-5", "checkpoint-6"});
  save_checkpoint(out, 7, synthetic_checkpoint(7, 0));
  CHECK(names_in(out) == std::vector<std::string>{running, ".tmp-checkpoint-x-1", "checkpoint-4", "checkpoint-5",
                                                  "checkpoint-6", "checkpoint-7"});
  CHECK(filenames(list_checkpoints(out)) ==
        std::vector<std::string>{"checkpoint-4", "checkpoint-5", "checkpoint-6", "checkpoint-7"});
  CHECK(difference(load_checkpoint(out / "checkpoint-4"), synthetic_checkpoint(4, 0)) == "");
  CHECK(difference(load_checkpoint(out / "checkpoint-7"), synthetic_checkpoint(7, 0)) == "");
  CHECK(cleanup_checkpoints(out) == 0);

  ::kill(live, SIGKILL);
  ::waitpid(live, nullptr, 0);
  CHECK(cleanup_checkpoints(out) == 1);
  CHECK(names_in(out) == std::vector<std::string>{".tmp-checkpoint-x-1", "checkpoint-4", "checkpoint-5", "checkpoint-6",
                                                  "checkpoint-7"});
}

// The real thing: a child process saves 20 MB checkpoints in a loop (first the newest step of
// the previous round again, so that replacing a checkpoint is exercised; keeping the newest 2 by
// rotation) and is SIGKILLed after a random delay,
// 20 times. After each kill the newest complete checkpoint must load and hold exactly what was
// saved for its (step, version), every complete one must, and the newest step never goes back.
TEST_CASE("SIGKILL at random moments while saving never leaves a broken checkpoint", "[checkpoint][kill]") {
  TempDir dir("ckpt_kill");
  constexpr int kRounds = 20;
  // 16 MiB f32 + 4 MiB f16 in model.safetensors; an eighth of that in the sanitized tree
  // (tests/sweep_stride.h), where hashing and copying 20 MB 40 times took 20 s: the kills still
  // land in every phase, since their delays scale with the measured save time.
  constexpr int64_t kRows = 4096 / int64_t(hg::testing::kSweepStride);
  // Kill delays scale with this machine's save time (about 50 ms here), so that kills land in
  // every phase and rounds still make progress on a slower disk: uniform in [0, 2.5 saves].
  save_checkpoint(dir.path / "calibration", 1, synthetic_checkpoint(1, 0, kRows));  // the first one is cold
  const auto calibration_start = std::chrono::steady_clock::now();
  save_checkpoint(dir.path / "calibration", 1, synthetic_checkpoint(1, 1, kRows));
  const auto save_us =
      std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - calibration_start)
          .count();
  fs::remove_all(dir.path / "calibration");
  std::mt19937 random(20240611);
  std::uniform_int_distribution<int64_t> delay_us(0, std::max<int64_t>(20'000, save_us * 5 / 2));
  int64_t newest = 0;
  int kills_mid_save = 0, rounds_advanced = 0, checkpoints_checked = 0;
  const auto start = std::chrono::steady_clock::now();
  for (int round = 0; round < kRounds; ++round) {
    // Each child first re-saves the newest complete step (a kill during that replacement must
    // leave the old or the new version, never neither), then saves new steps. Content depends
    // on (step, version = round).
    const int64_t first = std::max<int64_t>(newest, 1);
    int ready[2];
    REQUIRE(::pipe(ready) == 0);
    const pid_t child = ::fork();
    REQUIRE(child >= 0);
    if (child == 0) {
      // The child: no Catch2 here, and _exit so nothing of the parent's runs at exit.
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);
      ::close(ready[0]);
      try {
        for (int64_t step = first; step < first + 1000; ++step) {
          const Checkpoint c = synthetic_checkpoint(step, round, kRows);
          if (step == first && ::write(ready[1], "r", 1) != 1) ::_exit(3);
          save_checkpoint(dir.path, step, c);
          rotate_checkpoints(dir.path, 2);
        }
      } catch (...) {
        ::_exit(2);
      }
      ::_exit(0);
    }
    ::close(ready[1]);
    char byte = 0;
    REQUIRE(::read(ready[0], &byte, 1) == 1);  // the child starts its first save now
    ::close(ready[0]);
    std::this_thread::sleep_for(std::chrono::microseconds(delay_us(random)));
    ::kill(child, SIGKILL);
    int status = 0;
    REQUIRE(::waitpid(child, &status, 0) == child);
    INFO("round " << round);
    REQUIRE((WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL));  // not an error exit of its own

    if (has_dot_entries(dir.path)) ++kills_mid_save;
    const std::vector<fs::path> complete = list_checkpoints(dir.path);
    CHECK(complete.size() <= 3);  // 2 kept + at most one finished before its rotation
    if (complete.empty()) {
      CHECK(newest == 0);
      continue;
    }
    for (const fs::path& path : complete) {
      INFO(path.string());
      const Checkpoint loaded = load_checkpoint(path);
      const int64_t step = *checkpoint_step(path);
      const int version = loaded.trainer_state.at("version");
      CHECK(version <= round);
      CHECK(loaded.trainer_state.at("global_step") == step);
      CHECK(difference(loaded, synthetic_checkpoint(step, version, kRows)) == "");
      ++checkpoints_checked;
    }
    const int64_t step = *checkpoint_step(complete.back());
    CHECK(step >= newest);
    if (step > newest) ++rounds_advanced;
    newest = step;
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  INFO("newest step " << newest << ", kills mid-save " << kills_mid_save << ", rounds that advanced " << rounds_advanced
                      << ", checkpoints checked " << checkpoints_checked << ", " << seconds << " s");
  CHECK(kills_mid_save >= 1);  // the kills did land inside saves
  CHECK(rounds_advanced >= 1);
  // The next save removes whatever the last kill left.
  save_checkpoint(dir.path, newest + 1, synthetic_checkpoint(newest + 1, 0));
  CHECK_FALSE(has_dot_entries(dir.path));
  WARN("kill test: one save " << save_us / 1000 << " ms, newest step " << newest << ", " << kills_mid_save << "/"
                              << kRounds << " kills mid-save, " << checkpoints_checked << " checkpoints verified, "
                              << seconds << " s");
}

}  // namespace hg::io
