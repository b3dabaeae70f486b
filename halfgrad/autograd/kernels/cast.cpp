// load_f32/store_rounded: the dtype boundary of every op, on top of the precision conversion kernels.
#include "halfgrad/autograd/kernels/cast.h"

#include <cstring>
#include <span>

#include "halfgrad/autograd/cast_observer.h"
#include "halfgrad/precision/convert.h"

namespace hg::kernels {

// Both return at once for n = 0: a zero-element tensor's values live in an empty std::vector
// whose data() may be null, and memcpy (like the span constructors) needs valid pointers even
// for zero bytes.
void load_f32(float* dst, const void* src, DType dtype, int64_t offset, int64_t n) {
  if (n == 0) return;
  if (dtype == DType::f32) {
    std::memcpy(dst, static_cast<const float*>(src) + offset, size_t(n) * sizeof(float));
    return;
  }
  precision::decode(storage_format(dtype),
                    std::span<const uint16_t>(static_cast<const uint16_t*>(src) + offset, size_t(n)),
                    std::span<float>(dst, size_t(n)));
}

void store_rounded(void* dst, DType dtype, int64_t offset, const float* src, int64_t n,
                   const precision::RoundingOptions& rounding, uint64_t seed, uint64_t stochastic_index) {
  if (n == 0) return;
  if (dtype == DType::f32) {
    std::memcpy(static_cast<float*>(dst) + offset, src, size_t(n) * sizeof(float));
    return;
  }
  const std::span<const float> values(src, size_t(n));
  const std::span<uint16_t> bits(static_cast<uint16_t*>(dst) + offset, size_t(n));
  precision::ConvertOptions options{.rounding = rounding, .seed = seed, .offset = stochastic_index};
  CastObserver* const observer = cast_observer();
  if (observer == nullptr) {
    precision::encode(storage_format(dtype), values, bits, options);
    return;
  }
  // The same bits: encode's counting path is equal bit for bit to its fast paths.
  precision::NumericsStats stats;
  options.stats = &stats;
  precision::encode(storage_format(dtype), values, bits, options);
  observer->add(stats);
}

namespace {

// Counts the elements whose exponent field (`mask`) is all ones; a count, not an early exit,
// so the loop has no branch and vectorises.
template <typename Bits>
bool no_all_ones_exponent(const void* data, int64_t n, Bits mask) {
  const Bits* bits = static_cast<const Bits*>(data);
  int64_t non_finite = 0;
  for (int64_t i = 0; i < n; ++i) non_finite += (bits[i] & mask) == mask;
  return non_finite == 0;
}

}  // namespace

bool all_finite(const void* data, DType dtype, int64_t n) {
  switch (dtype) {
    case DType::f32:
      return no_all_ones_exponent<uint32_t>(data, n, 0x7F800000u);
    case DType::f16:
      return no_all_ones_exponent<uint16_t>(data, n, 0x7C00u);
    case DType::bf16:
      return no_all_ones_exponent<uint16_t>(data, n, 0x7F80u);
  }
  return false;
}

}  // namespace hg::kernels
