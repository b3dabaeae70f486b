// The caching allocator behind tensor storage: size classes, reuse of freed blocks, the cache
// limit, release, and concurrent use.
#include <catch2/catch.hpp>
#include <cstdint>
#include <cstring>
#include <thread>
#include <vector>

#include "halfgrad/autograd/allocator.h"
#include "halfgrad/autograd/tensor.h"

namespace hg {

TEST_CASE("allocation sizes are 2^k x {1, 1.25, 1.5, 1.75}, wasting under 25%", "[allocator]") {
  CHECK(allocation_size(100) == 100);  // below kMinCachedBytes: not rounded, not cached
  CHECK(allocation_size(4096) == 4096);
  CHECK(allocation_size(4097) == 5120);
  CHECK(allocation_size(5120) == 5120);
  CHECK(allocation_size(7169) == 8192);
  CHECK(allocation_size(size_t(3) << 20) == size_t(3) << 20);        // 1.5 x 2^21
  CHECK(allocation_size((size_t(3) << 20) + 1) == size_t(7) << 19);  // next class: 1.75 x 2^21
  for (size_t bytes = kMinCachedBytes; bytes < (size_t(1) << 24); bytes = bytes * 9 / 7 + 13) {
    const size_t size = allocation_size(bytes);
    CHECK(size >= bytes);
    CHECK(double(size) < 1.25 * double(bytes));
  }
}

// Sets the cache limit for one test (the sanitized build starts with 0: nothing cached).
struct ScopedCacheLimit {
  size_t saved = cache_limit();
  explicit ScopedCacheLimit(size_t bytes) { set_cache_limit(bytes); }
  ~ScopedCacheLimit() {
    set_cache_limit(saved);
    release_cached_memory();
  }
};

TEST_CASE("a freed tensor's storage is reused by the next request of its size class", "[allocator]") {
  ScopedCacheLimit limit(size_t(1) << 30);
  const std::byte* first = nullptr;
  {
    Tensor a = Tensor::zeros({1000, 300});  // 1.2 MB
    first = a.bytes();
  }
  const AllocatorStats before = allocator_stats();
  CHECK(before.cached_bytes >= allocation_size(1200000));
  Tensor b = Tensor::empty({300, 1001});  // 1,201,200 bytes: the same class
  CHECK(b.bytes() == first);
  CHECK(reinterpret_cast<uintptr_t>(b.bytes()) % 64 == 0);
  const AllocatorStats after = allocator_stats();
  CHECK(after.hits == before.hits + 1);
  CHECK(after.cached_bytes == before.cached_bytes - allocation_size(1200000));
  Tensor c = Tensor::empty({1000, 300});  // the block is taken: a new one
  CHECK(c.bytes() != first);
}

TEST_CASE("release_cached_memory empties the cache and the limit bounds it", "[allocator]") {
  ScopedCacheLimit generous(size_t(1) << 30);
  { Tensor a = Tensor::empty({1 << 18}); }
  CHECK(allocator_stats().cached_bytes > 0);
  release_cached_memory();
  CHECK(allocator_stats().cached_bytes == 0);

  set_cache_limit(size_t(1) << 20);
  {
    Tensor b = Tensor::empty({1 << 18});  // 1 MiB, freed second: would exceed the limit, so not kept
    Tensor a = Tensor::empty({1 << 17});  // 512 KiB, freed first: kept
  }
  CHECK(allocator_stats().cached_bytes == size_t(1) << 19);
}

TEST_CASE("peak_in_use_bytes is the high-water mark of the blocks in use", "[allocator]") {
  reset_peak_in_use();
  const size_t base = allocator_stats().in_use_bytes;
  CHECK(allocator_stats().peak_in_use_bytes == base);
  {
    Tensor a = Tensor::empty({1 << 18});  // 1 MiB: a class of its own
    Tensor b = Tensor::empty({1 << 17});  // 512 KiB
  }
  Tensor c = Tensor::empty({1 << 16});  // 256 KiB, after both were freed: the peak stays
  CHECK(allocator_stats().peak_in_use_bytes == base + (size_t(3) << 19));
  reset_peak_in_use();
  CHECK(allocator_stats().peak_in_use_bytes == base + (size_t(1) << 18));
}

TEST_CASE("tensors allocated and freed on several threads at once stay intact", "[allocator]") {
  const AllocatorStats before = allocator_stats();
  std::vector<std::thread> threads;
  std::vector<int> bad(4, 0);
  for (int id = 0; id < 4; ++id) {
    threads.emplace_back([id, &bad] {
      for (int i = 0; i < 200; ++i) {
        Tensor t = Tensor::full({int64_t(1024 + 256 * (i % 5))}, float(id * 1000 + i));
        Tensor u = Tensor::empty({2048});
        std::memset(u.bytes(), 0xFF, u.nbytes());  // scribble on a block another thread may reuse
        for (float v : t.f32()) bad[size_t(id)] += v != float(id * 1000 + i);
      }
    });
  }
  for (auto& t : threads) t.join();
  CHECK(bad == std::vector<int>(4, 0));
  CHECK(allocator_stats().in_use_bytes == before.in_use_bytes);
}

}  // namespace hg
