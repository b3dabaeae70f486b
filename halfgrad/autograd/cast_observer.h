// CastObserver: while one lives, every rounding of f32 results into an f16/bf16 tensor (each
// kernels::store_rounded call: op outputs, GEMM results, gradients, optimizer stores, creation) also
// counts what the rounding did, in precision::NumericsStats terms: the f32 values' histogram,
// nonzero -> zero (underflow), subnormal results, overflow. Once a value is stored in f16 its
// lost small values are plain zeros; only the cast itself can tell "flushed" from "was zero".
// The numerics inspector (halfgrad/report/numerics_inspector.h) reads it per op. It also receives the fp8
// operand casts of fp8 training (halfgrad/autograd/fp8_scaling.h), each with its tensor and scale, kept
// apart from those counts.
//
// Global, not per thread: narrow runs on OpenMP worker threads, whose counts are merged under
// a mutex. Install and remove it between ops on the thread that runs them; narrowings on other
// threads (another training loop) are counted too. At most one observer at a time. When none is
// installed the cost is one relaxed atomic load per narrow call.
#pragma once

#include <mutex>
#include <vector>

#include "halfgrad/precision/numerics_stats.h"

namespace hg {

struct Fp8Cast;  // halfgrad/autograd/fp8_scaling.h

class CastObserver {
 public:
  CastObserver();  // throws if another CastObserver is installed
  ~CastObserver();
  CastObserver(const CastObserver&) = delete;
  CastObserver& operator=(const CastObserver&) = delete;

  // The counts of every narrowing since construction or the previous take(); resets them.
  precision::NumericsStats take();
  // Merges one narrowing's counts (called by kernels::store_rounded, from any thread).
  void add(const precision::NumericsStats& stats);
  // The fp8 casts since construction or the previous take_fp8(); add_fp8 is called by
  // Fp8Scaling::quantize.
  std::vector<Fp8Cast> take_fp8();
  void add_fp8(Fp8Cast cast);

 private:
  std::mutex mutex_;
  precision::NumericsStats stats_;
  std::vector<Fp8Cast> fp8_;
};

// The installed observer, or nullptr (a relaxed atomic load).
CastObserver* cast_observer();

}  // namespace hg
