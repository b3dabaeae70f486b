// train/atomic_file: the target changes only at commit, an abandoned write leaves nothing, and
// errors name the path.
#include <catch2/catch.hpp>

#include "tests/temp_dir.h"
#include "halfgrad/io/atomic_file.h"

namespace hg::io {

using testing::error_of;
using testing::read_bytes;
using testing::TempDir;

TEST_CASE("AtomicFile replaces the target only when committed", "[atomic_file]") {
  TempDir dir("atomic");
  const std::filesystem::path target = dir.path / "state.json";
  write_file_atomic(target, "old");
  CHECK(read_bytes(target) == "old");
  {
    AtomicFile file(target);
    file.write("new ");
    file.write(std::string(10000, 'x'));
    CHECK(file.size() == 10004);
    // Written beside the target under a hidden name, the target still old.
    CHECK(file.temp_path().parent_path() == dir.path);
    CHECK(file.temp_path().filename().string().rfind(".state.json.tmp-", 0) == 0);
    CHECK(std::filesystem::file_size(file.temp_path()) == 10004);
    CHECK(read_bytes(target) == "old");
    file.commit();
    CHECK_FALSE(std::filesystem::exists(file.temp_path()));
    CHECK(error_of([&] { file.write("more"); }) == target.string() + ": write after commit");
    CHECK(error_of([&] { file.commit(); }) == target.string() + ": committed twice");
  }
  CHECK(read_bytes(target) == "new " + std::string(10000, 'x'));
  std::filesystem::path abandoned;
  {
    AtomicFile file(target);  // destroyed without commit, as when an exception unwinds a save
    file.write("half");
    abandoned = file.temp_path();
    CHECK(std::filesystem::exists(abandoned));
  }
  CHECK_FALSE(std::filesystem::exists(abandoned));
  CHECK(read_bytes(target) == "new " + std::string(10000, 'x'));
  int entries = 0;
  for ([[maybe_unused]] const auto& entry : std::filesystem::directory_iterator(dir.path)) ++entries;
  CHECK(entries == 1);
}

TEST_CASE("atomic file helpers name the path in their errors", "[atomic_file]") {
  TempDir dir("atomic_errors");
  const std::filesystem::path missing = dir.path / "no" / "file.txt";
  CHECK_THAT(error_of([&] { write_file_atomic(missing, "x"); }),
             Catch::StartsWith(missing.string() + ": cannot create ") && Catch::EndsWith("No such file or directory"));
  CHECK(error_of([&] { fsync_path(missing); }) ==
        missing.string() + ": cannot open for fsync: No such file or directory");
  CHECK(error_of([&] { rename_path(missing, dir.path / "b"); }) ==
        "cannot rename " + missing.string() + " to " + (dir.path / "b").string() + ": No such file or directory");
  // exchange_paths swaps two directories.
  std::filesystem::create_directory(dir.path / "a");
  std::filesystem::create_directory(dir.path / "b");
  write_file_atomic(dir.path / "a" / "x", "in a");
  REQUIRE(exchange_paths(dir.path / "a", dir.path / "b"));
  CHECK(read_bytes(dir.path / "b" / "x") == "in a");
  CHECK_FALSE(std::filesystem::exists(dir.path / "a" / "x"));
}

}  // namespace hg::io
