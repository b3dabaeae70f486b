// matmul and linear on the packed GEMM (kernels/gemm.h). Inputs are read in their stored dtype
// and widened while packing; the f32 result is rounded once into the output dtype. Backward
// passes transposed operands to the GEMM instead of materialising transposes. The accumulation
// (autocast.h) is read when the forward runs and captured for backward, so both use the mode of
// the region that ran the forward.
#include "halfgrad/autograd/ops/matmul.h"

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "halfgrad/autograd/allocator.h"
#include "halfgrad/autograd/autocast.h"
#include "halfgrad/autograd/fp8_scaling.h"
#include "halfgrad/autograd/kernels/gemm.h"
#include "halfgrad/autograd/rounding_scope.h"
#include "halfgrad/autograd/tape.h"
#include "halfgrad/base/error.h"
#include "halfgrad/base/parallel.h"

namespace hg {
namespace {

using kernels::GemmOperand;

GemmOperand operand(const Tensor& t, int64_t ld, bool transposed, int64_t batch_stride = 0) {
  return {t.bytes(), t.dtype(), ld, transposed, batch_stride};
}

// An f32 scratch result of `shape`, rounded once into a tensor of `dtype` by finish(). When that
// dtype is narrower (f16, bf16: the f32 values are dropped after the rounding) the scratch is this
// thread's reusable buffer rather than a new tensor: attention's (B, H, T, T) products are 30-70
// MB in f32, and fresh blocks of that size, a different one for each batch length T, cost page
// faults (the kernel zeroing new pages was a fifth of a langid transformer step). One buffer per
// thread, taken by one Result at a time (a second one meanwhile gets a tensor).
// From the caching allocator (2 MiB pages for large blocks), grown without copying or zeroing.
thread_local std::shared_ptr<std::byte> result_buffer;
thread_local size_t result_buffer_size = 0;  // in floats
thread_local bool result_buffer_taken = false;

struct Result {
  Tensor f32;  // the result when it is f32, or while the buffer is taken
  Shape shape;
  float* values = nullptr;
  bool borrowed = false;

  explicit Result(const Shape& s, DType out = DType::f32) : shape(s) {
    if (out != DType::f32 && !result_buffer_taken) {
      if (result_buffer_size < size_t(s.numel())) {
        result_buffer.reset();
        const size_t bytes = allocation_size(size_t(s.numel()) * sizeof(float));  // the whole size class
        result_buffer = allocate_storage(bytes);
        result_buffer_size = bytes / sizeof(float);
      }
      values = reinterpret_cast<float*>(result_buffer.get());
      borrowed = result_buffer_taken = true;
    } else {
      f32 = Tensor::empty(s, DType::f32);
      values = f32.data<float>();
    }
  }
  ~Result() {
    if (borrowed) result_buffer_taken = false;
  }
  Result(const Result&) = delete;
  Result& operator=(const Result&) = delete;
  float* data() { return values; }
  int64_t numel() const { return shape.numel(); }
  Tensor finish(DType dtype) const {
    if (!borrowed && dtype == DType::f32) return f32;
    return round_scoped(std::span<const float>(values, size_t(shape.numel())), shape, dtype);
  }
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

// Where the matrices of a batched product sit in a tensor: matrix (i, j) of an (outer x inner)
// grid starts at element i * outer + j * inner, its rows ld apart. A contiguous (..., R, C) batch
// is one row of the grid (inner = R * C); attention's heads in a (B, T, H*D) tensor are outer =
// T*H*D (a batch element), inner = D (a head), ld = H*D.
struct Layout {
  int64_t outer = 0, inner = 0, ld = 0;
};

// Row i of the grid of `t`'s matrices, as a batched gemm reads it.
GemmOperand grid_row(const Tensor& t, const Layout& l, bool transposed, int64_t i) {
  return {t.bytes() + i * l.outer * static_cast<int64_t>(element_size(t.dtype())), t.dtype(), l.ld, transposed,
          l.inner};
}

// Per row i of a grid, a bound on each of a product's three dims (m, n, k), for attention over a
// padded batch (matmul_heads*'s key_lengths): empty, or one value per grid row (values >= the dim
// leave it whole).
struct Limits {
  const std::vector<int64_t>* m = nullptr;
  const std::vector<int64_t>* n = nullptr;
  const std::vector<int64_t>* k = nullptr;
  static int64_t at(const std::vector<int64_t>* l, int64_t i, int64_t dim) {
    return l == nullptr ? dim : std::min(dim, (*l)[size_t(i)]);
  }
};

// C_ij = op(A_ij) op(B_ij) over an (outer x inner) grid: one batched gemm call over j for each i
// (a single batch stride cannot step over both). With enough rows for the team the rows are
// shared out and each call runs on its thread; otherwise each call threads over its matrices.
// Every element is one GEMM chain either way, so the bits do not depend on the threads.
// With limits, row i computes the leading (m_i, n_i) block over the first k_i terms and sets
// the rest of its C matrices to 0.
void gemm_grid(float* c, const Layout& lc, const Tensor& a, const Layout& la, bool ta, const Tensor& b,
               const Layout& lb, bool tb, int64_t outer, int64_t inner, int64_t m, int64_t n, int64_t k,
               const kernels::GemmOptions& sums, const Limits& limits = {}) {
  const auto row = [&](int64_t i) {
    const int64_t mi = Limits::at(limits.m, i, m), ni = Limits::at(limits.n, i, n), ki = Limits::at(limits.k, i, k);
    float* const ci = c + i * lc.outer;
    kernels::GemmOptions batch = sums;
    batch.batch = inner;
    batch.c_batch_stride = lc.inner;
    kernels::gemm(ci, lc.ld, grid_row(a, la, ta, i), grid_row(b, lb, tb, i), mi, ni, ki, batch);
    if (mi == m && ni == n) return;
    for (int64_t j = 0; j < inner; ++j) {
      for (int64_t r = 0; r < m; ++r) {
        float* const line = ci + j * lc.inner + r * lc.ld;
        std::fill(line + (r < mi ? ni : 0), line + n, 0.0f);
      }
    }
  };
  const int team =
      outer > 1 ? team_size(2.0 * double(m) * double(n) * double(k) * double(outer * inner), kParallelFlops) : 1;
  if (team > 1 && (outer % team == 0 || outer >= 4 * team)) {
#pragma omp parallel for num_threads(team) schedule(static)
    for (int64_t i = 0; i < outer; ++i) row(i);
  } else {
    for (int64_t i = 0; i < outer; ++i) row(i);
  }
}

// y = A op(B), op(B) = B or B^T, over a grid of matrices (M,K) x op(B)(K,N) -> (M,N) in the given
// layouts, recorded with its backward: dA = dY op(B)^T in A's layout, d op(B) = A^T dY in B's.
// The one implementation of matmul, matmul_transposed and the head products. `limits` bound
// (m, n, k) per grid row: the function computed is the product of the leading blocks, zeros
// elsewhere, and its backward is that function's (the same bounds, mapped onto each product).
Tensor grid_product(const char* op, const Tensor& a0, const Layout& la, const Tensor& b0, const Layout& lb, bool tb,
                    const Shape& y_shape, const Layout& ly, int64_t outer, int64_t inner, int64_t m, int64_t n,
                    int64_t k, std::shared_ptr<const std::vector<int64_t>> bound = nullptr, char bound_dim = 0) {
  const DType dtype = autocast_dtype(CastPolicy::kLowerPrecision, {a0, b0});
  const Tensor a = autocast_input(a0, dtype), b = autocast_input(b0, dtype);
  const kernels::GemmOptions sums{.accumulation = active_accumulation(), .bf16_dot = active_bf16_dot()};
  const std::vector<int64_t>* const lm = bound_dim == 'm' ? bound.get() : nullptr;
  const std::vector<int64_t>* const ln = bound_dim == 'n' ? bound.get() : nullptr;
  const std::vector<int64_t>* const lk = bound_dim == 'k' ? bound.get() : nullptr;
  Result y(y_shape, dtype);
  gemm_grid(y.data(), ly, a, la, false, b, lb, tb, outer, inner, m, n, k, sums, {lm, ln, lk});
  return record(op, y.finish(dtype), {a, b},
                [a, la, b, lb, tb, ly, outer, inner, m, n, k, sums, bound, lm, ln, lk](const Tensor& dy) {
                  if (a.requires_grad()) {  // dA (M,K) = dY (M,N) op(B)^T
                    Result da(a.shape(), a.dtype());
                    gemm_grid(da.data(), la, dy, ly, false, b, lb, !tb, outer, inner, m, k, n, sums, {lm, lk, ln});
                    accumulate_grad(a, da.finish(a.dtype()));
                  }
                  if (b.requires_grad()) {  // d op(B) (K,N) = A^T dY; stored transposed: dB (N,K) = dY^T A
                    Result db(b.shape(), b.dtype());
                    if (tb) {
                      gemm_grid(db.data(), lb, dy, ly, true, a, la, false, outer, inner, n, k, m, sums, {ln, lk, lm});
                    } else {
                      gemm_grid(db.data(), lb, a, la, true, dy, ly, false, outer, inner, k, n, m, sums, {lk, ln, lm});
                    }
                    accumulate_grad(b, db.finish(b.dtype()));
                  }
                });
}

// a @ op(b), op(b) = b or b^T: matmul and matmul_transposed.
// Stored b is (K, N), or (N, K) when transposed; a 2-D b is shared by every batch of a.
Tensor matmul_impl(const Tensor& a, const Tensor& b, bool tb, const char* op) {
  check(a.ndim() >= 2 && b.ndim() >= 2, op, ": needs 2-D or batched operands, got ", a.shape(), " and ", b.shape());
  const int64_t m = a.shape()[-2], k = a.shape()[-1], n = tb ? b.shape()[-2] : b.shape()[-1];
  check((tb ? b.shape()[-1] : b.shape()[-2]) == k, op, ": inner dims differ: ", a.shape(), " and ", b.shape());
  const bool shared_b = b.ndim() == 2;
  check(shared_b || (a.ndim() == b.ndim() && a.shape().with(-1, 1).with(-2, 1) == b.shape().with(-1, 1).with(-2, 1)),
        op, ": batch dims differ: ", a.shape(), " and ", b.shape());
  const int64_t batch = batch_of(a.shape()), ldb = tb ? k : n;
  if (shared_b) {  // one B for every batch of A: one tall GEMM over all batch rows, forward and backward
    return grid_product(op, a, {0, 0, k}, b, {0, 0, ldb}, tb, a.shape().with(-1, n), {0, 0, n}, 1, 1, batch * m, n, k);
  }
  return grid_product(op, a, {0, m * k, k}, b, {0, k * n, ldb}, tb, a.shape().with(-1, n), {0, m * n, n}, 1, batch, m,
                      n, k);
}

}  // namespace

Tensor matmul(const Tensor& a, const Tensor& b) { return matmul_impl(a, b, false, "matmul"); }
Tensor matmul_transposed(const Tensor& a, const Tensor& b) { return matmul_impl(a, b, true, "matmul_transposed"); }

// Head h of row (b, t) of a (B, T, H*D) tensor is columns [h*D, (h+1)*D): its (T, D) matrix starts
// at b*T*H*D + h*D, rows H*D apart. A (B, H, Tq, Tk) tensor's (b, h) matrix is contiguous.
namespace {

std::shared_ptr<const std::vector<int64_t>> checked_key_lengths(const std::vector<int64_t>& key_lengths, int64_t b,
                                                                const char* op) {
  if (key_lengths.empty()) return nullptr;
  check(int64_t(key_lengths.size()) == b, op, ": ", key_lengths.size(), " key lengths for a batch of ", b);
  for (const int64_t l : key_lengths) check(l >= 0, op, ": key length ", l, " < 0");
  return std::make_shared<const std::vector<int64_t>>(key_lengths);
}

}  // namespace

Tensor matmul_heads_transposed(const Tensor& q, const Tensor& k, int64_t heads,
                               const std::vector<int64_t>& key_lengths) {
  check(q.ndim() == 3 && k.ndim() == 3 && q.shape()[0] == k.shape()[0] && q.shape()[2] == k.shape()[2],
        "matmul_heads_transposed: q and k must be (B, T, H*D) with one B and H*D, got ", q.shape(), " and ", k.shape());
  const int64_t b = q.shape()[0], tq = q.shape()[1], tk = k.shape()[1], c = q.shape()[2];
  check(heads > 0 && c % heads == 0, "matmul_heads_transposed: ", heads, " heads do not divide q's ", c, " columns");
  const int64_t d = c / heads;
  return grid_product("matmul_heads_transposed", q, {tq * c, d, c}, k, {tk * c, d, c}, true, {b, heads, tq, tk},
                      {heads * tq * tk, tq * tk, tk}, b, heads, tq, tk, d,
                      checked_key_lengths(key_lengths, b, "matmul_heads_transposed"), 'n');
}

Tensor matmul_heads(const Tensor& p, const Tensor& v, const std::vector<int64_t>& key_lengths) {
  check(p.ndim() == 4 && v.ndim() == 3 && p.shape()[0] == v.shape()[0] && p.shape()[3] == v.shape()[1] &&
            p.shape()[1] > 0 && v.shape()[2] % p.shape()[1] == 0,
        "matmul_heads: p must be (B, H, Tq, Tk) and v (B, Tk, H*D), got ", p.shape(), " and ", v.shape());
  const int64_t b = p.shape()[0], heads = p.shape()[1], tq = p.shape()[2], tk = p.shape()[3], c = v.shape()[2];
  const int64_t d = c / heads;
  return grid_product("matmul_heads", p, {heads * tq * tk, tq * tk, tk}, v, {tk * c, d, c}, false, {b, tq, c},
                      {tq * c, d, c}, b, heads, tq, d, tk, checked_key_lengths(key_lengths, b, "matmul_heads"), 'k');
}

namespace {

// linear's GEMM operands: the autocast casts of x and W (scale 1), or under fp8 scaling
// (fp8_scaling.h) their fp8 casts from the stored values (no autocast rounding first) with TE's
// scale_inv; and the tensors their gradients go to (the casts, or x and W themselves: fp8
// gradients skip the autocast casts).
struct LinearOperands {
  Tensor x, w;  // what the GEMMs read
  float x_scale_inv = 1, w_scale_inv = 1;
  Tensor x_grad_to, w_grad_to;      // recorded inputs
  std::shared_ptr<Fp8Scaling> fp8;  // null: no fp8
  std::string key;                  // the fp8 scales' key (Fp8Scaling::key_of)
};

LinearOperands linear_operands(const Tensor& x0, const Tensor& w0, DType dtype) {
  std::shared_ptr<Fp8Scaling> fp8 = active_fp8();
  if (!fp8) {
    const Tensor x = autocast_input(x0, dtype), w = autocast_input(w0, dtype);
    return {x, w, 1, 1, x, w, nullptr, {}};
  }
  std::string key = Fp8Scaling::key_of(w0);
  const Fp8Operand x = fp8->quantize(key, Fp8Role::kInput, x0, grad_enabled());
  const Fp8Operand w = fp8->quantize(key, Fp8Role::kWeight, w0, grad_enabled());
  return {x.values, w.values, x.scale_inv, w.scale_inv, x0, w0, std::move(fp8), std::move(key)};
}

// The GEMM options of a product of operands with scale_inv `scale` (1: unscaled, no epilogue).
kernels::GemmOptions linear_gemm_options(kernels::GemmOptions sums, bool fp8, float scale) {
  if (fp8) sums.output_scale = scale;
  return sums;
}

// linear's backward from dY: dX = dY W, dW = dY^T X and the bias's row sums. Under fp8, dY is cast
// with the grad_output scale first (TE's dgrad and wgrad GEMMs) and the bias gradient sums the
// unquantized dY, as TE's fused cast + bgrad kernel does.
void linear_backward(const LinearOperands& p, const Tensor& bias, const Tensor& dy, int64_t rows, int64_t in,
                     int64_t out, const kernels::GemmOptions& sums) {
  const Fp8Operand g =
      p.fp8 ? p.fp8->quantize(p.key, Fp8Role::kGradOutput, dy, /*record_amax=*/true) : Fp8Operand{dy, 1};
  if (p.x_grad_to.requires_grad()) {  // dX (R,in) = dY (R,out) W (out,in)
    Result dx(p.x_grad_to.shape(), p.x_grad_to.dtype());
    kernels::gemm(dx.data(), in, operand(g.values, out, false), operand(p.w, in, false), rows, in, out,
                  linear_gemm_options(sums, p.fp8 != nullptr, g.scale_inv * p.w_scale_inv));
    accumulate_grad(p.x_grad_to, dx.finish(p.x_grad_to.dtype()));
  }
  if (p.w_grad_to.requires_grad()) {  // dW (out,in) = dY^T (out,R) X (R,in)
    Result dw(p.w_grad_to.shape(), p.w_grad_to.dtype());
    kernels::gemm(dw.data(), in, operand(g.values, out, true), operand(p.x, in, false), out, in, rows,
                  linear_gemm_options(sums, p.fp8 != nullptr, g.scale_inv * p.x_scale_inv));
    accumulate_grad(p.w_grad_to, dw.finish(p.w_grad_to.dtype()));
  }
  // db (out) = dY summed over its rows: the bias was broadcast over them, and the tape sums a
  // broadcast gradient back (sum_to: column sums in f32, rounded once into the bias's dtype).
  // Under f16 accumulation the rows are summed here, in the forward's mode, as a GEMM would.
  if (bias.defined() && sums.accumulation != Accumulation::kF32) {
    Result db(bias.shape());
    const std::vector<float> gv = dy.to_vector();
    kernels::column_sums_f16(db.data(), gv.data(), rows, out, out, sums.accumulation);
    accumulate_grad(bias, db.finish(bias.dtype()));
  } else if (bias.defined()) {
    accumulate_grad(bias, dy);
  }
}

}  // namespace

// y = x W^T + b: one GEMM whose f32 chains start at the bias (addmm), rounded once into the
// autocast dtype. Under fp8 the GEMM of the fp8 values is scaled by scale_inv_x * scale_inv_w
// (one f32 product) and the bias added after it in f32 (TE's fp8 GEMM epilogue).
Tensor linear(const Tensor& x0, const Tensor& w0, const Tensor& bias0) {
  check(w0.ndim() == 2 && x0.ndim() >= 1 && x0.shape()[-1] == w0.shape()[1], "linear: input ", x0.shape(),
        " does not match weight ", w0.shape(), " (out_features, in_features)");
  const int64_t in = w0.shape()[1], out = w0.shape()[0], rows = x0.numel() / std::max<int64_t>(1, in);
  check(!bias0.defined() || (bias0.ndim() == 1 && bias0.shape()[0] == out), "linear: bias ",
        bias0.defined() ? bias0.shape() : Shape(), " does not match weight ", w0.shape());
  const DType dtype = autocast_dtype(CastPolicy::kLowerPrecision, {x0, w0, bias0});
  const LinearOperands p = linear_operands(x0, w0, dtype);
  const Tensor bias = bias0.defined() ? autocast_input(bias0, dtype) : Tensor();
  const kernels::GemmOptions sums{.accumulation = active_accumulation(), .bf16_dot = active_bf16_dot()};
  const bool fp8 = p.fp8 != nullptr;
  // The bias: the chains' start, or (fp8) the epilogue's addend, 0 without a bias as TE adds it.
  const std::vector<float> b = bias.defined() ? bias.to_vector() : std::vector<float>(fp8 ? size_t(out) : 0, 0.0f);
  kernels::GemmOptions forward = linear_gemm_options(sums, fp8, p.x_scale_inv * p.w_scale_inv);
  (fp8 ? forward.output_bias : forward.bias) = b.empty() ? nullptr : b.data();
  Result y(x0.shape().with(-1, out), dtype);
  kernels::gemm(y.data(), out, operand(p.x, in, false), operand(p.w, in, true), rows, out, in, forward);
  return record(
      "linear", y.finish(dtype), {p.x_grad_to, p.w_grad_to, bias},
      [p, bias, rows, in, out, sums](const Tensor& dy) { linear_backward(p, bias, dy, rows, in, out, sums); });
}

}  // namespace hg
