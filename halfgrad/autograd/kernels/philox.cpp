// philox.cpp: philox_blocks (philox.h) per SIMD target. Lane j of four u32 vectors holds the
// counter words of block first + j; each round is hg::philox4x32's, lane by lane, with the
// 32x32 -> 64-bit products of even and odd lanes taken by two MulEven.
#include "halfgrad/autograd/kernels/philox.h"

#include <limits>

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "halfgrad/autograd/kernels/philox.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace hg::kernels::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// The scalar reference for `blocks` blocks from counter `first`.
void ScalarBlocks(uint32_t* HWY_RESTRICT words, uint64_t key, uint64_t first, size_t blocks) {
  for (size_t i = 0; i < blocks; ++i) {
    const uint64_t b = first + i;
    const auto block = philox4x32({uint32_t(b), uint32_t(b >> 32), 0, 0}, key);
    for (size_t w = 0; w < 4; ++w) words[4 * i + w] = block[w];
  }
}

#if HWY_TARGET == HWY_SCALAR
void PhiloxBlocksImpl(uint32_t* HWY_RESTRICT words, uint64_t key, uint64_t first, size_t blocks) {
  ScalarBlocks(words, key, first, blocks);
}
#else
// hi:lo = a * m per u32 lane (exact, 64 bits).
template <class D, class V = hn::Vec<D> >
HWY_INLINE void MulWide(D d, V a, uint32_t m, V& hi, V& lo) {
  const hn::RepartitionToWide<D> dw;
  const V mv = hn::Set(d, m);
  const auto even = hn::MulEven(a, mv);                                                      // lanes 0, 2, ...
  const auto odd = hn::MulEven(hn::BitCast(d, hn::ShiftRight<32>(hn::BitCast(dw, a))), mv);  // 1, 3, ...
  lo = hn::OddEven(hn::BitCast(d, hn::ShiftLeft<32>(odd)), hn::BitCast(d, even));
  hi = hn::OddEven(hn::BitCast(d, odd), hn::BitCast(d, hn::ShiftRight<32>(even)));
}

// kSets * Lanes blocks from counter b: kSets independent vectors per round, so that one set's
// multiplies run while another's wait (a round's chain of multiply, shuffle and xors is several
// cycles long).
template <size_t kSets>
HWY_INLINE void PhiloxVectors(uint32_t* HWY_RESTRICT words, uint64_t key, uint64_t b) {
  // Constants from the Random123 reference implementation (as in hg::philox4x32).
  constexpr uint32_t kMul0 = 0xD2511F53, kMul1 = 0xCD9E8D57;
  constexpr uint32_t kWeyl0 = 0x9E3779B9, kWeyl1 = 0xBB67AE85;
  const hn::ScalableTag<uint32_t> d;
  using V = hn::Vec<decltype(d)>;
  const size_t n = hn::Lanes(d);
  V c0[kSets], c1[kSets], c2[kSets], c3[kSets];
  for (size_t s = 0; s < kSets; ++s) {
    c0[s] = hn::Iota(d, uint32_t(b + s * n));
    c1[s] = hn::Set(d, uint32_t(b >> 32));
    c2[s] = c3[s] = hn::Zero(d);
  }
  uint32_t k0 = uint32_t(key), k1 = uint32_t(key >> 32);
  for (int round = 0; round < 10; ++round) {
    for (size_t s = 0; s < kSets; ++s) {
      V hi0, lo0, hi1, lo1;
      MulWide(d, c0[s], kMul0, hi0, lo0);
      MulWide(d, c2[s], kMul1, hi1, lo1);
      c0[s] = hn::Xor(hn::Xor(hi1, c1[s]), hn::Set(d, k0));
      c1[s] = lo1;
      c2[s] = hn::Xor(hn::Xor(hi0, c3[s]), hn::Set(d, k1));
      c3[s] = lo0;
    }
    k0 += kWeyl0;
    k1 += kWeyl1;
  }
  for (size_t s = 0; s < kSets; ++s) hn::StoreInterleaved4(c0[s], c1[s], c2[s], c3[s], d, words + 4 * s * n);
}

// Blocks [i, blocks) from counter first + i in groups of kSets vectors while whole groups fit;
// returns where it stopped. A group whose counters' low words wrap carries into the high word:
// rare (once every 2^32 blocks), so done by the reference.
template <size_t kSets>
HWY_INLINE size_t PhiloxGroups(uint32_t* HWY_RESTRICT words, uint64_t key, uint64_t first, size_t blocks, size_t i) {
  const size_t group = kSets * hn::Lanes(hn::ScalableTag<uint32_t>());
  for (; i + group <= blocks; i += group) {
    const uint64_t b = first + i;
    if (uint32_t(b) > std::numeric_limits<uint32_t>::max() - uint32_t(group - 1)) {
      ScalarBlocks(words + 4 * i, key, b, group);
    } else {
      PhiloxVectors<kSets>(words + 4 * i, key, b);
    }
  }
  return i;
}

void PhiloxBlocksImpl(uint32_t* HWY_RESTRICT words, uint64_t key, uint64_t first, size_t blocks) {
  size_t i = PhiloxGroups<4>(words, key, first, blocks, 0);
  i = PhiloxGroups<1>(words, key, first, blocks, i);
  ScalarBlocks(words + 4 * i, key, first + i, blocks - i);
}
#endif

}  // namespace hg::kernels::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace hg::kernels {

HWY_EXPORT(PhiloxBlocksImpl);

void philox_blocks(uint32_t* words, uint64_t key, uint64_t first, size_t blocks) {
  HWY_DYNAMIC_DISPATCH(PhiloxBlocksImpl)(words, key, first, blocks);
}

}  // namespace hg::kernels
#endif  // HWY_ONCE
