// The caching allocator behind tensor storage. A training step frees and re-creates the same
// multi-MiB activations every step; served by glibc they come from mmap (or a heap top that free()
// trims), so every step page-faults and the kernel zeroes them again. Here a freed block of at
// least kMinCachedBytes goes onto a free list of its size class and the next request of that
// class reuses it: after the first step, a step allocates nothing from the kernel.
// Size classes are 2^k x {1, 1.25, 1.5, 1.75} (a request wastes under 25%); smaller blocks go
// straight to operator new. Blocks are 64-byte aligned. Thread-safe (one mutex; tensors may be
// freed on any thread). The cache holds at most cache_limit() bytes; release_cached_memory()
// returns them all to the system.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

namespace hg {

constexpr size_t kMinCachedBytes = 4096;

// A 64-byte-aligned block of at least `bytes` bytes (at least 1), returned to the cache when
// the last shared_ptr to it is released.
std::shared_ptr<std::byte> allocate_storage(size_t bytes);

struct AllocatorStats {
  int64_t hits = 0;              // requests served from the cache
  int64_t misses = 0;            // cacheable requests that had to allocate
  size_t cached_bytes = 0;       // free blocks held now
  size_t in_use_bytes = 0;       // cacheable blocks handed out and not yet freed (class sizes)
  size_t peak_in_use_bytes = 0;  // the most in_use_bytes since the start or reset_peak_in_use()
};
AllocatorStats allocator_stats();
// Restarts peak_in_use_bytes from in_use_bytes (torch.cuda.reset_peak_memory_stats).
void reset_peak_in_use();

// The bytes a request of `bytes` occupies (its size class), or `bytes` below kMinCachedBytes.
size_t allocation_size(size_t bytes);

// Frees every cached block. Blocks in use are unaffected.
void release_cached_memory();
// Upper bound of the cache (default 2 GiB; 0 under AddressSanitizer, so ASan sees every free); a
// block freed beyond it goes back to the system.
void set_cache_limit(size_t bytes);
size_t cache_limit();

}  // namespace hg
