// Fuzzes the `halfgrad` command line (demos/halfgrad_cli.h): the input, split at newlines, is
// the argument list. Parsing either succeeds or throws CLI::ParseError (which the program turns
// into a usage message and exit code); a parsed train command then goes through
// resolve_train_options, which either completes it or throws hg::Error. Nothing trains.
// libFuzzer runs it from fuzz/cli_parser.cpp; the tests replay its committed corpus
// fuzz/corpus/cli_parser/ (tests/fuzz_corpus.h).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "demos/halfgrad_cli.h"

namespace hg::fuzz {

inline int cli_parser(const uint8_t* data, size_t size) {
  std::vector<std::string> args = {"halfgrad"};
  std::string current;
  for (size_t i = 0; i < size; ++i) {
    if (data[i] == '\n') {
      args.push_back(current);
      current.clear();
    } else {
      current += char(data[i]);
    }
  }
  if (!current.empty()) args.push_back(current);
  if (args.size() > 64) return 0;  // long argument lists only repeat what short ones reach
  std::vector<const char*> argv;
  for (const std::string& a : args) argv.push_back(a.c_str());
  CLI::App app;
  hg::cli::CommandLine cl;
  hg::cli::setup_command_line(app, cl);
  try {
    app.parse(int(argv.size()), argv.data());
  } catch (const CLI::ParseError&) {
    return 0;
  }
  if (!*cl.train_cmd) return 0;  // eval, predict, export-langid, or none (the usage)
  try {
    hg::cli::resolve_train_options(*cl.train_cmd, cl.train);
  } catch (const hg::Error&) {
  }
  return 0;
}

}  // namespace hg::fuzz
