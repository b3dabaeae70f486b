// Tests for halfgrad/autograd/kernels/rows.h on every compiled Highway target the CPU supports: sums,
// layer_norm and softmax's backward equal their scalar twins (reference.h) bit for bit (the lane
// order is target-independent); softmax, log_softmax and log_softmax's backward agree within
// rows.h's stated tolerances; -inf and NaN rows; the lane order's accuracy against double sums.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include <omp.h>

#include "halfgrad/autograd/kernels/reference.h"
#include "halfgrad/autograd/kernels/rows.h"
#include "halfgrad/autograd/all_ops.h"
#include "halfgrad/autograd/tape.h"
#include "hwy/targets.h"

#include "tests/autograd/kernels/kernel_test_util.h"

namespace hg::kernels {

using namespace test_util;

namespace {

constexpr int64_t kWidths[] = {1, 7, 17, 67, 1000, 5000};  // 5000: past one 4096-element block

std::vector<float> random(int64_t n, uint32_t seed, float low = -3.0f, float high = 3.0f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(low, high);
  std::vector<float> x(static_cast<size_t>(n));
  for (float& v : x) v = u(rng);
  return x;
}

void check_bits(const std::vector<float>& got, const std::vector<float>& want, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    if (bits(got[size_t(i)]) != bits(want[size_t(i)])) {
      FAIL_CHECK("element " << i << " of " << n << ": got " << hex(got[size_t(i)]) << ", want "
                            << hex(want[size_t(i)]));
      return;
    }
  }
  for (size_t i = size_t(n); i < got.size(); ++i) REQUIRE(bits(got[i]) == bits(kSentinel));
}

// |got - want| <= ulps * ulp(scale[i]) for every element.
void check_close(const std::vector<float>& got, const std::vector<float>& want, const std::vector<double>& scale,
                 double ulps) {
  for (size_t i = 0; i < scale.size(); ++i) {
    if (!(std::fabs(double(got[i]) - double(want[i])) <= ulps * ulp_of(scale[i]))) {
      FAIL_CHECK("element " << i << ": got " << hex(got[i]) << ", want " << hex(want[i]) << ", scale " << scale[i]);
      return;
    }
  }
}

}  // namespace

TEST_CASE("row and column sums equal their twins bit for bit", "[simd][kernels]") {
  for_each_target([] {
    for (const int64_t c : kWidths) {
      INFO("C = " << c);
      const int64_t n = 3;
      const std::vector<float> x = random(n * c, uint32_t(c));
      std::vector<float> got = output(n), want = output(n);
      row_sums(got.data(), x.data(), n, c);
      reference::row_sums(want.data(), x.data(), n, c);
      check_bits(got, want, n);
    }
    // Columns: blocks of 256 rows cross at 600; a row stride wider than the columns; widths that
    // take tiles of 4, 2 and 1 vectors and a row-by-row rest on 4, 8 and 16 lanes.
    for (const int64_t c : {1, 7, 17, 32, 48, 67, 100}) {
      INFO("columns C = " << c);
      const int64_t rows = 600, ld = c + 3;
      const std::vector<float> x = random(rows * ld, uint32_t(c) + 1);
      std::vector<float> got = output(c), want = output(c);
      column_sums(got.data(), x.data(), rows, c, ld);
      reference::column_sums(want.data(), x.data(), rows, c, ld);
      check_bits(got, want, c);
    }
  });
}

TEST_CASE("the lane order sums as accurately as it promises", "[simd][kernels]") {
  // Error of a sum of n terms in this order: at most (n/32 + 4096/32 + 5) eps sum|x| (rows.h:
  // each partial sums <= 128 terms per block, the blocks and the 5 pairwise levels add theirs).
  const int64_t n = 100000;
  const std::vector<float> x = random(n, 9, 0.0f, 1.0f);
  double exact = 0, magnitude = 0;
  for (const float v : x) exact += v, magnitude += std::fabs(v);
  for_each_target([&] {
    float got;
    row_sums(&got, x.data(), 1, n);
    const double bound = (double(n) / 32 + 128 + 5) * 0x1p-24 * magnitude;
    CHECK(std::fabs(got - exact) <= bound);
    CHECK(std::fabs(got - exact) <= 1e-6 * magnitude);  // in practice far inside the bound
  });
}

TEST_CASE("layer_norm forward and backward equal their twins bit for bit", "[simd][kernels]") {
  for_each_target([] {
    for (const int64_t c : kWidths) {
      const int64_t n = 3;
      const std::vector<float> x = random(n * c, 1), dy = random(n * c, 2);
      const std::vector<float> w = random(c, 3, 0.5f, 1.5f), b = random(c, 4);
      for (int params = 0; params < 4; ++params) {
        INFO("C = " << c << ", weight " << (params & 1) << ", bias " << (params >> 1));
        const float* wp = params & 1 ? w.data() : nullptr;
        const float* bp = params & 2 ? b.data() : nullptr;
        std::vector<float> y = output(n * c), y_twin = output(n * c);
        std::vector<float> mean(static_cast<size_t>(n)), rstd(mean), mean_twin(mean), rstd_twin(mean);
        layer_norm_forward(y.data(), mean.data(), rstd.data(), x.data(), wp, bp, n, c, 1e-5f);
        reference::layer_norm_forward(y_twin.data(), mean_twin.data(), rstd_twin.data(), x.data(), wp, bp, n, c, 1e-5f);
        check_bits(y, y_twin, n * c);
        CHECK(mean == mean_twin);
        CHECK(rstd == rstd_twin);
        // dw, db accumulate onto what is there.
        std::vector<float> dx = output(n * c), dx_twin = output(n * c);
        std::vector<float> dw = random(c, 5), db = random(c, 6), dw_twin = dw, db_twin = db;
        layer_norm_backward(dx.data(), dw.data(), db.data(), dy.data(), x.data(), wp, mean.data(), rstd.data(), n, c);
        reference::layer_norm_backward(dx_twin.data(), dw_twin.data(), db_twin.data(), dy.data(), x.data(), wp,
                                       mean.data(), rstd.data(), n, c);
        check_bits(dx, dx_twin, n * c);
        dw.resize(dw.size() + 16, kSentinel);
        dw_twin.resize(dw.size(), kSentinel);
        db.resize(db.size() + 16, kSentinel);
        db_twin.resize(db.size(), kSentinel);
        check_bits(dw, dw_twin, c);
        check_bits(db, db_twin, c);
        // Null outputs are skipped.
        std::vector<float> dw_only(size_t(c), 0.0f), dw_only_twin(size_t(c), 0.0f);
        layer_norm_backward(nullptr, dw_only.data(), nullptr, dy.data(), x.data(), wp, mean.data(), rstd.data(), n, c);
        reference::layer_norm_backward(nullptr, dw_only_twin.data(), nullptr, dy.data(), x.data(), wp, mean.data(),
                                       rstd.data(), n, c);
        CHECK(dw_only == dw_only_twin);
      }
    }
  });
}

TEST_CASE("softmax and log_softmax agree with their twins", "[simd][kernels]") {
  for_each_target([] {
    for (const int64_t c : kWidths) {
      INFO("C = " << c);
      const int64_t n = 3;
      const std::vector<float> x = random(n * c, 11, -20.0f, 20.0f), dy = random(n * c, 12);
      std::vector<float> y = output(n * c), y_twin = output(n * c);
      // softmax: exp's <= 1 ulp per term on both sides, through the sum and the scaling.
      softmax_forward(y.data(), x.data(), n, c);
      reference::softmax_forward(y_twin.data(), x.data(), n, c);
      check_close(y, y_twin, std::vector<double>(y_twin.begin(), y_twin.begin() + n * c), 4);
      // softmax backward: IEEE operations in the same order, given the same y.
      std::vector<float> dx = output(n * c), dx_twin = output(n * c);
      softmax_backward(dx.data(), dy.data(), y_twin.data(), n, c);
      reference::softmax_backward(dx_twin.data(), dy.data(), y_twin.data(), n, c);
      check_bits(dx, dx_twin, n * c);
      // log_softmax: y = x - shift, shift = max + log(sum): 2 ulp of the larger of |x|, |shift|.
      log_softmax_forward(y.data(), x.data(), n, c);
      reference::log_softmax_forward(y_twin.data(), x.data(), n, c);
      std::vector<double> scale(static_cast<size_t>(n * c));
      for (size_t i = 0; i < scale.size(); ++i) scale[i] = std::fmax(std::fabs(x[i]), std::fabs(x[i] - y_twin[i]));
      check_close(y, y_twin, scale, 2);
      // log_softmax backward: dy - e^y sum(dy): 2 ulp of the larger of |dy|, |e^y sum(dy)|.
      log_softmax_backward(dx.data(), dy.data(), y_twin.data(), n, c);
      reference::log_softmax_backward(dx_twin.data(), dy.data(), y_twin.data(), n, c);
      for (size_t i = 0; i < scale.size(); ++i) scale[i] = std::fmax(std::fabs(dy[i]), std::fabs(dy[i] - dx_twin[i]));
      check_close(dx, dx_twin, scale, 2);
    }
  });
}

TEST_CASE("softmax with a scale and an additive mask is softmax of x scale + bias", "[simd][kernels]") {
  for_each_target([] {
    for (const int64_t c : kWidths) {
      INFO("C = " << c);
      const int64_t n = 3;
      const float s = 0.17677669f;  // 1 / sqrt(32), attention's scale for D = 32
      const std::vector<float> x = random(n * c, 13, -40.0f, 40.0f), dy = random(n * c, 14);
      std::vector<float> bias(size_t(c), 0.0f);
      for (size_t j = 0; j < bias.size(); j += 3) bias[j] = -kInf;  // every third key masked
      if (c > 1) bias[1] = 0.5f;                                    // and one finite bias
      for (const float* b : {static_cast<const float*>(nullptr), static_cast<const float*>(bias.data())}) {
        // The same bits as softmax of z = x s + bias formed first, each operation rounded.
        std::vector<float> z(size_t(n * c));
        for (size_t i = 0; i < z.size(); ++i) z[i] = b ? x[i] * s + b[i % size_t(c)] : x[i] * s;
        std::vector<float> fused = output(n * c), plain = output(n * c), twin = output(n * c);
        softmax_forward(fused.data(), x.data(), n, c, s, b);
        softmax_forward(plain.data(), z.data(), n, c);
        check_bits(fused, plain, n * c);
        reference::softmax_forward(twin.data(), x.data(), n, c, s, b);
        check_close(fused, twin, std::vector<double>(twin.begin(), twin.begin() + n * c), 4);
        for (size_t i = 0; b && i < size_t(n * c); ++i) {
          if (b[i % size_t(c)] == -kInf) CHECK(bits(fused[i]) == 0);  // masked: exactly +0
        }
      }
      // Backward with a scale: (y (dy - dot)) s, the same bits as the unscaled kernel's result
      // times s, and as the twin.
      const std::vector<float> y = random(n * c, 15, 0.0f, 1.0f);
      std::vector<float> scaled = output(n * c), unscaled = output(n * c), twin = output(n * c);
      softmax_backward(scaled.data(), dy.data(), y.data(), n, c, s);
      softmax_backward(unscaled.data(), dy.data(), y.data(), n, c);
      for (float& v : unscaled) v = v * s;
      check_bits(scaled, unscaled, n * c);
      reference::softmax_backward(twin.data(), dy.data(), y.data(), n, c, s);
      check_bits(scaled, twin, n * c);
    }
  });
}

TEST_CASE("softmax rows with -inf and NaN", "[simd][kernels]") {
  for_each_target([] {
    // 17 entries, some masked with -inf: exactly 0 there, the rest as if they were absent.
    std::vector<float> x = random(17, 21), y(17), dense(17);
    std::vector<float> kept;
    for (size_t j = 0; j < x.size(); ++j) {
      if (j % 3 == 1)
        x[j] = -kInf;
      else
        kept.push_back(x[j]);
    }
    softmax_forward(y.data(), x.data(), 1, 17);
    softmax_forward(dense.data(), kept.data(), 1, int64_t(kept.size()));
    float total = 0;
    for (size_t j = 0, k = 0; j < x.size(); ++j) {
      total += y[j];
      if (j % 3 == 1) {
        CHECK(bits(y[j]) == 0);
      } else {
        CHECK(y[j] == Approx(dense[k++]).epsilon(1e-6));
      }
    }
    CHECK(total == Approx(1.0f).epsilon(1e-6));
    // A row masked everywhere gives zeros (documented in rows.h and ops/nn.cpp), one with a NaN
    // gives NaN everywhere, and log_softmax of an all -inf row is NaN (as torch).
    std::vector<float> masked(67, -kInf), out(67, 1.0f);
    softmax_forward(out.data(), masked.data(), 1, 67);
    for (const float v : out) CHECK(bits(v) == 0);
    masked[40] = kNaN;
    softmax_forward(out.data(), masked.data(), 1, 67);
    for (const float v : out) CHECK(std::isnan(v));
    std::vector<float> with_nan = random(67, 22);
    with_nan[5] = kNaN;
    softmax_forward(out.data(), with_nan.data(), 1, 67);
    for (const float v : out) CHECK(std::isnan(v));
    masked.assign(67, -kInf);
    log_softmax_forward(out.data(), masked.data(), 1, 67);
    for (const float v : out) CHECK(std::isnan(v));
    // Zero rows, and rows of width 1.
    softmax_forward(nullptr, nullptr, 0, 5);
    const float one = 3.5f;
    float result = 0;
    softmax_forward(&result, &one, 1, 1);
    CHECK(result == 1.0f);
    log_softmax_forward(&result, &one, 1, 1);
    CHECK(result == 0.0f);
  });
}

// The ops built on these kernels split rows (and reductions) into fixed blocks: with shapes
// past the parallel threshold and several row blocks, 1 and 2 threads give the same bits, for
// f32 and for f16 inputs (widened a block at a time).
TEST_CASE("row ops and reductions give the same bits with 1 and 2 threads", "[simd][kernels]") {
  for (const DType dtype : {DType::f32, DType::f16}) {
    auto run = [dtype](int threads) {
      omp_set_num_threads(threads);
      Generator gen(7);
      Tensor x = Tensor::randn({1024, 96}, gen, dtype).set_requires_grad();
      Tensor w = Tensor::uniform({96}, gen, 0.5f, 1.5f, dtype).set_requires_grad();
      Tensor b = Tensor::uniform({96}, gen, -0.5f, 0.5f, dtype).set_requires_grad();
      Tensor h = add(gelu(layer_norm(x, w, b)), b);  // the bias add's gradient goes through sum_to
      Tensor s = softmax(h);
      Tensor loss = add(sum(mul(s, h)), mean(log_softmax(h)));
      loss = add(loss, sum(sum(mul(h, h), 0)));  // a strided sum
      backward(loss);
      std::vector<float> bits = {loss.item()};
      for (const Tensor& t : {x, w, b}) {
        const std::vector<float> v = t.grad().to_vector();
        bits.insert(bits.end(), v.begin(), v.end());
      }
      return bits;
    };
    INFO(dtype_name(dtype));
    const std::vector<float> one = run(1), two = run(2);
    omp_set_num_threads(omp_get_num_procs());
    CHECK(one == two);
  }
}

}  // namespace hg::kernels
