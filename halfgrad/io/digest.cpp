// sha256_file over OpenSSL's EVP interface; read_file_bounded over read(2).
#include "halfgrad/io/digest.h"

#include <fcntl.h>
#include <openssl/evp.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <memory>
#include <vector>

#include "halfgrad/base/error.h"
#include "halfgrad/io/unique_fd.h"

namespace hg::io {
namespace {

// read(2) retried on EINTR; throws naming `path`.
size_t read_some(const std::filesystem::path& path, int fd, char* out, size_t size) {
  ssize_t n;
  do {
    n = ::read(fd, out, size);
  } while (n < 0 && errno == EINTR);
  check(n >= 0, path.string(), ": read failed: ", std::strerror(errno));
  return size_t(n);
}

std::string hex(const unsigned char* bytes, unsigned size) {
  static const char digits[] = "0123456789abcdef";
  std::string out;
  for (unsigned i = 0; i < size; ++i) {
    out += digits[bytes[i] >> 4];
    out += digits[bytes[i] & 15];
  }
  return out;
}

using Context = std::unique_ptr<EVP_MD_CTX, decltype(&EVP_MD_CTX_free)>;

}  // namespace

std::string sha256_file(const std::filesystem::path& path) {
  UniqueFd file{::open(path.c_str(), O_RDONLY | O_CLOEXEC)};
  check(file.fd >= 0, path.string(), ": cannot open: ", std::strerror(errno));
  Context ctx(EVP_MD_CTX_new(), EVP_MD_CTX_free);
  check(ctx && EVP_DigestInit_ex(ctx.get(), EVP_sha256(), nullptr) == 1, "SHA-256: OpenSSL cannot start a digest");
  std::vector<char> block(size_t(1) << 20);
  for (size_t n; (n = read_some(path, file.fd, block.data(), block.size())) > 0;) {
    check(EVP_DigestUpdate(ctx.get(), block.data(), n) == 1, "SHA-256: OpenSSL digest update failed");
  }
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned size = 0;
  check(EVP_DigestFinal_ex(ctx.get(), md, &size) == 1, "SHA-256: OpenSSL digest failed");
  return hex(md, size);
}

std::string sha256_hex(const void* data, size_t size) {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned n = 0;
  check(EVP_Digest(data, size, md, &n, EVP_sha256(), nullptr) == 1, "SHA-256: OpenSSL digest failed");
  return hex(md, n);
}

std::string read_file_bounded(const std::filesystem::path& path, uint64_t max_bytes) {
  UniqueFd file{::open(path.c_str(), O_RDONLY | O_CLOEXEC)};
  check(file.fd >= 0, path.string(), ": cannot open: ", std::strerror(errno));
  std::string text;
  char block[1 << 16];
  for (size_t n; (n = read_some(path, file.fd, block, sizeof block)) > 0;) {
    text.append(block, n);
    check(text.size() <= max_bytes, path.string(), ": larger than the ", max_bytes,
          "-byte limit for this file (not a halfgrad file, or an endless stream?)");
  }
  return text;
}

}  // namespace hg::io
