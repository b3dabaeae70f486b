// One writer per output directory: an advisory flock(2) on output_dir/.halfgrad.lock, held while
// a training run writes there, so a second run into the same directory fails at once naming the
// first one's PID instead of replacing its checkpoints and interleaving its log.jsonl. The
// kernel releases a flock when its holder dies (kill -9 included), so a lock file a killed run
// left behind is simply taken over; the file holds the holder's PID, for the message only.
// Advisory: it binds halfgrad runs, not other programs; on NFS flock is emulated with fcntl
// locks (Linux >= 2.6.12) and holds across machines only where the server supports them.
#pragma once

#include <filesystem>
#include <string>

namespace hg::io {

inline constexpr const char* kLockFile = ".halfgrad.lock";

class OutputDirLock {
 public:
  // Creates output_dir if needed and takes the lock without waiting. Throws hg::Error naming
  // the directory and the holder's PID when another process holds it.
  explicit OutputDirLock(const std::filesystem::path& output_dir);
  // Releases the lock and removes the lock file.
  ~OutputDirLock();
  OutputDirLock(const OutputDirLock&) = delete;
  OutputDirLock& operator=(const OutputDirLock&) = delete;

 private:
  std::filesystem::path path_;
  int fd_ = -1;
};

// Throws the same error as OutputDirLock when a live process holds output_dir's lock; creates
// nothing (a check before a run reads its data; the run takes the lock when it starts writing).
void check_output_dir_unlocked(const std::filesystem::path& output_dir);

}  // namespace hg::io
