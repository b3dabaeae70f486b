// AtomicFile and the fsync/rename helpers over POSIX calls (open, write, fsync, rename,
// renameat2). Every failure is an hg::Error naming the path and strerror.
#include "halfgrad/io/atomic_file.h"

#include <fcntl.h>
#include <stdio.h>  // renameat2, RENAME_EXCHANGE (glibc >= 2.28)
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>

#include "halfgrad/base/error.h"

namespace hg::io {
namespace {

std::string os_error() { return std::strerror(errno); }

std::filesystem::path directory_of(const std::filesystem::path& path) {
  const std::filesystem::path parent = path.parent_path();
  return parent.empty() ? std::filesystem::path(".") : parent;
}

// Distinct temporary names for files written at the same time by one process.
std::atomic<uint64_t> temp_counter{0};

}  // namespace

AtomicFile::AtomicFile(std::filesystem::path path) : path_(std::move(path)) {
  check(path_.has_filename(), "cannot write '", path_.string(), "': not a file name");
  // Appended piecewise: GCC 12 gives a false -Wrestrict for "." + std::string (bug 105651).
  std::string name = ".";
  name += path_.filename().string();
  name += ".tmp-" + std::to_string(::getpid()) + "-" + std::to_string(temp_counter++);
  temp_ = directory_of(path_) / name;
  fd_ = ::open(temp_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  check(fd_ >= 0, path_.string(), ": cannot create ", temp_.string(), ": ", os_error());
}

AtomicFile::~AtomicFile() {
  if (fd_ >= 0) {
    ::close(fd_);
    ::unlink(temp_.c_str());
  }
}

void AtomicFile::write(const void* data, size_t size) {
  check(fd_ >= 0, path_.string(), ": write after commit");
  const char* p = static_cast<const char*>(data);
  while (size > 0) {
    const ssize_t n = ::write(fd_, p, size);
    if (n < 0 && errno == EINTR) continue;
    check(n > 0, path_.string(), ": write failed after ", written_, " bytes: ", os_error());
    p += n;
    size -= size_t(n);
    written_ += size_t(n);
  }
}

void AtomicFile::commit(bool sync_directory) {
  check(fd_ >= 0, path_.string(), ": committed twice");
  // fsync before rename: otherwise a crash can leave the new name pointing at a file whose
  // data never reached the disk (the ext4 zero-length-file problem).
  check(::fsync(fd_) == 0, path_.string(), ": fsync failed: ", os_error());
  const int fd = fd_;
  fd_ = -1;
  if (::close(fd) != 0) {
    const std::string error = os_error();
    ::unlink(temp_.c_str());
    fail(path_.string(), ": close failed: ", error);
  }
  if (::rename(temp_.c_str(), path_.c_str()) != 0) {
    const std::string error = os_error();
    ::unlink(temp_.c_str());
    fail(path_.string(), ": cannot rename ", temp_.string(), " into place: ", error);
  }
  if (sync_directory) fsync_path(directory_of(path_));
}

void write_file_atomic(const std::filesystem::path& path, std::string_view bytes) {
  AtomicFile file(path);
  file.write(bytes);
  file.commit();
}

void fsync_path(const std::filesystem::path& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  check(fd >= 0, path.string(), ": cannot open for fsync: ", os_error());
  const int rc = ::fsync(fd);
  const std::string error = rc != 0 ? os_error() : "";
  ::close(fd);
  check(rc == 0, path.string(), ": fsync failed: ", error);
}

bool exchange_paths(const std::filesystem::path& a, const std::filesystem::path& b) {
  if (::renameat2(AT_FDCWD, a.c_str(), AT_FDCWD, b.c_str(), RENAME_EXCHANGE) == 0) return true;
  if (errno == EINVAL || errno == ENOSYS || errno == ENOTSUP) return false;
  fail("cannot exchange ", a.string(), " and ", b.string(), ": ", os_error());
}

void rename_path(const std::filesystem::path& from, const std::filesystem::path& to) {
  check(::rename(from.c_str(), to.c_str()) == 0, "cannot rename ", from.string(), " to ", to.string(), ": ",
        os_error());
}

}  // namespace hg::io
