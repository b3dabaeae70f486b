// bench_ops: forward and backward time of the autograd ops a transformer block spends its
// non-GEMM time in (layer_norm, gelu, softmax, log_softmax, exp, tanh, a broadcast bias add,
// sums), alone and as one chain, on (N, C) tensors; one JSON object per line on stdout.
// Each configuration is warmed up, then timed --reps times; "fwd_ms"/"bwd_ms" are medians.
// Backward is seeded with a random gradient of the output's shape (no loss op in the timing).
// --kernels instead times the f32 kernels alone (halfgrad/autograd/kernels, one thread, preallocated
// arrays) beside their scalar twins: nanoseconds per element, best of --reps.
#include <omp.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "halfgrad/autograd/kernels/elementwise.h"
#include "halfgrad/autograd/kernels/reference.h"
#include "halfgrad/autograd/kernels/rows.h"
#include "halfgrad/autograd/all_ops.h"
#include "halfgrad/autograd/tape.h"

namespace {

using hg::Tensor;
using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

struct Workload {
  std::string name;
  std::function<Tensor(const Tensor& x, const Tensor& w, const Tensor& b)> forward;
};

const std::vector<Workload>& workloads() {
  using hg::GeluApproximation;
  static const std::vector<Workload> all = {
      {"layer_norm", [](const Tensor& x, const Tensor& w, const Tensor& b) { return hg::layer_norm(x, w, b); }},
      {"gelu", [](const Tensor& x, const Tensor&, const Tensor&) { return hg::gelu(x); }},
      {"gelu_tanh",
       [](const Tensor& x, const Tensor&, const Tensor&) { return hg::gelu(x, GeluApproximation::kTanh); }},
      {"softmax", [](const Tensor& x, const Tensor&, const Tensor&) { return hg::softmax(x); }},
      {"log_softmax", [](const Tensor& x, const Tensor&, const Tensor&) { return hg::log_softmax(x); }},
      {"exp", [](const Tensor& x, const Tensor&, const Tensor&) { return hg::exp(x); }},
      {"tanh", [](const Tensor& x, const Tensor&, const Tensor&) { return hg::tanh(x); }},
      {"mul", [](const Tensor& x, const Tensor&, const Tensor&) { return hg::mul(x, x); }},
      {"add_bias", [](const Tensor& x, const Tensor&, const Tensor& b) { return hg::add(x, b); }},
      {"sum_rows", [](const Tensor& x, const Tensor&, const Tensor&) { return hg::sum(x, -1); }},
      {"sum_cols", [](const Tensor& x, const Tensor&, const Tensor&) { return hg::sum(x, 0); }},
      {"chain", [](const Tensor& x, const Tensor& w,
                   const Tensor& b) { return hg::softmax(hg::gelu(hg::layer_norm(x, w, b))); }},
  };
  return all;
}

void run(const Workload& work, int64_t n, int64_t c, hg::DType dtype, int threads, int reps) {
  hg::Generator gen(7);
  Tensor x = Tensor::randn({n, c}, gen, dtype).set_requires_grad();
  Tensor w = Tensor::uniform({c}, gen, 0.5f, 1.5f, dtype).set_requires_grad();
  Tensor b = Tensor::uniform({c}, gen, -0.5f, 0.5f, dtype).set_requires_grad();
  Tensor probe = work.forward(x, w, b);
  const Tensor seed = Tensor::randn(probe.shape(), gen, probe.dtype());
  hg::backward(probe, seed);
  std::vector<double> fwd, bwd;
  for (int r = -2; r < reps; ++r) {  // two warm-up runs
    for (Tensor* t : {&x, &w, &b}) t->zero_grad();
    auto start = Clock::now();
    Tensor y = work.forward(x, w, b);
    const double f = ms_since(start);
    start = Clock::now();
    hg::backward(y, seed);
    const double g = ms_since(start);
    if (r >= 0) {
      fwd.push_back(f);
      bwd.push_back(g);
    }
  }
  const double f = median(fwd), g = median(bwd);
  std::printf(
      "{\"bench\":\"ops\",\"op\":\"%s\",\"n\":%ld,\"c\":%ld,\"dtype\":\"%s\",\"threads\":%d,"
      "\"fwd_ms\":%.3f,\"bwd_ms\":%.3f,\"total_ms\":%.3f,\"reps\":%d}\n",
      work.name.c_str(), n, c, std::string(hg::dtype_name(dtype)).c_str(), threads, f, g, f + g, reps);
  std::fflush(stdout);
}

// Best-of-reps time of one call of each kernel and its twin on (N, C) floats.
void run_kernels(int64_t n, int64_t c, int reps) {
  namespace k = hg::kernels;
  namespace twin = hg::kernels::reference;
  const int64_t total = n * c;
  hg::Generator gen(7);
  std::vector<float> x(static_cast<size_t>(total)), g(x.size()), y(x.size()), w(static_cast<size_t>(c), 1.0f);
  std::vector<float> mean(static_cast<size_t>(n)), rstd(mean.size()), dw(w.size()), db(w.size());
  gen.normal(x);
  gen.normal(g);
  using Body = std::function<void()>;
  const std::vector<std::tuple<const char*, Body, Body>> kernels = {
      {"add", [&] { k::add(y.data(), x.data(), g.data(), total); },
       [&] { twin::add(y.data(), x.data(), g.data(), total); }},
      {"exp", [&] { k::exp(y.data(), x.data(), total); }, [&] { twin::exp(y.data(), x.data(), total); }},
      {"tanh", [&] { k::tanh(y.data(), x.data(), total); }, [&] { twin::tanh(y.data(), x.data(), total); }},
      {"erf", [&] { k::erf(y.data(), x.data(), total); }, [&] { twin::erf(y.data(), x.data(), total); }},
      {"gelu", [&] { k::gelu(y.data(), x.data(), total); }, [&] { twin::gelu(y.data(), x.data(), total); }},
      {"gelu_backward", [&] { k::gelu_backward(y.data(), g.data(), x.data(), total); },
       [&] { twin::gelu_backward(y.data(), g.data(), x.data(), total); }},
      {"gelu_tanh", [&] { k::gelu_tanh(y.data(), x.data(), total); },
       [&] { twin::gelu_tanh(y.data(), x.data(), total); }},
      {"gelu_tanh_backward", [&] { k::gelu_tanh_backward(y.data(), g.data(), x.data(), total); },
       [&] { twin::gelu_tanh_backward(y.data(), g.data(), x.data(), total); }},
      {"softmax_forward", [&] { k::softmax_forward(y.data(), x.data(), n, c); },
       [&] { twin::softmax_forward(y.data(), x.data(), n, c); }},
      {"softmax_backward", [&] { k::softmax_backward(y.data(), g.data(), x.data(), n, c); },
       [&] { twin::softmax_backward(y.data(), g.data(), x.data(), n, c); }},
      {"layer_norm_forward",
       [&] { k::layer_norm_forward(y.data(), mean.data(), rstd.data(), x.data(), w.data(), w.data(), n, c, 1e-5f); },
       [&] {
         twin::layer_norm_forward(y.data(), mean.data(), rstd.data(), x.data(), w.data(), w.data(), n, c, 1e-5f);
       }},
      {"layer_norm_backward",
       [&] {
         k::layer_norm_backward(y.data(), dw.data(), db.data(), g.data(), x.data(), w.data(), mean.data(), rstd.data(),
                                n, c);
       },
       [&] {
         twin::layer_norm_backward(y.data(), dw.data(), db.data(), g.data(), x.data(), w.data(), mean.data(),
                                   rstd.data(), n, c);
       }},
      {"row_sums", [&] { k::row_sums(y.data(), x.data(), n, c); }, [&] { twin::row_sums(y.data(), x.data(), n, c); }},
  };
  const auto best_ns = [&](const Body& body) {
    body();
    double best = 1e30;
    for (int r = 0; r < reps; ++r) {
      const auto start = Clock::now();
      body();
      best = std::min(best, ms_since(start));
    }
    return best * 1e6 / double(total);
  };
  for (const auto& [name, kernel, reference] : kernels) {
    std::printf("{\"bench\":\"kernels\",\"kernel\":\"%s\",\"n\":%ld,\"c\":%ld,\"simd_ns\":%.3f,\"twin_ns\":%.3f}\n",
                name, n, c, best_ns(kernel), best_ns(reference));
    std::fflush(stdout);
  }
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"forward + backward time of the elementwise and row ops"};
  std::vector<int> thread_counts{1, 2};
  std::vector<std::string> shapes{"2048x128", "2048x512"};
  std::vector<std::string> ops;
  std::string dtype_text = "f32";
  int reps = 21;
  bool kernels = false;
  app.add_option("--threads", thread_counts, "thread counts")->delimiter(',');
  app.add_option("--shape", shapes, "NxC of the (N, C) input")->delimiter(',');
  app.add_option("--op", ops, "workloads to run (default: all)")->delimiter(',');
  app.add_option("--dtype", dtype_text, "input dtype")->check(CLI::IsMember({"f32", "f16", "bf16"}));
  app.add_option("--reps", reps, "timed runs per configuration")->check(CLI::PositiveNumber);
  app.add_flag("--kernels", kernels, "time the f32 kernels and their twins instead (1 thread)");
  CLI11_PARSE(app, argc, argv);
  std::vector<std::pair<int64_t, int64_t>> sizes;
  for (const std::string& text : shapes) {
    int64_t n = 0, c = 0;
    if (std::sscanf(text.c_str(), "%ldx%ld", &n, &c) != 2 || n <= 0 || c <= 0) {
      std::fprintf(stderr, "--shape: expected NxC, got %s\n", text.c_str());
      return 1;
    }
    sizes.emplace_back(n, c);
  }
  if (kernels) {
    omp_set_num_threads(1);
    for (const auto& [n, c] : sizes) run_kernels(n, c, reps);
    return 0;
  }
  const hg::DType dtype = dtype_text == "f32" ? hg::DType::f32 : dtype_text == "f16" ? hg::DType::f16 : hg::DType::bf16;
  for (const int threads : thread_counts) {
    omp_set_num_threads(threads);
    for (const auto& [n, c] : sizes) {
      for (const Workload& work : workloads()) {
        if (!ops.empty() && std::find(ops.begin(), ops.end(), work.name) == ops.end()) continue;
        run(work, n, c, dtype, threads, reps);
      }
    }
  }
  return 0;
}
