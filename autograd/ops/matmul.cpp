// matmul and linear on the packed GEMM (kernels/gemm.h). Inputs are read in their stored dtype
// and widened while packing; the f32 result is rounded once into the output dtype. Backward
// passes transposed operands to the GEMM instead of materialising transposes. The accumulation
// (autocast.h) is read when the forward runs and captured for backward, so both use the mode of
// the region that ran the forward.
#include "autograd/ops/matmul.h"

#include <algorithm>
#include <vector>

#include "autograd/autocast.h"
#include "autograd/fp8_scaling.h"
#include "autograd/kernels/gemm.h"
#include "autograd/rounding_scope.h"
#include "autograd/tape.h"
#include "base/error.h"
#include "base/parallel.h"

namespace hg {
namespace {

using kernels::GemmOperand;

GemmOperand operand(const Tensor& t, int64_t ld, bool transposed, int64_t batch_stride = 0) {
  return {t.bytes(), t.dtype(), ld, transposed, batch_stride};
}

// An f32 scratch result of `shape`, rounded once into a tensor of `dtype` by finish().
struct Result {
  Tensor f32;
  Result(const Shape& shape) : f32(Tensor::empty(shape, DType::f32)) {}
  float* data() { return f32.data<float>(); }
  Tensor finish(DType dtype) const { return dtype == DType::f32 ? f32 : round_scoped(f32.f32(), f32.shape(), dtype); }
};

// Leading (batch) dims of a (..., R, C) shape and their product.
// A product, not numel / (R * C): that division gives 0 batches for an empty (2, 0) matrix,
// whose (2, N) product is a sum over nothing (zeros) that must still be written.
int64_t batch_of(const Shape& s) {
  int64_t batch = 1;
  for (int d = 0; d + 2 < s.ndim(); ++d) batch *= s[d];
  return batch;
}

}  // namespace

namespace {

// a @ op(b), op(b) = b or b^T: the one implementation of matmul and matmul_transposed.
// Stored b is (K, N), or (N, K) when transposed; a 2-D b is shared by every batch of a.
Tensor matmul_impl(const Tensor& a0, const Tensor& b0, bool tb, const char* op) {
  check(a0.ndim() >= 2 && b0.ndim() >= 2, op, ": needs 2-D or batched operands, got ", a0.shape(), " and ", b0.shape());
  const int64_t m = a0.shape()[-2], k = a0.shape()[-1], n = tb ? b0.shape()[-2] : b0.shape()[-1];
  check((tb ? b0.shape()[-1] : b0.shape()[-2]) == k, op, ": inner dims differ: ", a0.shape(), " and ", b0.shape());
  const bool shared_b = b0.ndim() == 2;  // one B for every batch of A: one tall GEMM
  check(shared_b || (a0.ndim() == b0.ndim() && a0.shape().with(-1, 1).with(-2, 1) == b0.shape().with(-1, 1).with(-2, 1)),
        op, ": batch dims differ: ", a0.shape(), " and ", b0.shape());
  const DType dtype = autocast_dtype(CastPolicy::kLowerPrecision, {a0, b0});
  const Tensor a = autocast_input(a0, dtype), b = autocast_input(b0, dtype);
  const int64_t batch = batch_of(a.shape()), ldb = tb ? k : n;
  const kernels::GemmOptions sums{.accumulation = active_accumulation()};
  Result y(a.shape().with(-1, n));
  if (shared_b) {
    kernels::gemm(y.data(), n, operand(a, k, false), operand(b, ldb, tb), batch * m, n, k, sums);
  } else {
    kernels::gemm_batched(y.data(), n, m * n, operand(a, k, false, m * k), operand(b, ldb, tb, k * n), batch, m, n, k,
                          sums);
  }
  return record(op, y.finish(dtype), {a, b}, [a, b, batch, m, n, k, shared_b, tb, ldb, sums](const Tensor& dy) {
    if (a.requires_grad()) {  // dA (M,K) = dY (M,N) op(B)^T
      Result da(a.shape());
      if (shared_b) {
        kernels::gemm(da.data(), k, operand(dy, n, false), operand(b, ldb, !tb), batch * m, k, n, sums);
      } else {
        kernels::gemm_batched(da.data(), k, m * k, operand(dy, n, false, m * n), operand(b, ldb, !tb, k * n), batch, m,
                              k, n, sums);
      }
      accumulate_grad(a, da.finish(a.dtype()));
    }
    if (b.requires_grad()) {  // d op(B) (K,N) = A^T dY; stored transposed: dB (N,K) = dY^T A
      Result db(b.shape());
      const GemmOperand lhs = tb ? operand(dy, n, true, m * n) : operand(a, k, true, m * k);
      const GemmOperand rhs = tb ? operand(a, k, false, m * k) : operand(dy, n, false, m * n);
      const int64_t rows = tb ? n : k, cols = tb ? k : n;
      if (shared_b) {  // summed over the batch: one GEMM over all batch rows
        kernels::gemm(db.data(), cols, lhs, rhs, rows, cols, batch * m, sums);
      } else {
        kernels::gemm_batched(db.data(), cols, k * n, lhs, rhs, batch, rows, cols, m, sums);
      }
      accumulate_grad(b, db.finish(b.dtype()));
    }
  });
}

}  // namespace

Tensor matmul(const Tensor& a, const Tensor& b) { return matmul_impl(a, b, false, "matmul"); }
Tensor matmul_transposed(const Tensor& a, const Tensor& b) { return matmul_impl(a, b, true, "matmul_transposed"); }

namespace {

// linear under fp8 scaling (autograd/fp8_scaling.h): x and W cast to fp8 from their stored
// values (no autocast rounding first), one f32 GEMM of the fp8 values, the result times
// scale_inv_x * scale_inv_w (one f32 product) plus the bias in f32, rounded once into the
// autocast dtype. Backward casts dY with the grad_output scale and multiplies it with the same
// fp8 x and W (TE's dgrad and wgrad GEMMs); the bias gradient sums the unquantized dY, as TE's
// fused cast + bgrad kernel does.
Tensor linear_fp8(const std::shared_ptr<Fp8Scaling>& fp8, const Tensor& x0, const Tensor& w0, const Tensor& bias0,
                  int64_t rows, int64_t in, int64_t out) {
  const DType dtype = autocast_dtype(CastPolicy::kLowerPrecision, {x0, w0, bias0});
  const Tensor bias = bias0.defined() ? autocast_input(bias0, dtype) : Tensor();
  const std::string key = Fp8Scaling::key_of(w0);
  const Fp8Operand x = fp8->quantize(key, Fp8Role::kInput, x0, grad_enabled());
  const Fp8Operand w = fp8->quantize(key, Fp8Role::kWeight, w0, grad_enabled());
  Result y(x0.shape().with(-1, out));
  kernels::gemm(y.data(), out, operand(x.values, in, false), operand(w.values, in, true), rows, out, in);
  const float scale_inv = x.scale_inv * w.scale_inv;
  const std::vector<float> b = bias.defined() ? bias.to_vector() : std::vector<float>(size_t(out), 0.0f);
  float* yd = y.data();
  maybe_parallel(use_team(rows * out, kParallelElements), [&] {
#pragma omp for schedule(static)
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t c = 0; c < out; ++c) yd[r * out + c] = yd[r * out + c] * scale_inv + b[size_t(c)];
    }
  });
  // Recorded on x0 and W0 themselves: their gradients skip the autocast casts.
  return record("linear", y.finish(dtype), {x0, w0, bias}, [fp8, key, x, w, x0, w0, bias, rows, in,
                                                            out](const Tensor& dy) {
    const Fp8Operand g = fp8->quantize(key, Fp8Role::kGradOutput, dy, /*record_amax=*/true);
    auto scaled = [](Result& r, float scale_inv) {  // the GEMM of fp8 values -> the product's scale
      float* d = r.data();
      for (int64_t i = 0, n = r.f32.numel(); i < n; ++i) d[i] *= scale_inv;
    };
    if (x0.requires_grad()) {  // dX (R,in) = dY (R,out) W (out,in)
      Result dx(x0.shape());
      kernels::gemm(dx.data(), in, operand(g.values, out, false), operand(w.values, in, false), rows, in, out);
      scaled(dx, g.scale_inv * w.scale_inv);
      accumulate_grad(x0, dx.finish(x0.dtype()));
    }
    if (w0.requires_grad()) {  // dW (out,in) = dY^T (out,R) X (R,in)
      Result dw(w0.shape());
      kernels::gemm(dw.data(), in, operand(g.values, out, true), operand(x.values, in, false), out, in, rows);
      scaled(dw, g.scale_inv * x.scale_inv);
      accumulate_grad(w0, dw.finish(w0.dtype()));
    }
    if (bias.defined()) accumulate_grad(bias, dy);
  });
}

}  // namespace

Tensor linear(const Tensor& x0, const Tensor& w0, const Tensor& bias0) {
  check(w0.ndim() == 2 && x0.ndim() >= 1 && x0.shape()[-1] == w0.shape()[1], "linear: input ",
        x0.shape(), " does not match weight ", w0.shape(), " (out_features, in_features)");
  const int64_t in = w0.shape()[1], out = w0.shape()[0], rows = x0.numel() / std::max<int64_t>(1, in);
  check(!bias0.defined() || (bias0.ndim() == 1 && bias0.shape()[0] == out), "linear: bias ",
        bias0.defined() ? bias0.shape() : Shape(), " does not match weight ", w0.shape());
  if (std::shared_ptr<Fp8Scaling> fp8 = active_fp8()) return linear_fp8(fp8, x0, w0, bias0, rows, in, out);
  const DType dtype = autocast_dtype(CastPolicy::kLowerPrecision, {x0, w0, bias0});
  const Tensor x = autocast_input(x0, dtype), w = autocast_input(w0, dtype);
  const Tensor bias = bias0.defined() ? autocast_input(bias0, dtype) : Tensor();
  const Accumulation accumulation = active_accumulation();
  Result y(x.shape().with(-1, out));
  // The bias is where each f32 chain starts, before the single rounding (addmm).
  const std::vector<float> b = bias.defined() ? bias.to_vector() : std::vector<float>();
  kernels::gemm(y.data(), out, operand(x, in, false), operand(w, in, true), rows, out, in,
                {.accumulation = accumulation, .bias = bias.defined() ? b.data() : nullptr});
  return record("linear", y.finish(dtype), {x, w, bias}, [x, w, bias, rows, in, out, accumulation](const Tensor& dy) {
    const kernels::GemmOptions sums{.accumulation = accumulation};
    if (x.requires_grad()) {  // dX (R,in) = dY (R,out) W (out,in)
      Result dx(x.shape());
      kernels::gemm(dx.data(), in, operand(dy, out, false), operand(w, in, false), rows, in, out, sums);
      accumulate_grad(x, dx.finish(x.dtype()));
    }
    if (w.requires_grad()) {  // dW (out,in) = dY^T (out,R) X (R,in)
      Result dw(w.shape());
      kernels::gemm(dw.data(), in, operand(dy, out, true), operand(x, in, false), out, in, rows, sums);
      accumulate_grad(w, dw.finish(w.dtype()));
    }
    // db (out) = dY summed over its rows: the bias was broadcast over them, and the tape sums a
    // broadcast gradient back (sum_to: column sums in f32, rounded once into the bias's dtype).
    // Under f16 accumulation the rows are summed here, in the forward's mode, as a GEMM would.
    if (bias.defined() && accumulation != Accumulation::kF32) {
      Result db(bias.shape());
      const std::vector<float> g = dy.to_vector();
      kernels::column_sums_f16(db.data(), g.data(), rows, out, out, accumulation);
      accumulate_grad(bias, db.finish(bias.dtype()));
    } else if (bias.defined()) {
      accumulate_grad(bias, dy);
    }
  });
}

}  // namespace hg
