// A POSIX file descriptor closed when it goes out of scope: the readers of io/ (digest.cpp,
// safetensors.cpp) hold their files with it, so every return and throw closes them.
#pragma once

#include <unistd.h>

namespace hg::io {

struct UniqueFd {
  int fd = -1;
  ~UniqueFd() {
    if (fd >= 0) ::close(fd);
  }
};

}  // namespace hg::io
