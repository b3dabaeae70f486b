// OutputDirLock over open(2), flock(2) and an inode check that makes removing the file safe.
#include "halfgrad/io/output_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "halfgrad/base/error.h"

namespace hg::io {
namespace {

// The PID the holder wrote, or "unknown" (it has not written it yet).
std::string holder_pid(int fd) {
  char text[32] = {};
  const ssize_t n = ::pread(fd, text, sizeof text - 1, 0);
  std::string pid = n > 0 ? std::string(text, size_t(n)) : "";
  while (!pid.empty() && (pid.back() == '\n' || pid.back() == ' ')) pid.pop_back();
  return pid.empty() ? "unknown" : pid;
}

[[noreturn]] void fail_held(const std::filesystem::path& dir, int fd) {
  const std::string pid = holder_pid(fd);
  ::close(fd);
  fail("--output-dir ", dir.string(), " is in use by another halfgrad run (PID ", pid, ", lock file ",
       (dir / kLockFile).string(),
       "): two runs would replace each other's checkpoints; give another --output-dir, "
       "or wait for that run to end");
}

}  // namespace

OutputDirLock::OutputDirLock(const std::filesystem::path& output_dir) : path_(output_dir / kLockFile) {
  std::error_code ec;
  std::filesystem::create_directories(output_dir, ec);
  check(!ec, "--output-dir ", output_dir.string(), ": cannot create: ", ec.message());
  // The holder removes the file when it ends; a run that opened the old file just before may then
  // lock an unlinked inode: it checks that the path still names what it locked, else retries.
  for (int attempt = 0;; ++attempt) {
    const int fd = ::open(path_.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    check(fd >= 0, path_.string(), ": cannot open the lock file: ", std::strerror(errno));
    if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
      if (errno == EWOULDBLOCK) fail_held(output_dir, fd);
      const std::string error = std::strerror(errno);
      ::close(fd);
      fail(path_.string(), ": cannot lock: ", error);
    }
    struct stat locked {
    }, named{};
    if (::fstat(fd, &locked) == 0 && ::stat(path_.c_str(), &named) == 0 && locked.st_ino == named.st_ino &&
        locked.st_dev == named.st_dev) {
      fd_ = fd;
      break;
    }
    ::close(fd);
    check(attempt < 100, path_.string(), ": the lock file keeps being replaced");
  }
  const std::string pid = std::to_string(::getpid()) + "\n";
  if (::ftruncate(fd_, 0) != 0 || ::pwrite(fd_, pid.data(), pid.size(), 0) != ssize_t(pid.size())) {
    const std::string error = std::strerror(errno);
    ::close(fd_);
    fail(path_.string(), ": cannot write the PID: ", error);
  }
}

OutputDirLock::~OutputDirLock() {
  ::unlink(path_.c_str());  // while still locked: a waiting opener sees the inode change and retries
  ::close(fd_);
}

void check_output_dir_unlocked(const std::filesystem::path& output_dir) {
  const std::filesystem::path path = output_dir / kLockFile;
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return;  // no lock file: nobody holds it
  if (::flock(fd, LOCK_SH | LOCK_NB) != 0 && errno == EWOULDBLOCK) fail_held(output_dir, fd);
  ::close(fd);  // releases the shared lock taken just now
}

}  // namespace hg::io
