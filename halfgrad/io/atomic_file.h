// Crash-safe file writing on POSIX: a file is written under a temporary name beside its target,
// fsync'ed, renamed over the target, and the directory fsync'ed, so after a crash (power loss
// included) the path holds either the old complete file or the new complete one. Directory
// helpers for the checkpoint layer sit beside it. Not here: locking between processes (two
// writers of one path: the last rename wins, each file stays whole).
#pragma once

#include <cstddef>
#include <filesystem>
#include <string>
#include <string_view>

namespace hg::io {

// A file being written. Bytes go to `.<name>.tmp-<pid>-<n>` in the target's directory;
// commit() fsyncs, renames it over `path` and fsyncs the directory. Destroying an uncommitted
// AtomicFile (an exception while writing) removes the temporary and leaves `path` untouched.
class AtomicFile {
 public:
  explicit AtomicFile(std::filesystem::path path);
  ~AtomicFile();
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;

  void write(const void* data, size_t size);
  void write(std::string_view bytes) { write(bytes.data(), bytes.size()); }
  size_t size() const { return written_; }
  // sync_directory = false leaves the directory fsync to the caller (a checkpoint directory
  // fsyncs once after all its files).
  void commit(bool sync_directory = true);

  const std::filesystem::path& path() const { return path_; }
  const std::filesystem::path& temp_path() const { return temp_; }

 private:
  std::filesystem::path path_, temp_;
  int fd_ = -1;
  size_t written_ = 0;
};

// Writes `bytes` to `path` atomically (AtomicFile, committed).
void write_file_atomic(const std::filesystem::path& path, std::string_view bytes);

// fsync on a file or a directory (a directory's fsync makes renames and creations inside it
// durable). Throws hg::Error naming the path.
void fsync_path(const std::filesystem::path& path);

// Atomically swaps two existing paths (Linux renameat2 RENAME_EXCHANGE). Returns false when
// the file system does not support it (the caller falls back to two renames); throws on
// other errors.
bool exchange_paths(const std::filesystem::path& a, const std::filesystem::path& b);

// rename(2) with an hg::Error naming both paths on failure.
void rename_path(const std::filesystem::path& from, const std::filesystem::path& to);

}  // namespace hg::io
