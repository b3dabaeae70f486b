// The caching allocator behind tensor storage: a freed block of at least kMinCachedBytes goes onto
// a free list of its size class (2^k x {1, 1.25, 1.5, 1.75}) and the next request of that class
// reuses it, so after the first step a training step allocates nothing from the kernel.
// Thread-safe, bounded by cache_limit(). Why: docs/design_notes.md#the-caching-allocator.
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

// Blocks of at least this many bytes are backed by 2 MiB pages where the kernel allows it
// (advise_huge_pages). With 4 KiB pages a random row of a large table costs a TLB miss, a page
// walk that a VM's nested paging makes two-dimensional: a batch touching 4096 random rows of a
// 128 MiB embedding table took 5-10 ms to gather here, 0.5 ms on 2 MiB pages. 8 MiB is about
// what the second-level TLB covers with 4 KiB pages (1536-2048 entries).
constexpr size_t kHugePageMinBytes = size_t(8) << 20;

// Asks the kernel to back [data, data + bytes) with transparent huge pages (madvise
// MADV_HUGEPAGE; the 2 MiB-aligned part of the range, pages not yet touched). A hint: without
// THP, or in "never" mode, nothing changes.
void advise_huge_pages(const void* data, size_t bytes);

// Frees every cached block. Blocks in use are unaffected.
void release_cached_memory();
// Upper bound of the cache (default 2 GiB; 0 under AddressSanitizer, so ASan sees every free); a
// block freed beyond it goes back to the system.
void set_cache_limit(size_t bytes);
size_t cache_limit();

}  // namespace hg
