// The `halfgrad` command's conventions (issue "the first ten minutes"): no subcommand prints the
// usage and exits 2; every choice a help text lists is accepted (parsed and resolved in process,
// demos/halfgrad_cli.h); the help of --max-steps says what giving both does; eval and predict
// take a run's output directory (its latest checkpoint, or --best); predict skips blank lines
// with a warning, reads --input FILE and ranks --top-k; a --resume into another model names each
// differing field; checkpoints of a small data set get few buckets; the table of a run without
// evaluation data has no eval columns.
#include <catch2/catch.hpp>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "halfgrad/data/dataset.h"
#include "demos/halfgrad_cli.h"
#include "fuzz/cli_parser.h"
#include "halfgrad/io/checkpoint.h"
#include "tests/demos/run_program.h"
#include "tests/fuzz_corpus.h"
#include "tests/temp_dir.h"

namespace hg {
namespace {

namespace fs = std::filesystem;
using testing::TempDir;

const std::string kTinyRun =
    " --precision fp32 --d-model 8 --heads 2 --layers 1 --d-ff 16 --max-len 8 --batch-size 4"
    " --threads 1 --logging-steps 1 --tokenizer bytes";

testing::ProgramResult run_ok(const std::string& args) {
  testing::ProgramResult r = testing::run_program("halfgrad", args);
  INFO("halfgrad " << args << "\n" << r.output);
  REQUIRE(r.exit_code == 0);
  return r;
}

// Parses `args` (after the program name) with the real command line and, for train, resolves the
// train options as `halfgrad train` does before reading data. Returns the hg::Error's or CLI11's
// message, or "" when everything is accepted.
std::string parse_and_resolve(std::vector<std::string> args) {
  CLI::App app{"halfgrad"};
  cli::CommandLine cl;
  cli::setup_command_line(app, cl);
  std::vector<std::string> reversed(args.rbegin(), args.rend());  // CLI11's vector parse takes them reversed
  try {
    app.parse(reversed);
    if (*cl.train_cmd) cli::resolve_train_options(*cl.train_cmd, cl.train);
    if (*cl.eval_cmd) cli::read_options(cl.input_format, cl.header, cl.no_header);
  } catch (const std::exception& e) {
    return e.what()[0] ? e.what() : "error";
  }
  return "";
}

// "a | b | c" lists in a help text: the lower-case choices (N, X: placeholders, not choices).
std::vector<std::string> listed_choices(const std::string& description) {
  std::vector<std::string> choices;
  const std::regex list(R"(([A-Za-z0-9_-]+(?: \| [A-Za-z0-9_-]+)+))");
  for (std::sregex_iterator it(description.begin(), description.end(), list), end; it != end; ++it) {
    std::istringstream items(it->str());
    for (std::string item; std::getline(items, item, '|');) {
      item.erase(0, item.find_first_not_of(' '));
      item.erase(item.find_last_not_of(' ') + 1);
      if (item.size() > 1 || !std::isupper(static_cast<unsigned char>(item[0]))) choices.push_back(item);
    }
  }
  return choices;
}

TEST_CASE("halfgrad with no subcommand prints the usage and exits 2", "[demo][cli]") {
  const testing::ProgramResult r = testing::run_program("halfgrad", "");
  INFO(r.output);
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.output, Catch::Contains("Subcommands:"));
  CHECK_THAT(r.output, Catch::Contains("the main job is `halfgrad train`"));
  CHECK_THAT(r.output, !Catch::Contains("epoch"));  // no training started
}

TEST_CASE("every choice a halfgrad help text lists is accepted", "[demo][cli]") {
  const TempDir dir("listed_choices");
  testing::write_bytes(dir.path / "train.tsv", "a\tx\nb\ty\n");
  CLI::App app{"halfgrad"};
  cli::CommandLine cl;
  cli::setup_command_line(app, cl);
  int lists = 0;
  for (CLI::App* command : {cl.train_cmd, cl.eval_cmd, cl.predict_cmd}) {
    for (const CLI::Option* option : command->get_options()) {
      const std::vector<std::string> choices = listed_choices(option->get_description());
      if (choices.empty() || option->get_name().rfind("--", 0) != 0) continue;
      ++lists;
      const std::string flag = option->get_name();
      std::vector<std::string> base = {command->get_name()};
      // The context a flag needs to have an effect: its precision, --load-best, a data file.
      if (flag.rfind("--fp8-", 0) == 0) base.insert(base.end(), {"--precision", "fp8"});
      if (flag == "--metric") base.push_back("--load-best");
      if (flag == "--spm-type") base.insert(base.end(), {"--tokenizer", "sentencepiece"});
      if (flag == "--update-rounding") base.insert(base.end(), {"--master-weights", "none"});
      if (flag == "--bf16-dot") base.insert(base.end(), {"--precision", "bf16"});
      if (flag == "--input-format")
        base.insert(base.end(), {command == cl.train_cmd ? "--train" : "--data", dir / "train.tsv"});
      if (command != cl.train_cmd) base.insert(base.end(), {"--checkpoint", dir.path.string()});
      if (command == cl.eval_cmd && flag != "--input-format") base.insert(base.end(), {"--data", dir / "train.tsv"});
      for (const std::string& choice : choices) {
        std::vector<std::string> args = base;
        args.insert(args.end(), {flag, choice});
        INFO(command->get_name() << " " << flag << " " << choice << " (help: " << option->get_description() << ")");
        CHECK(parse_and_resolve(args) == "");
      }
    }
  }
  CHECK(lists >= 15);  // the lists were found: --precision, --opt-level, --scheduler, --tokenizer, ...
  CHECK(listed_choices(cl.train_cmd->get_option("--precision")->get_description()) ==
        std::vector<std::string>{"fp32", "fp16", "bf16", "fp8"});
}

TEST_CASE("the help of --max-steps and --warmup-ratio says what giving both does", "[demo][cli]") {
  CLI::App app{"halfgrad"};
  cli::CommandLine cl;
  cli::setup_command_line(app, cl);
  for (const auto& [flag, other, value, other_value] :
       {std::tuple{"--max-steps", "--epochs", "10", "2"}, std::tuple{"--warmup-ratio", "--warmup-steps", "0.1", "5"}}) {
    const std::string help = cl.train_cmd->get_option(flag)->get_description();
    INFO(flag << ": " << help);
    CHECK_THAT(help, !Catch::Contains("overrides") && Catch::Contains("give one"));
    CHECK_THAT(parse_and_resolve({"train", flag, value, other, other_value}), Catch::Contains("give one"));
  }
}

TEST_CASE("a run without evaluation data prints no eval columns", "[demo][cli]") {
  const TempDir dir("no_eval_columns");
  data::write_tsv(data::synthetic_dataset(16, 2, 3), dir / "train.tsv");
  const testing::ProgramResult r = run_ok("train" + kTinyRun + " --epochs 2 --save-strategy no --train " +
                                          dir / "train.tsv" + " --output-dir " + dir / "out");
  CHECK_THAT(r.output, !Catch::Contains("nan") && !Catch::Contains("eval_loss") && !Catch::Contains("accuracy"));
  CHECK(std::regex_search(r.output, std::regex(R"(epoch\s+step\s+train_loss\s+skipped\s+scale\s+time)")));
  CHECK(std::regex_search(r.output, std::regex(R"(\n\s*2\.00\s+8\s+[0-9.]+\s+0\s+1\s+[0-9]+s\n)")));
}

TEST_CASE("eval and predict take a run's output directory: its latest checkpoint, or --best", "[demo][cli]") {
  const TempDir dir("run_folder");
  data::write_tsv(data::synthetic_dataset(32, 2, 3), dir / "train.tsv");
  data::write_tsv(data::synthetic_dataset(16, 2, 4), dir / "eval.tsv");
  // 8 steps an epoch; evaluated and saved at each epoch's end; the newest one kept (and the best).
  run_ok("train" + kTinyRun + " --epochs 4 --lr 0.05 --save-total-limit 1 --train " + dir / "train.tsv" + " --eval " +
         dir / "eval.tsv" + " --output-dir " + dir / "out");
  const fs::path latest = io::latest_checkpoint(dir.path / "out");
  REQUIRE(latest.filename() == "checkpoint-32");
  const nlohmann::json state = nlohmann::json::parse(testing::read_bytes(latest / "trainer_state.json"));
  const std::string best = fs::path(state.at("best_model_checkpoint").get<std::string>()).filename().string();
  REQUIRE_FALSE(best.empty());

  const std::string text = " abab";
  const testing::ProgramResult from_latest = run_ok("predict --checkpoint " + dir / "out" + text);
  CHECK_THAT(from_latest.output,
             Catch::Contains("using its latest checkpoint, " + (dir.path / "out/checkpoint-32").string()));
  const testing::ProgramResult explicit_latest = run_ok("predict --checkpoint " + latest.string() + text);
  CHECK_THAT(from_latest.output, Catch::EndsWith(explicit_latest.output));  // the same prediction, after the note

  const testing::ProgramResult from_best = run_ok("predict --best --checkpoint " + dir / "out" + text);
  CHECK_THAT(from_best.output, Catch::Contains("using its best checkpoint, " + (dir.path / "out" / best).string()));
  const testing::ProgramResult explicit_best =
      run_ok("predict --checkpoint " + (dir.path / "out" / best).string() + text);
  CHECK_THAT(from_best.output, Catch::EndsWith(explicit_best.output));

  const testing::ProgramResult evaluated =
      run_ok("eval --best --checkpoint " + dir / "out" + " --data " + dir / "eval.tsv");
  CHECK_THAT(evaluated.output, Catch::Contains("using its best checkpoint"));
  CHECK_THAT(evaluated.output, Catch::Contains("accuracy"));

  const testing::ProgramResult checkpoint_best =
      testing::run_program("halfgrad", "predict --best --checkpoint " + latest.string() + text);
  CHECK(checkpoint_best.exit_code == 1);
  CHECK_THAT(checkpoint_best.output, Catch::Contains("--best picks among a run's checkpoints"));
  fs::create_directories(dir.path / "empty");
  const testing::ProgramResult empty = testing::run_program("halfgrad", "predict --checkpoint " + dir / "empty" + text);
  CHECK(empty.exit_code == 1);
  CHECK_THAT(empty.output, Catch::Contains("neither a checkpoint"));
  // A run without evaluation records no best checkpoint.
  run_ok("train" + kTinyRun + " --max-steps 2 --save-steps 2 --train " + dir / "train.tsv" + " --output-dir " +
         dir / "no_eval");
  const testing::ProgramResult no_best =
      testing::run_program("halfgrad", "predict --best --checkpoint " + dir / "no_eval" + text);
  CHECK(no_best.exit_code == 1);
  CHECK_THAT(no_best.output, Catch::Contains("recorded no best checkpoint"));
}

TEST_CASE("predict skips blank lines with a warning, reads --input and ranks --top-k", "[demo][cli]") {
  const TempDir dir("predict_input");
  data::write_tsv(data::synthetic_dataset(48, 3, 3), dir / "train.tsv");
  run_ok("train" + kTinyRun + " --max-steps 3 --save-steps 3 --train " + dir / "train.tsv" + " --output-dir " +
         dir / "out");
  const std::string checkpoint = " --checkpoint " + dir / "out/checkpoint-3";
  testing::write_bytes(dir.path / "texts.txt", "abab\n   \n\ncdcd\n\t\nefef\n");
  const testing::ProgramResult r = run_ok("predict" + checkpoint + " --input " + dir / "texts.txt");
  CHECK_THAT(r.output, Catch::Contains("warning: predict: skipped 3 blank " + dir / "texts.txt" + " lines: 2, 3, 5"));
  std::vector<std::string> rows;
  std::istringstream lines(r.output);
  for (std::string line; std::getline(lines, line);) {
    if (line.find("\tclass") != std::string::npos) rows.push_back(line);
  }
  REQUIRE(rows.size() == 3);
  CHECK(rows[0].rfind("abab\t", 0) == 0);
  CHECK(rows[2].rfind("efef\t", 0) == 0);
  // The same texts on stdin, and as arguments with a blank one: the same rows.
  const testing::ProgramResult piped = run_ok("predict" + checkpoint + " < " + dir / "texts.txt");
  CHECK_THAT(piped.output, Catch::Contains(rows[1]) && Catch::Contains("skipped 3 blank stdin lines"));
  const testing::ProgramResult args = run_ok("predict" + checkpoint + " abab ' ' cdcd efef");
  CHECK_THAT(args.output, Catch::Contains(rows[2]) && Catch::Contains("skipped 1 blank argument: 2"));

  // --top-k 2: the two most probable labels, in decreasing order, the first being the prediction.
  const testing::ProgramResult top = run_ok("predict --top-k 2" + checkpoint + " abab");
  const std::regex two(R"(abab\t(class[0-9])\t(class[0-9])=([0-9.]+)\t(class[0-9])=([0-9.]+)\n)");
  std::smatch m;
  REQUIRE(std::regex_search(top.output, m, two));
  CHECK(m[1] == m[2]);
  CHECK(std::stod(m[3]) >= std::stod(m[5]));
  CHECK(m[2] != m[4]);
  const testing::ProgramResult both =
      testing::run_program("halfgrad", "predict --top-k 2 --logits" + checkpoint + " abab");
  CHECK(both.exit_code == 1);
  const testing::ProgramResult none =
      testing::run_program("halfgrad", "predict" + checkpoint + " --input " + dir / "texts.txt" + " abab");
  CHECK(none.exit_code == 1);
  CHECK_THAT(none.output, Catch::Contains("give one"));
}

TEST_CASE("a --resume into another model names every differing field with both values", "[demo][cli]") {
  const TempDir dir("resume_mismatch");
  data::write_tsv(data::synthetic_dataset(16, 2, 3), dir / "train.tsv");
  run_ok("train" + kTinyRun + " --max-steps 2 --save-steps 2 --train " + dir / "train.tsv" + " --output-dir " +
         dir / "out");
  std::string other = kTinyRun;
  other.replace(other.find("--d-model 8"), 11, "--d-model 16");
  other.replace(other.find("--d-ff 16"), 9, "--d-ff 32");
  const testing::ProgramResult r =
      testing::run_program("halfgrad", "train" + other + " --max-steps 4 --train " + dir / "train.tsv" +
                                           " --output-dir " + dir / "out2" + " --resume " + dir / "out/checkpoint-2");
  INFO(r.output);
  CHECK(r.exit_code == 1);
  CHECK_THAT(r.output, Catch::Contains("the checkpoint does not match this run: hidden_size: checkpoint 8, this run 16 "
                                       "(--d-model); intermediate_size: checkpoint 16, this run 32 (--d-ff)"));
  // A run's output directory resumes from its latest checkpoint (HF's resume_from_checkpoint=True).
  const testing::ProgramResult folder =
      testing::run_program("halfgrad", "train" + other + " --max-steps 4 --train " + dir / "train.tsv" +
                                           " --output-dir " + dir / "out2" + " --resume " + dir / "out");
  CHECK(folder.exit_code == 1);
  CHECK_THAT(folder.output, Catch::Contains("using its latest checkpoint, " + dir / "out/checkpoint-2") &&
                                Catch::Contains("hidden_size: checkpoint 8, this run 16 (--d-model)"));
  std::string bf16 = kTinyRun;
  bf16.replace(bf16.find("fp32"), 4, "bf16");
  const testing::ProgramResult precision =
      testing::run_program("halfgrad", "train" + bf16 + " --max-steps 4 --train " + dir / "train.tsv" +
                                           " --output-dir " + dir / "out3" + " --resume " + dir / "out/checkpoint-2");
  std::string p = precision.output;
  INFO(p);
  CHECK_THAT(p,
             Catch::Contains("the checkpoint was saved with another precision: bf16: checkpoint false, this run true"));
}

TEST_CASE("a small data set's checkpoint gets buckets for its n-grams, not 2^18", "[demo][cli]") {
  const TempDir dir("small_buckets");
  const data::Dataset small = data::synthetic_dataset(30, 2, 3);
  data::write_tsv(small, dir / "train.tsv");
  std::string hashed = kTinyRun;
  hashed.replace(hashed.find("--tokenizer bytes"), 17, "--tokenizer char-ngrams --layers 0");
  hashed.replace(hashed.find("--layers 1"), 10, "");
  run_ok("train" + hashed + " --max-steps 2 --save-steps 2 --train " + dir / "train.tsv" + " --output-dir " +
         dir / "out");
  const nlohmann::json config = nlohmann::json::parse(testing::read_bytes(dir.path / "out/checkpoint-2/config.json"));
  data::TokenizerConfig tokenizer{.kind = data::TokenizerKind::kCharNgrams};
  CHECK(config.at("tokenizer").at("buckets") == data::default_buckets(small, tokenizer));
  CHECK(config.at("tokenizer").at("buckets").get<int64_t>() <= 4096);  // 30 words: at most ~1000 n-grams
  CHECK(fs::file_size(dir.path / "out/checkpoint-2/model.safetensors") < 1024 * 1024);  // 2^18 rows: 8 MB
  // --buckets given is kept.
  run_ok("train" + hashed + " --buckets 4096 --max-steps 2 --save-steps 2 --train " + dir / "train.tsv" +
         " --output-dir " + dir / "given");
  CHECK(nlohmann::json::parse(testing::read_bytes(dir.path / "given/checkpoint-2/config.json"))
            .at("tokenizer")
            .at("buckets") == 4096);
}

TEST_CASE("checkpoints of --save-only-model hold the weights alone: eval and predict take them, --resume refuses them",
          "[demo][cli]") {
  const TempDir dir("save_only_model");
  data::write_tsv(data::synthetic_dataset(16, 2, 3), dir / "train.tsv");
  const std::string run = "train" + kTinyRun + " --save-steps 2 --train " + dir / "train.tsv";
  run_ok(run + " --max-steps 2 --output-dir " + dir / "full");
  run_ok(run + " --max-steps 2 --save-only-model --output-dir " + dir / "small");
  const fs::path full = dir.path / "full/checkpoint-2", small = dir.path / "small/checkpoint-2";
  for (const char* name :
       {"optimizer.safetensors", "optimizer.json", "scheduler.json", "scaler.json", "rng_state.json"}) {
    CHECK(fs::exists(full / name));
    CHECK_FALSE(fs::exists(small / name));
  }
  CHECK(io::checkpoint_complete(small));
  CHECK(io::load_checkpoint(small).model_only);
  CHECK(testing::read_bytes(small / "model.safetensors") == testing::read_bytes(full / "model.safetensors"));
  // The same predictions and evaluation as the full checkpoint of the same run.
  const std::string text = " abab cdcd";
  const std::string predicted = run_ok("predict --checkpoint " + full.string() + text).output;
  CHECK(run_ok("predict --checkpoint " + small.string() + text).output == predicted);
  CHECK(run_ok("eval --checkpoint " + small.string() + " --data " + dir / "train.tsv").output ==
        run_ok("eval --checkpoint " + full.string() + " --data " + dir / "train.tsv").output);
  const testing::ProgramResult resumed = testing::run_program(
      "halfgrad", run + " --max-steps 4 --output-dir " + dir / "again" + " --resume " + small.string());
  INFO(resumed.output);
  CHECK(resumed.exit_code == 1);
  CHECK_THAT(resumed.output,
             Catch::Contains(small.string() + ": a --save-only-model checkpoint (save_only_model) holds "
                                              "the weights alone"));
  CHECK_THAT(resumed.output, !Catch::Contains("examples"));  // refused before the data is read
}

TEST_CASE("train --group-by-length sets the run's group_by_length and is off by default", "[demo][cli]") {
  const TempDir dir("group_by_length");
  data::write_tsv(data::synthetic_dataset(4, 2, 3), dir / "t.tsv");
  for (const bool given : {true, false}) {
    CLI::App app{"halfgrad"};
    cli::CommandLine cl;
    cli::setup_command_line(app, cl);
    std::vector<std::string> args = {"train", "--train", (dir / "t.tsv")};
    if (given) args.push_back("--group-by-length");
    app.parse(std::vector<std::string>(args.rbegin(), args.rend()));
    CHECK(cl.train.args.group_by_length == given);
  }
}

TEST_CASE("fuzz corpus: cli_parser replays cleanly", "[fuzz][cli]") {
  // Every argument list of fuzz/corpus/cli_parser/ parses or fails as a usage error or hg::Error.
  CHECK(testing::replay_fuzz_corpus("cli_parser", fuzz::cli_parser) > 0);
}

}  // namespace
}  // namespace hg
