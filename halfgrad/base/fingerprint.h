// fnv1a: the 64-bit FNV-1a hash of a byte range, for fingerprints that say "these bytes are
// equal" (a module's weights, the replicas of a data-parallel run, a data set on every rank).
// Not for security; chain calls through `h` to hash several ranges as one.
#pragma once

#include <cstddef>
#include <cstdint>

namespace hg {

inline constexpr uint64_t kFnv1aOffset = 0xcbf29ce484222325ull;

inline uint64_t fnv1a(const void* data, size_t n, uint64_t h = kFnv1aOffset) {
  const auto* bytes = static_cast<const unsigned char*>(data);
  for (size_t i = 0; i < n; ++i) h = (h ^ bytes[i]) * 0x100000001b3ull;
  return h;
}

}  // namespace hg
