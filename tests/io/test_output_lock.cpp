// io/output_lock: one writer per output directory. A held lock is refused naming the holder's
// PID; a holder killed with SIGKILL leaves its lock file, which the next run takes over (the
// kernel released the flock); a released lock removes its file.
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/wait.h>
#include <unistd.h>

#include <string>

#include "halfgrad/io/output_lock.h"
#include "tests/temp_dir.h"

namespace hg::io {
namespace output_lock_test {

using testing::error_of;
using testing::read_bytes;
using testing::TempDir;

TEST_CASE("OutputDirLock: one holder, named by PID, released with its file", "[io][output_lock]") {
  const TempDir dir("lock");
  const std::filesystem::path out = dir.path / "out";
  {
    const OutputDirLock first(out);  // creates the directory
    CHECK(read_bytes(out / kLockFile) == std::to_string(::getpid()) + "\n");
    // A second lock, even from this process (flock is per open file), is refused at once.
    const std::string pid = "(PID " + std::to_string(::getpid()) + ", lock file " + (out / kLockFile).string() + ")";
    CHECK_THAT(error_of([&] { OutputDirLock second(out); }),
               Catch::Contains("--output-dir " + out.string() + " is in use by another halfgrad run " + pid));
    CHECK_THAT(error_of([&] { check_output_dir_unlocked(out); }), Catch::Contains(pid));
  }
  CHECK_FALSE(std::filesystem::exists(out / kLockFile));
  check_output_dir_unlocked(out);  // free again
  const OutputDirLock again(out);
}

TEST_CASE("OutputDirLock: the lock of a killed holder is taken over", "[io][output_lock]") {
  const TempDir dir("lock_killed");
  const std::filesystem::path out = dir.path / "out";
  std::filesystem::create_directories(out);
  const std::string path = (out / kLockFile).string();
  int ready[2];
  REQUIRE(::pipe(ready) == 0);
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {  // system calls only after fork: take the lock as OutputDirLock does, then wait
    const int fd = ::open(path.c_str(), O_RDWR | O_CREAT, 0644);
    if (fd < 0 || ::flock(fd, LOCK_EX | LOCK_NB) != 0) ::_exit(1);
    char text[16];
    const int n = ::snprintf(text, sizeof text, "%d\n", int(::getpid()));
    if (::write(fd, text, size_t(n)) != n || ::write(ready[1], "k", 1) != 1) ::_exit(1);
    for (;;) ::pause();
  }
  ::close(ready[1]);
  char byte = 0;
  REQUIRE(::read(ready[0], &byte, 1) == 1);
  ::close(ready[0]);
  CHECK_THAT(error_of([&] { OutputDirLock blocked(out); }),
             Catch::Contains("is in use by another halfgrad run (PID " + std::to_string(child) + ","));
  REQUIRE(::kill(child, SIGKILL) == 0);
  int status = 0;
  REQUIRE(::waitpid(child, &status, 0) == child);
  CHECK(WIFSIGNALED(status));
  REQUIRE(std::filesystem::exists(path));  // the killed holder's file is still there ...
  const OutputDirLock taken(out);          // ... and its lock was released by the kernel
  CHECK(read_bytes(path) == std::to_string(::getpid()) + "\n");
}

}  // namespace output_lock_test
}  // namespace hg::io
