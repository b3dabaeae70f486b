// Bad input everywhere (issue 7): every case runs the `halfgrad` command (or the library where
// that is more direct) and checks the message and the exit code -- 1 for errors halfgrad reports,
// CLI11's 105 (ValidationError) for flags outside their range -- and that a failed run leaves no
// files in its output_dir. There is no numeric-input task (inputs are text); the closest, NaN and
// inf in numeric flags and in a checkpoint's weights, is covered instead.
#include <catch2/catch.hpp>

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "halfgrad/data/dataset.h"
#include "halfgrad/nn/text_classifier.h"
#include "tests/demos/run_program.h"
#include "tests/temp_dir.h"
#include "halfgrad/io/checkpoint.h"
#include "halfgrad/io/digest.h"
#include "halfgrad/io/output_lock.h"
#include "halfgrad/io/safetensors.h"

namespace hg::train {
namespace {

namespace fs = std::filesystem;
using testing::read_bytes;
using testing::TempDir;
using testing::write_bytes;

constexpr int kError = 1;            // halfgrad: error: ...
constexpr int kCliValidation = 105;  // CLI::ExitCodes::ValidationError
const std::string kTiny =
    " --tokenizer bytes --d-model 8 --heads 2 --layers 1 --d-ff 16 --max-len 8 --batch-size 4 --threads 1";

const char* kGoodTsv = "en\tthe cat\nde\tdie Katze\nen\ta dog\nde\tein Hund\nen\thouse\nde\tHaus\n";

struct Expect {
  std::string args;  // after "halfgrad "
  int exit_code;
  std::string message;  // a part of the output
};

// Runs each case; a training case gets its own output_dir, which must not exist afterwards.
void run_cases(const TempDir& dir, const std::vector<Expect>& cases) {
  for (size_t i = 0; i < cases.size(); ++i) {
    const Expect& c = cases[i];
    const fs::path out = dir.path / ("out" + std::to_string(i));
    const bool train = c.args.rfind("train", 0) == 0;
    const hg::testing::ProgramResult r =
        hg::testing::run_program("halfgrad", c.args + (train ? " --output-dir " + out.string() : ""));
    INFO("halfgrad " << c.args << "\n" << r.output);
    CHECK(r.exit_code == c.exit_code);
    CHECK_THAT(r.output, Catch::Contains(c.message));
    CHECK(std::count(r.output.begin(), r.output.end(), '\n') <= 4);  // a message, not a dump
    CHECK_FALSE(fs::exists(out));
  }
}

TEST_CASE("bad data files: missing, unreadable, empty, no tab, empty label, invalid UTF-8, unseen label",
          "[train][cli][bad_input]") {
  const TempDir dir("bad_data");
  write_bytes(dir.path / "good.tsv", kGoodTsv);
  write_bytes(dir.path / "empty.tsv", "\n  \n\r\n");
  write_bytes(dir.path / "no_tab.tsv", "en\tfine\nno tab here\n");
  write_bytes(dir.path / "empty_label.tsv", "en\tfine\n\tno label\n");
  write_bytes(dir.path / "utf8.tsv", "en\tfine\nde\tgr\xc3\xb6\xc3\x9f\nen\tover\xc0\xaflong\n");
  write_bytes(dir.path / "unseen.tsv", "en\tthe\nfr\tle chat\n");
  fs::create_directory(dir.path / "a_directory.tsv");
  const std::string train = "train" + kTiny + " --train " + dir / "good.tsv";
  run_cases(
      dir, {
               {"train --train " + dir / "missing.tsv", kCliValidation, "File does not exist: " + dir / "missing.tsv"},
               {"train --train " + dir / "empty.tsv", kError, "empty.tsv: the data set is empty"},
               {"train --train " + dir / "no_tab.tsv", kError, "no_tab.tsv:2: expected 'label<TAB>text', found no tab"},
               {"train --train " + dir / "empty_label.tsv", kError, "empty_label.tsv:2: empty label"},
               {"train --train " + dir / "utf8.tsv", kError, "utf8.tsv:3: invalid UTF-8 at byte 8"},
               {train + " --eval " + dir / "unseen.tsv", kError, "unseen.tsv:2: label 'fr' was not seen in training"},
               {"eval --checkpoint " + dir.path.string() + " --data " + dir / "missing.tsv", kCliValidation,
                "File does not exist"},
           });
  // Unreadable: the tests may run as root, which reads any file, so a directory stands in for a
  // file that cannot be read (the command line refuses it before read_tsv sees it).
  CHECK_THAT(testing::error_of([&] { data::read_tsv(dir / "a_directory.tsv"); }),
             Catch::Contains("a_directory.tsv: read error") || Catch::Contains("a_directory.tsv: cannot open"));
  CHECK_THAT(testing::error_of([&] { data::read_tsv(dir / "missing.tsv"); }),
             Catch::Contains("missing.tsv: cannot open the data file"));
}

TEST_CASE("model and training flags out of range, NaN and inf included", "[train][cli][bad_input]") {
  const TempDir dir("bad_flags");
  write_bytes(dir.path / "good.tsv", kGoodTsv);
  const std::string train = "train" + kTiny + " --train " + dir / "good.tsv";
  const std::string untuned = "train --threads 1 --train " + dir / "good.tsv";  // the model flags at defaults
  run_cases(dir,
            {
                {untuned + " --max-len 0", kCliValidation, "--max-len"},
                {untuned + " --max-len 100000", kCliValidation, "--max-len"},
                {untuned + " --batch-size 0", kCliValidation, "--batch-size"},
                {untuned + " --d-model 10 --heads 3", kError, "heads (3) must divide d_model (10)"},
                {train + " --lr 0", kError, "learning_rate (--lr) must be in (0, 10), got 0"},
                {train + " --lr 50", kError, "learning_rate (--lr) must be in (0, 10), got 50"},
                {train + " --lr nan", kError, "learning_rate (--lr) must be in (0, 10), got nan"},
                {train + " --lr inf", kError, "learning_rate (--lr) must be in (0, 10), got inf"},
                {train + " --loss-scale inf", kError, "invalid loss scale 'inf'"},
                {train + " --loss-scale nan", kError, "invalid loss scale 'nan'"},
                {train + " --loss-scale 1e30", kError, "init_scale <= max_scale"},
                {train + " --dropout nan", kError, "dropout must be in [0, 1), got nan"},
                {train + " --weight-decay inf", kError, "weight_decay (--weight-decay) must be in [0, 1), got inf"},
                {train + " --warmup-ratio nan", kError, "warmup_ratio (--warmup-ratio) must be in [0, 1), got nan"},
                {train + " --max-grad-norm nan", kError, "max_grad_norm (--max-grad-norm) must be finite and >= 0"},
                {train + " --epochs nan", kError, "num_train_epochs (--epochs) must be > 0"},
                // Known once the data is: 6 texts in batches of 4 make 2 steps an epoch.
                {train + " --epochs 1 --save-steps 3", kError,
                 "--save-steps 3 is more than the run's 2 optimizer steps: no checkpoint would be saved"},
                {train + " --eval " + dir / "good.tsv" + " --max-steps 2 --eval-steps 5", kError,
                 "--eval-steps 5 is more than the run's 2 optimizer steps: nothing would be evaluated"},
            });
}

// Every case also names a data file whose line 2 has no tab: an error about the flag, not about
// that line, shows that the flags were checked before any data was read.
TEST_CASE("flags without effect under the chosen strategy and bad flag values fail before the data is read",
          "[train][cli][bad_input]") {
  const TempDir dir("flags_first");
  write_bytes(dir.path / "bad.tsv", "en\tfine\nno tab here\n");
  const std::string train = "train" + kTiny + " --train " + dir / "bad.tsv";
  const std::string with_eval = train + " --eval " + dir / "bad.tsv";
  run_cases(
      dir,
      {
          {train, kError, "bad.tsv:2: expected 'label<TAB>text'"},  // the data file is read last
          {train + " --save-steps 3 --save-strategy epoch", kError,
           "--save-steps has no effect with --save-strategy epoch: drop --save-strategy"},
          {train + " --save-steps 3 --save-strategy no", kError, "--save-steps has no effect with --save-strategy no"},
          {with_eval + " --eval-steps 2 --eval-strategy epoch", kError,
           "--eval-steps has no effect with --eval-strategy epoch: drop --eval-strategy"},
          {train + " --eval-steps 2", kError, "--eval-steps needs evaluation data: add --eval FILE"},
          {train + " --eval-strategy steps", kError, "--eval-strategy steps needs evaluation data: add --eval FILE"},
          {train + " --load-best", kError, "--load-best needs evaluation data"},
          {train + " --early-stopping 2", kError, "--early-stopping needs evaluation data"},
          {train + " --save-total-limit 0", kError,
           "save_total_limit (--save-total-limit) 0 would keep no checkpoints: give N >= 1"},
          {train + " --save-total-limit 2 --save-strategy no", kError,
           "--save-total-limit has no effect with --save-strategy no"},
          {train + " --lr -1", kError, "learning_rate (--lr) must be in (0, 10), got -1"},
          {train + " --weight-decay -0.1", kError, "weight_decay (--weight-decay) must be in [0, 1), got -0.1"},
          {train + " --warmup-ratio 1", kError, "warmup_ratio (--warmup-ratio) must be in [0, 1), got 1"},
          {train + " --embedding-lr 0", kError, "embedding_learning_rate (--embedding-lr) must be in (0, 10), got 0"},
          {train + " --embedding-lr nan", kError,
           "embedding_learning_rate (--embedding-lr) must be in (0, 10), got nan"},
          {train + " --label-smoothing 1", kError,
           "label_smoothing_factor (--label-smoothing) must be in [0, 1), got 1"},
          {train + " --label-smoothing -0.1", kError,
           "label_smoothing_factor (--label-smoothing) must be in [0, 1), got -0.1"},
          {"train --threads 1 --train " + dir / "bad.tsv" + " --bag-skip", kError, "--bag-skip needs --layers >= 1"},
          {"train --threads 1 --train " + dir / "bad.tsv" + " --layers 1 --encoder-drop-path 0.5", kError,
           "--encoder-drop-path needs --bag-skip"},
          {train + " --warmup-ratio 0.1 --warmup-steps 5", kError, "--warmup-ratio and --warmup-steps both given"},
          {train + " --epochs 2 --max-steps 3", kError, "--epochs and --max-steps both given"},
          {train + " --max-grad-norm -1", kError, "max_grad_norm (--max-grad-norm) must be finite and >= 0"},
          {train + " --scheduler cosine_restarts", kError,
           "lr_scheduler_type (--scheduler): unknown value 'cosine_restarts' (expected constant, linear or cosine)"},
          {train + " --eval-strategy sometimes", kError,
           "eval_strategy (--eval-strategy): unknown value 'sometimes' (expected no, steps or epoch)"},
          {train + " --save-strategy always", kError,
           "save_strategy (--save-strategy): unknown value 'always' (expected no, steps or epoch)"},
          {train + " --loss-scale lots", kError, "loss_scale (--loss-scale): invalid loss scale 'lots'"},
          {train + " --precision fp32 --loss-scale 128", kError, "--loss-scale applies to --precision fp16 only"},
          {train + " --bf16 --opt-level O1", kError, "--opt-level applies to --precision fp16 only"},
          {train + " --fp16 --bf16", kError, "--fp16 and --bf16 are exclusive"},
          {with_eval + " --load-best --metric precision", kError,
           "metric_for_best_model (--metric) 'precision' is not a metric evaluation reports (loss, accuracy, f1)"},
          {with_eval + " --metric accuracy", kError, "--metric has no effect without --load-best or --early-stopping"},
          {with_eval + " --load-best --eval-steps 2", kError,
           "load_best_model_at_end (--load-best) needs eval_strategy and save_strategy equal"},
          {with_eval + " --load-best --eval-steps 2 --save-steps 3", kError,
           "load_best_model_at_end (--load-best) needs save_steps (--save-steps) 3 to be a multiple of eval_steps "
           "(--eval-steps) 2"},
          {train + " --train-per-language 20", kError, "--train-per-language and --test-per-language size the default"},
          {"train" + kTiny + " --eval " + dir / "bad.tsv", kError, "--eval needs --train"},
          {"train --threads 1 --train " + dir / "bad.tsv" + " --d-model 10 --heads 3", kError,
           "heads (3) must divide d_model (10)"},
          {train + " --dropout nan", kError, "dropout must be in [0, 1), got nan"},
          {train + " --resume " + dir.path.string(), kError,
           "--resume " + dir.path.string() + ": neither a checkpoint"},
          {train + " --eval-steps 0", kCliValidation, "--eval-steps"},
          {train + " --save-steps 0", kCliValidation, "--save-steps"},
      });
  const hg::testing::ProgramResult r = hg::testing::run_program("halfgrad", train + " --output-dir " + dir / "bad.tsv");
  INFO(r.output);
  CHECK(r.exit_code == kError);
  CHECK_THAT(r.output, Catch::Contains("--output-dir " + dir / "bad.tsv" + " exists and is not a directory"));
}

TEST_CASE("a text longer than max_len is truncated, counted and reported once", "[train][cli][bad_input]") {
  const TempDir dir("truncate");
  // 5 of the 6 texts have more than 4 bytes: all but "Haus" (mean pooling: no CLS token takes a place).
  write_bytes(dir.path / "good.tsv", kGoodTsv);
  const hg::testing::ProgramResult r = hg::testing::run_program(
      "halfgrad",
      "train --tokenizer bytes --d-model 8 --heads 2 --layers 1 --d-ff 16 --batch-size 4 --threads 1 --max-len 4"
      " --pooling mean --max-steps 2 --save-strategy no --train " +
          dir / "good.tsv" + " --output-dir " + dir / "out");
  INFO(r.output);
  CHECK(r.exit_code == 0);
  const std::string note = "note: 5 training texts are longer than max_len 4 tokens and were truncated";
  CHECK_THAT(r.output, Catch::Contains(note));
  CHECK(r.output.find(note) == r.output.rfind(note));
}

// A small checkpoint of a tiny fp16 O2 run, trained once per test process.
const fs::path& trained_checkpoint() {
  static const TempDir dir("bad_ckpt_source");
  static const fs::path checkpoint = [] {
    write_bytes(dir.path / "good.tsv", kGoodTsv);
    const hg::testing::ProgramResult r = hg::testing::run_program(
        "halfgrad", "train" + kTiny + " --max-steps 2 --save-strategy steps --save-steps 2 --train " +
                        dir / "good.tsv" + " --output-dir " + dir / "out");
    INFO(r.output);
    REQUIRE(r.exit_code == 0);
    return fs::path(dir / "out/checkpoint-2");
  }();
  return checkpoint;
}

// A copy of the trained checkpoint to damage; fix_manifest() re-records a file's size and
// SHA-256, so only the damage itself (not the manifest's checks) can catch it.
struct DamagedCheckpoint {
  TempDir dir;
  fs::path path;
  explicit DamagedCheckpoint(const std::string& name) : dir("bad_ckpt_" + name), path(dir.path / "checkpoint-2") {
    fs::copy(trained_checkpoint(), path);
    write_bytes(dir.path / "data.tsv", kGoodTsv);
  }
  void fix_manifest(const std::string& file) const {
    nlohmann::json manifest = nlohmann::json::parse(read_bytes(path / io::kManifestFile));
    manifest["files"][file] = {{"size", fs::file_size(path / file)}, {"sha256", io::sha256_file(path / file)}};
    write_bytes(path / io::kManifestFile, manifest.dump());
  }
  void edit_json(const std::string& file, const std::function<void(nlohmann::json&)>& edit) const {
    nlohmann::json j = nlohmann::json::parse(read_bytes(path / file));
    edit(j);
    write_bytes(path / file, j.dump(2));
    fix_manifest(file);
  }
  std::string eval_args() const { return "eval --checkpoint " + path.string() + " --data " + dir / "data.tsv"; }
  std::string resume_args() const {
    return "train" + kTiny + " --max-steps 4 --train " + dir / "data.tsv" + " --resume " + path.string();
  }
};

TEST_CASE("damaged checkpoints: missing file, truncated, lying header, wrong shape or dtype, other model",
          "[train][cli][bad_input]") {
  SECTION("a missing file") {
    const DamagedCheckpoint c("missing");
    fs::remove(c.path / "scaler.json");
    run_cases(c.dir, {{c.eval_args(), kError, "checkpoint-2: missing scaler.json"},
                      {c.resume_args(), kError, "checkpoint-2: missing scaler.json"}});
  }
  SECTION("a truncated file") {
    const DamagedCheckpoint c("truncated");
    const std::string bytes = read_bytes(c.path / "model.safetensors");
    write_bytes(c.path / "model.safetensors", bytes.substr(0, bytes.size() / 2));
    run_cases(c.dir, {{c.eval_args(), kError, "model.safetensors is " + std::to_string(bytes.size() / 2) + " bytes"}});
    c.fix_manifest("model.safetensors");  // truncated with a manifest that agrees: the reader catches it
    run_cases(c.dir, {{c.eval_args(), kError, "model.safetensors"}, {c.resume_args(), kError, "model.safetensors"}});
  }
  SECTION("a header that lies about offsets") {
    const DamagedCheckpoint c("lying_header");
    std::string bytes = read_bytes(c.path / "model.safetensors");
    const size_t at = bytes.find("\"data_offsets\":[0,");
    REQUIRE(at != std::string::npos);
    bytes[at + 16] = '8';  // the first tensor now starts 8 bytes late: overlap and wrong size
    write_bytes(c.path / "model.safetensors", bytes);
    run_cases(c.dir, {{c.eval_args(), kError, "model.safetensors"}, {c.resume_args(), kError, "model.safetensors"}});
  }
  SECTION("a config whose shapes do not match the weights") {
    const DamagedCheckpoint c("shape");
    c.edit_json("config.json", [](nlohmann::json& j) { j["intermediate_size"] = 32; });
    run_cases(c.dir,
              {{c.eval_args(), kError,
                "tensor 'encoder.layers.0.ff.fc1.weight' has shape (16, 8) but config.json's num_hidden_layers, "
                "intermediate_size, hidden_size say (32, 8)"},
               {c.resume_args(), kError,
                "the checkpoint does not match this run: intermediate_size: checkpoint 32, this run 16 (--d-ff)"}});
  }
  SECTION("a config of a different model") {
    const DamagedCheckpoint c("other_model");
    c.edit_json("config.json", [](nlohmann::json& j) { j["model_type"] = "bert"; });
    run_cases(c.dir, {{c.eval_args(), kError, "a config of a different model"},
                      {c.resume_args(), kError, "a config of a different model"}});
  }
  SECTION("a mistyped trainer_state.json") {
    const DamagedCheckpoint c("trainer_state");
    c.edit_json("trainer_state.json", [](nlohmann::json& j) { j["global_step"] = "two"; });
    run_cases(c.dir, {{c.resume_args(), kError,
                       "trainer_state.json: key 'global_step' has the wrong type (\"two\", expected an integer)"}});
  }
  SECTION("mistyped or unknown training_args in trainer_state.json") {
    const DamagedCheckpoint c("training_args");
    c.edit_json("trainer_state.json", [](nlohmann::json& j) { j["training_args"]["fp16"] = "yes"; });
    run_cases(c.dir, {{c.resume_args(), kError, "trainer_state.json: training_args: key 'fp16' has the wrong type"}});
    c.edit_json("trainer_state.json", [](nlohmann::json& j) {
      j["training_args"]["fp16"] = false;
      j["training_args"]["fp17"] = true;
    });
    run_cases(c.dir, {{c.resume_args(), kError, "trainer_state.json: training_args: unknown key 'fp17'"}});
  }
  SECTION("weights of another dtype: F16 is widened exactly (as torch's load_state_dict), I64 is refused") {
    const DamagedCheckpoint c("dtype");
    nn::StateDict model = io::load_safetensors(c.path / "model.safetensors").tensors;
    for (auto& [name, tensor] : model) tensor = tensor.to(DType::f16);
    io::save_safetensors(c.path / "model.safetensors", model, {{"format", "pt"}});
    c.fix_manifest("model.safetensors");
    const hg::testing::ProgramResult r = hg::testing::run_program("halfgrad", c.eval_args());
    INFO(r.output);
    CHECK(r.exit_code == 0);
    std::string bytes = read_bytes(c.path / "model.safetensors");
    const size_t at = bytes.find("\"F16\"");
    REQUIRE(at != std::string::npos);
    bytes.replace(at, 5, "\"I64\"");
    write_bytes(c.path / "model.safetensors", bytes);
    c.fix_manifest("model.safetensors");
    run_cases(c.dir, {{c.eval_args(), kError, "I64"}});
  }
  SECTION("NaN weights are refused instead of predicting NaN") {
    const DamagedCheckpoint c("nan");
    nn::StateDict model = io::load_safetensors(c.path / "model.safetensors").tensors;
    const Tensor& head = model.at("head.bias");
    std::vector<float> values = head.to_vector();
    values[0] = NAN;
    model["head.bias"] = Tensor::from_vector(values, head.shape(), head.dtype());
    io::save_safetensors(c.path / "model.safetensors", model, {{"format", "pt"}});
    c.fix_manifest("model.safetensors");
    run_cases(c.dir, {{c.eval_args(), kError, "model.safetensors: tensor 'head.bias' holds inf or NaN"},
                      {"predict --checkpoint " + c.path.string() + " hello", kError, "holds inf or NaN"}});
  }
}

TEST_CASE("resuming from a checkpoint of another run is refused and leaves output_dir alone",
          "[train][cli][bad_input]") {
  const DamagedCheckpoint c("other_run");
  write_bytes(c.dir.path / "labels.tsv", "en\tthe cat\nfr\tle chat\n");
  const std::string resume = " --resume " + c.path.string();
  const std::string model = " --tokenizer bytes --d-ff 16 --max-len 8 --batch-size 4 --threads 1 --max-steps 4";
  run_cases(c.dir,
            {
                {"train --d-model 16 --heads 2 --layers 1" + model + " --train " + c.dir / "data.tsv" + resume, kError,
                 "the checkpoint does not match this run: hidden_size: checkpoint 8, this run 16 (--d-model)"},
                {"train --d-model 8 --heads 2 --layers 1" + model + " --train " + c.dir / "labels.tsv" + resume, kError,
                 "the checkpoint does not match this run: id2label.1: checkpoint \"de\", this run \"fr\" (the training "
                 "data's labels)"},
                {"train --d-model 8 --heads 2 --layers 1" + model + " --precision fp32 --train " + c.dir / "data.tsv" +
                     resume,
                 kError, "the checkpoint was saved with another precision: fp16: checkpoint true, this run false"},
                {"train --d-model 8 --heads 2 --layers 1" + model + " --train " + c.dir / "data.tsv" + " --resume " +
                     c.dir / "data.tsv",
                 kCliValidation, "Directory is actually a file"},
            });
}

// Issue 31, "nothing silent": each case below was a hang, a silent wrong answer or a crash before.

// Replaces element 0 of `tensor` in the checkpoint's model.safetensors with `value`, re-sealed.
void set_weight(const DamagedCheckpoint& c, const std::string& tensor, float value) {
  nn::StateDict model = io::load_safetensors(c.path / "model.safetensors").tensors;
  const Tensor& t = model.at(tensor);
  std::vector<float> values = t.to_vector();
  values[0] = value;
  model[tensor] = Tensor::from_vector(values, t.shape(), t.dtype());
  io::save_safetensors(c.path / "model.safetensors", model, {{"format", "pt"}});
  c.fix_manifest("model.safetensors");
}

TEST_CASE("endless input (/dev/zero, a long line) fails at the line limit, naming the file and line",
          "[train][cli][bad_input]") {
  const DamagedCheckpoint c("endless");  // a good checkpoint, for eval and predict
  write_bytes(c.dir.path / "long.tsv", "en\tfine\nde\t" + std::string(size_t(1) << 21, 'x') + "\n");
  const std::string limit = "line longer than the 1048576-byte limit";
  run_cases(c.dir, {
                       {"train" + kTiny + " --train /dev/zero", kError, "/dev/zero:1: " + limit},
                       {"train" + kTiny + " --train " + c.dir / "long.tsv", kError, "long.tsv:2: " + limit},
                       {"eval --checkpoint " + c.path.string() + " --data /dev/zero", kError, "/dev/zero:1: " + limit},
                       {"predict --checkpoint " + c.path.string() + " < /dev/zero", kError, "stdin:1: " + limit},
                   });
}

TEST_CASE("a second run into a live run's output dir fails at once naming its PID", "[train][cli][bad_input]") {
  const TempDir dir("two_runs");
  write_bytes(dir.path / "good.tsv", kGoodTsv);
  const std::string train =
      "train" + kTiny + " --max-steps 2 --save-steps 2 --train " + dir / "good.tsv" + " --output-dir " + dir / "out";
  {
    const io::OutputDirLock live(dir.path / "out");  // this test process is the live run
    for (const std::string& extra : {std::string(), std::string(" --overwrite-output-dir")}) {
      const hg::testing::ProgramResult r = hg::testing::run_program("halfgrad", train + extra);
      INFO(r.output);
      CHECK(r.exit_code == kError);
      CHECK_THAT(r.output, Catch::Contains("--output-dir " + dir / "out" + " is in use by another halfgrad run (PID " +
                                           std::to_string(::getpid()) + ","));
      CHECK_FALSE(fs::exists(dir.path / "out/log.jsonl"));
    }
  }
  hg::testing::ProgramResult r = hg::testing::run_program("halfgrad", train);  // the live run ended
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  CHECK_FALSE(fs::exists(dir.path / "out" / io::kLockFile));  // removed at the end of the run
  r = hg::testing::run_program("halfgrad", train);            // an earlier run's checkpoints: not silently replaced
  CHECK(r.exit_code == kError);
  CHECK_THAT(r.output, Catch::Contains("holds checkpoints of an earlier run (checkpoint-2): give --resume"));
  r = hg::testing::run_program("halfgrad", train + " --overwrite-output-dir");
  CHECK(r.exit_code == 0);
}

TEST_CASE("a loaded checkpoint is checked: inf/NaN on resume, f16 overflow, architecture caps, config consistency",
          "[train][cli][bad_input]") {
  SECTION("train --resume refuses inf weights (it skipped every step before)") {
    const DamagedCheckpoint c("resume_inf");
    set_weight(c, "head.bias", INFINITY);
    run_cases(c.dir, {{c.resume_args(), kError, "model.safetensors: tensor 'head.bias' holds inf or NaN"}});
  }
  SECTION("an f32 master above 65504 in an fp16 O2 checkpoint: an error naming the tensor and value") {
    const DamagedCheckpoint c("f16_overflow");
    set_weight(c, "head.weight", 70000.0f);
    const std::string message =
        "model.safetensors: tensor 'head.weight' element 0 holds 70000, which is inf in f16 (the dtype this model "
        "computes in; largest finite 65504)";
    run_cases(c.dir, {{c.eval_args(), kError, message},
                      {"predict --checkpoint " + c.path.string() + " hello", kError, message},
                      {c.resume_args(), kError, message}});
    set_weight(c, "head.weight", 65504.0f);  // the largest finite f16 loads
    const hg::testing::ProgramResult r = hg::testing::run_program("halfgrad", c.eval_args());
    INFO(r.output);
    CHECK(r.exit_code == 0);
  }
  SECTION("a huge num_hidden_layers is refused before anything is allocated") {
    const DamagedCheckpoint c("layers");
    c.edit_json("config.json", [](nlohmann::json& j) { j["num_hidden_layers"] = 1000000000; });
    const std::string message = "config.json: num_hidden_layers 1000000000 is above the limit 128";
    run_cases(c.dir,
              {{c.eval_args(), kError, message}, {"predict --checkpoint " + c.path.string() + " hi", kError, message}});
  }
  SECTION("a config that disagrees with itself: buckets changed, or the tokenizer entry removed") {
    const TempDir dir("hashed_ckpt");
    write_bytes(dir.path / "good.tsv", kGoodTsv);
    const hg::testing::ProgramResult trained = hg::testing::run_program(
        "halfgrad",
        "train --tokenizer char-ngrams --buckets 4096 --d-model 8 --heads 2 --batch-size 4 --threads 1"
        " --max-steps 2 --save-steps 2 --train " +
            dir / "good.tsv" + " --output-dir " + dir / "out");
    INFO(trained.output);
    REQUIRE(trained.exit_code == 0);
    DamagedCheckpoint c("hashed");
    fs::remove_all(c.path);
    fs::copy(dir.path / "out/checkpoint-2", c.path);
    c.edit_json("config.json", [](nlohmann::json& j) { j["tokenizer"]["buckets"] = 2048; });
    run_cases(c.dir, {{"predict --checkpoint " + c.path.string() + " hallo", kError,
                       "config.json: vocab_size 4097 disagrees with the char-ngrams tokenizer, whose vocabulary is "
                       "2049 (buckets + 1)"}});
    c.edit_json("config.json", [](nlohmann::json& j) { j.erase("tokenizer"); });
    run_cases(c.dir, {{"predict --checkpoint " + c.path.string() + " hallo", kError,
                       "config.json: vocab_size 4097 disagrees with the bytes tokenizer (config.json has no "
                       "\"tokenizer\" entry, which means bytes), whose vocabulary is 256"}});
  }
  SECTION("a flipped byte is caught by the SHA-256 in checkpoint.json") {
    const DamagedCheckpoint c("flipped");
    std::string bytes = read_bytes(c.path / "model.safetensors");
    bytes[bytes.size() - 3] ^= 0x10;  // inside the last tensor's data: the size is unchanged
    write_bytes(c.path / "model.safetensors", bytes);
    run_cases(c.dir, {{c.eval_args(), kError, "checkpoint-2: model.safetensors has SHA-256 "},
                      {c.resume_args(), kError, "(corrupted or replaced)"}});
  }
}

TEST_CASE("small cases: --seed -1, readable ranges, a resume past --max-steps", "[train][cli][bad_input]") {
  const DamagedCheckpoint c("small");
  const std::string train = "train" + kTiny + " --train " + c.dir / "data.tsv";
  run_cases(c.dir, {{train + " --seed -1", kCliValidation,
                     "--seed: Value -1 is not a seed: an integer in 0 to 18446744073709551615"},
                    {train + " --max-steps 0", kCliValidation, "--max-steps: Value 0 not in range 1 to 1099511627776"},
                    {train + " --seed 18446744073709551616", kCliValidation, "--seed"},  // 2^64: out of uint64
                    {"export-langid --out " + c.dir / "x" + " --seed -1", kCliValidation, "Value -1 is not a seed"}});
  const hg::testing::ProgramResult r = hg::testing::run_program(
      "halfgrad", c.resume_args().replace(c.resume_args().find("--max-steps 4"), 13, "--max-steps 2") +
                      " --output-dir " + c.dir / "resumed");
  INFO(r.output);
  CHECK(r.exit_code == 0);
  CHECK_THAT(r.output, Catch::Contains(c.path.string() + " is at step 2, which is not before max_steps 2") &&
                           Catch::Contains("nothing to train"));
  CHECK(io::list_checkpoints(c.dir.path / "resumed").empty());  // nothing trained, nothing saved
}

}  // namespace
}  // namespace hg::train
