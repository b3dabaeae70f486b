// SHA-256 of a file (FIPS 180-4, through OpenSSL's libcrypto: SHA-NI where the CPU has it), as
// lowercase hex: the checksum checkpoint.json records for every file, so that a flipped byte or a
// replaced file is found on load, and a user can check a file with coreutils' `sha256sum`.
// Also the bounded whole-file read of the small JSON files (config.json, trainer_state.json, ...).
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>

namespace hg::io {

// Hex SHA-256 of the file's bytes, read in 1 MiB blocks. Throws hg::Error naming the path.
std::string sha256_file(const std::filesystem::path& path);
// Hex SHA-256 of a byte string.
std::string sha256_hex(const void* data, size_t size);

// The largest JSON file a checkpoint reader accepts (trainer_state.json grows with the log
// history: about 200 bytes per logged step).
inline constexpr uint64_t kMaxJsonFileBytes = uint64_t{256} << 20;  // 256 MiB

// The whole file, at most `max_bytes`: a larger file, or a stream (a FIFO, /dev/zero) that runs
// past the limit, is an hg::Error naming the path and the limit, after reading at most
// max_bytes + 1 bytes.
std::string read_file_bounded(const std::filesystem::path& path, uint64_t max_bytes);

}  // namespace hg::io
