// Size-class free lists under one mutex (see allocator.h).
#include "halfgrad/autograd/allocator.h"

#include <algorithm>
#include <bit>
#include <mutex>
#include <new>
#include <unordered_map>
#include <vector>

#include <sys/mman.h>

namespace hg {
namespace {

constexpr std::align_val_t kAlignment{64};

// Under AddressSanitizer nothing is cached by default: a block parked on a free list is memory
// ASan considers live, so a use after free of a tensor's storage would go unreported.
#if defined(__SANITIZE_ADDRESS__)
constexpr size_t kDefaultCacheLimit = 0;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
constexpr size_t kDefaultCacheLimit = 0;
#else
constexpr size_t kDefaultCacheLimit = size_t(2) << 30;
#endif
#else
constexpr size_t kDefaultCacheLimit = size_t(2) << 30;
#endif

struct Cache {
  std::mutex mutex;
  std::unordered_map<size_t, std::vector<std::byte*>> free_blocks;  // class size -> blocks
  AllocatorStats stats;
  size_t limit = kDefaultCacheLimit;
};

// Never destroyed: tensors held by static objects may be freed after main returns.
Cache& cache() {
  static Cache* instance = new Cache;
  return *instance;
}

void release(std::byte* p, size_t size) {
  Cache& c = cache();
  {
    std::lock_guard lock(c.mutex);
    c.stats.in_use_bytes -= size;
    if (c.stats.cached_bytes + size <= c.limit) {
      c.free_blocks[size].push_back(p);
      c.stats.cached_bytes += size;
      return;
    }
  }
  ::operator delete(p, kAlignment);
}

}  // namespace

size_t allocation_size(size_t bytes) {
  if (bytes < kMinCachedBytes) return bytes;
  const size_t base = std::bit_floor(bytes), quarter = base / 4;
  return base + (bytes - base + quarter - 1) / quarter * quarter;
}

std::shared_ptr<std::byte> allocate_storage(size_t bytes) {
  if (bytes < kMinCachedBytes) {
    // At least one byte so every tensor, even an empty one, has a distinct valid pointer.
    auto* raw = static_cast<std::byte*>(::operator new(bytes ? bytes : 1, kAlignment));
    return std::shared_ptr<std::byte>(raw, [](std::byte* p) { ::operator delete(p, kAlignment); });
  }
  const size_t size = allocation_size(bytes);
  std::byte* raw = nullptr;
  Cache& c = cache();
  {
    std::lock_guard lock(c.mutex);
    c.stats.in_use_bytes += size;
    c.stats.peak_in_use_bytes = std::max(c.stats.peak_in_use_bytes, c.stats.in_use_bytes);
    auto it = c.free_blocks.find(size);
    if (it != c.free_blocks.end() && !it->second.empty()) {
      raw = it->second.back();
      it->second.pop_back();
      c.stats.cached_bytes -= size;
      ++c.stats.hits;
    } else {
      ++c.stats.misses;
    }
  }
  if (raw == nullptr) {
    raw = static_cast<std::byte*>(::operator new(size, kAlignment, std::nothrow));
    if (raw == nullptr) {
      release_cached_memory();  // the cache may hold what this request needs, in other classes
      raw = static_cast<std::byte*>(::operator new(size, kAlignment, std::nothrow));
    }
    if (raw == nullptr) {
      std::lock_guard lock(c.mutex);
      c.stats.in_use_bytes -= size;
      throw std::bad_alloc();
    }
    if (size >= kHugePageMinBytes) advise_huge_pages(raw, size);
  }
  return std::shared_ptr<std::byte>(raw, [size](std::byte* p) { release(p, size); });
}

void advise_huge_pages(const void* data, size_t bytes) {
  constexpr uintptr_t kHugePage = uintptr_t(2) << 20;
  const uintptr_t begin = (reinterpret_cast<uintptr_t>(data) + kHugePage - 1) & ~(kHugePage - 1);
  const uintptr_t end = (reinterpret_cast<uintptr_t>(data) + bytes) & ~(kHugePage - 1);
  if (end > begin) madvise(reinterpret_cast<void*>(begin), end - begin, MADV_HUGEPAGE);  // a hint: errors ignored
}

AllocatorStats allocator_stats() {
  Cache& c = cache();
  std::lock_guard lock(c.mutex);
  return c.stats;
}

void reset_peak_in_use() {
  Cache& c = cache();
  std::lock_guard lock(c.mutex);
  c.stats.peak_in_use_bytes = c.stats.in_use_bytes;
}

void release_cached_memory() {
  std::unordered_map<size_t, std::vector<std::byte*>> blocks;
  Cache& c = cache();
  {
    std::lock_guard lock(c.mutex);
    blocks.swap(c.free_blocks);
    c.stats.cached_bytes = 0;
  }
  for (auto& [size, list] : blocks) {
    for (std::byte* p : list) ::operator delete(p, kAlignment);
  }
}

void set_cache_limit(size_t bytes) {
  {
    Cache& c = cache();
    std::lock_guard lock(c.mutex);
    c.limit = bytes;
    if (c.stats.cached_bytes <= bytes) return;
  }
  release_cached_memory();
}

size_t cache_limit() {
  Cache& c = cache();
  std::lock_guard lock(c.mutex);
  return c.limit;
}

}  // namespace hg
