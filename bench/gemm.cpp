// bench_gemm: GFLOP/s of hg::kernels::gemm (f32, f16 and bf16 inputs, f32 output) beside
// OpenBLAS sgemm on the same shapes and thread counts; one JSON object per line on stdout, with
// the median ("gflops") and best ("gflops_best") of --reps timed calls after 2 warm-up calls.
// "bf16" is the exact f32 path; "bf16-dot" the VDPBF16PS kernel (kernels/gemm_bf16dot.h), on a
// CPU with AVX512_BF16 only (elsewhere its line says "not available on this CPU").
// Run with `env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE` so OpenBLAS picks its kernels itself.
#include <omp.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "halfgrad/autograd/kernels/gemm.h"
#include "halfgrad/autograd/kernels/gemm_bf16dot.h"
#include "halfgrad/precision/bfloat16.h"
#include "halfgrad/precision/half.h"

#ifdef HG_BENCH_OPENBLAS
// CBLAS with 32-bit integers, declared here so that no BLAS header path is needed. The OpenBLAS
// extensions are weak: another BLAS still links, and then runs with its own thread count.
extern "C" {
void cblas_sgemm(int order, int trans_a, int trans_b, int m, int n, int k, float alpha, const float* a, int lda,
                 const float* b, int ldb, float beta, float* c, int ldc);
void openblas_set_num_threads(int threads) __attribute__((weak));
char* openblas_get_corename() __attribute__((weak));
}
constexpr int kCblasRowMajor = 101, kCblasNoTrans = 111, kCblasTrans = 112;
#endif

namespace {

using hg::DType;
using hg::kernels::Bf16Dot;
using hg::kernels::GemmOperand;

struct Shape {
  int64_t m, n, k;
};

// "MxNxK" -> Shape; m = 0 marks text that is not three positive sizes.
Shape parse_shape(const std::string& text) {
  Shape s{};
  char tail = 0;
  if (std::sscanf(text.c_str(), "%ldx%ldx%ld%c", &s.m, &s.n, &s.k, &tail) != 3 || s.m <= 0 || s.n <= 0 || s.k <= 0) {
    return Shape{};
  }
  return s;
}

// One operand stored in every dtype, the same values (f32 holds the f16-rounded numbers).
struct Operand {
  std::vector<float> f32;
  std::vector<uint16_t> f16, bf16;

  Operand(size_t size, std::mt19937& rng) : f32(size), f16(size), bf16(size) {
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    for (size_t i = 0; i < size; ++i) {
      f16[i] = hg::half(u(rng)).bits();
      f32[i] = hg::half::from_bits(f16[i]).to_float();
      bf16[i] = hg::bfloat16(f32[i]).bits();
    }
  }
  const void* data(DType t) const {
    return t == DType::f32 ? static_cast<const void*>(f32.data()) : t == DType::f16 ? f16.data() : bf16.data();
  }
};

template <class F>
std::vector<double> time_runs(int reps, F run) {
  run();  // warm-up: packing buffers, thread team, caches
  run();
  std::vector<double> seconds;
  for (int r = 0; r < reps; ++r) {
    const auto start = std::chrono::steady_clock::now();
    run();
    seconds.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  std::sort(seconds.begin(), seconds.end());
  return seconds;
}

void print(const char* impl, const std::string& dtype, const std::string& layout, const Shape& s, int threads,
           const std::vector<double>& seconds) {
  const double flops = 2.0 * double(s.m) * double(s.n) * double(s.k);
  std::printf(
      "{\"bench\":\"gemm\",\"impl\":\"%s\",\"dtype\":\"%s\",\"layout\":\"%s\",\"m\":%ld,"
      "\"n\":%ld,\"k\":%ld,\"threads\":%d,\"gflops\":%.2f,\"gflops_best\":%.2f,\"reps\":%zu}\n",
      impl, dtype.c_str(), layout.c_str(), s.m, s.n, s.k, threads, flops / seconds[seconds.size() / 2] * 1e-9,
      flops / seconds.front() * 1e-9, seconds.size());
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"GEMM throughput: halfgrad (f32/f16/bf16 inputs) and OpenBLAS sgemm"};
  std::vector<int> thread_counts{1, 2};
  std::vector<std::string> dtypes{"f32", "f16", "bf16", "bf16-dot"};
  std::vector<std::string> shapes{"2048x128x128", "2048x512x128", "2048x128x512", "4096x256x256", "512x512x512"};
  std::string layout = "nn";
  int reps = 15;
  bool openblas = true;
  app.add_option("--threads", thread_counts, "thread counts")->delimiter(',');
  app.add_option("--dtype", dtypes, "halfgrad input dtypes (both A and B); bf16-dot: bf16 on VDPBF16PS")
      ->delimiter(',')
      ->check(CLI::IsMember({"f32", "f16", "bf16", "bf16-dot"}));
  app.add_option("--shape", shapes, "MxNxK of C(M,N) = op(A)(M,K) op(B)(K,N)")
      ->delimiter(',')
      ->check([](const std::string& text) {
        return parse_shape(text).m > 0 ? std::string() : "expected MxNxK, got " + text;
      });
  app.add_option("--layout", layout, "nn, nt (B transposed: x W^T), tn (A^T B)")
      ->check(CLI::IsMember({"nn", "nt", "tn"}));
  app.add_option("--reps", reps, "timed runs per configuration")->check(CLI::PositiveNumber);
  app.add_flag("!--no-openblas", openblas, "skip OpenBLAS");
  CLI11_PARSE(app, argc, argv);

  const bool transpose_a = layout == "tn", transpose_b = layout == "nt";
#ifdef HG_BENCH_OPENBLAS
  if (openblas && openblas_get_corename != nullptr) {
    std::fprintf(stderr, "openblas core: %s\n", openblas_get_corename());
  }
#else
  openblas = false;
#endif

  // Idle threads of one library must not steal a core from the other: OpenBLAS's workers spin for
  // a while after start-up and after each call, and a 2-thread OpenMP region then took a whole
  // 8 ms scheduler slice instead of 0.1 ms. So per thread count all halfgrad runs come first, then
  // all OpenBLAS runs, each group after a 1 s pause in which the other library's threads sleep.
  std::mt19937 rng(42);
  for (const int threads : thread_counts) {
    omp_set_num_threads(threads);
    if (openblas) std::this_thread::sleep_for(std::chrono::seconds(1));
    for (const std::string& text : shapes) {
      const Shape s = parse_shape(text);
      const Operand a(size_t(s.m * s.k), rng), b(size_t(s.k * s.n), rng);
      std::vector<float> c(size_t(s.m * s.n));
      // Stored A: (M,K) or (K,M) if transposed; stored B: (K,N) or (N,K) if transposed.
      const int64_t lda = transpose_a ? s.m : s.k, ldb = transpose_b ? s.k : s.n;
      for (const std::string& name : dtypes) {
        const DType t = name == "f32" ? DType::f32 : name == "f16" ? DType::f16 : DType::bf16;
        const GemmOperand a_op{a.data(t), t, lda, transpose_a}, b_op{b.data(t), t, ldb, transpose_b};
        const bool dot = name == "bf16-dot";
        if (dot && !hg::kernels::cpu_has_bf16_dot()) {
          std::printf(
              "{\"bench\":\"gemm\",\"impl\":\"halfgrad\",\"dtype\":\"bf16-dot\",\"layout\":\"%s\","
              "\"m\":%ld,\"n\":%ld,\"k\":%ld,\"threads\":%d,\"note\":\"not available on this CPU "
              "(no AVX512_BF16)\"}\n",
              layout.c_str(), s.m, s.n, s.k, threads);
          continue;
        }
        const hg::kernels::ScopedBf16Dot path(dot ? Bf16Dot::kAuto : Bf16Dot::kExact);
        print("halfgrad", name, layout, s, threads,
              time_runs(reps, [&] { hg::kernels::gemm(c.data(), s.n, a_op, b_op, s.m, s.n, s.k); }));
      }
    }
#ifdef HG_BENCH_OPENBLAS
    if (!openblas) continue;
    if (openblas_set_num_threads != nullptr) openblas_set_num_threads(threads);
    std::this_thread::sleep_for(std::chrono::seconds(1));
    for (const std::string& text : shapes) {
      const Shape s = parse_shape(text);
      const Operand a(size_t(s.m * s.k), rng), b(size_t(s.k * s.n), rng);
      std::vector<float> c(size_t(s.m * s.n));
      const int lda = int(transpose_a ? s.m : s.k), ldb = int(transpose_b ? s.k : s.n);
      print("openblas", "f32", layout, s, threads, time_runs(reps, [&] {
              cblas_sgemm(kCblasRowMajor, transpose_a ? kCblasTrans : kCblasNoTrans,
                          transpose_b ? kCblasTrans : kCblasNoTrans, int(s.m), int(s.n), int(s.k), 1.0f, a.f32.data(),
                          lda, b.f32.data(), ldb, 0.0f, c.data(), int(s.n));
            }));
    }
#endif
  }
  return 0;
}
