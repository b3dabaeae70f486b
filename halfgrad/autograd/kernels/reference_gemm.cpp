// The naive triple loop behind reference_gemm.h: no blocking, no SIMD, no threads.
#include "halfgrad/autograd/kernels/reference_gemm.h"

#include "halfgrad/precision/float_format.h"

namespace hg::kernels {
namespace {

// Element (r, c) of op(X), widened exactly to f32 (f16/bf16 through the integer-only decoder).
float element(const GemmOperand& x, int64_t r, int64_t c) {
  const int64_t index = x.transposed ? c * x.ld + r : r * x.ld + c;
  if (x.dtype == DType::f32) return static_cast<const float*>(x.data)[index];
  const uint16_t bits = static_cast<const uint16_t*>(x.data)[index];
  return x.dtype == DType::f16 ? precision::decode<precision::kBinary16>(bits)
                               : precision::decode<precision::kBFloat16>(bits);
}

// One matrix: op(A): (M,K), op(B): (K,N) -> C: (M,N), ldc
void reference_product(float* c, int64_t ldc, const GemmOperand& a, const GemmOperand& b, int64_t m, int64_t n,
                       int64_t k, const GemmOptions& options) {
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      double sum = options.bias != nullptr ? double(options.bias[j])
                   : options.accumulate    ? double(c[i * ldc + j])
                                           : 0.0;
      for (int64_t p = 0; p < k; ++p) sum += double(element(a, i, p)) * double(element(b, p, j));
      c[i * ldc + j] = float(sum);
      if (!options.output_scale) continue;  // the epilogue, rounded as gemm's
      c[i * ldc + j] *= *options.output_scale;
      if (options.output_bias != nullptr) c[i * ldc + j] += options.output_bias[j];
    }
  }
}

}  // namespace

// batch x [op(A): (M,K), op(B): (K,N) -> C: (M,N)]
void reference_gemm(float* c, int64_t ldc, const GemmOperand& a, const GemmOperand& b, int64_t m, int64_t n, int64_t k,
                    GemmOptions options) {
  for (int64_t i = 0; i < options.batch; ++i) {
    reference_product(c + i * options.c_batch_stride, ldc, a.member(i), b.member(i), m, n, k, options);
  }
}

}  // namespace hg::kernels
