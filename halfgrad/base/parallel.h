// When halfgrad opens an OpenMP team, and how its threads wait: the one place both are decided.
// Every threading decision is use_team() or team_size() against one of the thresholds below; the
// default wait policy (GOMP_SPINCOUNT) is applied by re-executing the program. Why:
// docs/design_notes.md#openmp-teams-and-waiting.
#pragma once

#include <omp.h>

#include <cstdint>
#include <string>

namespace hg {

// Work below which a loop runs on the calling thread, one constant per kind of work, in its unit.
// Waking a team costs microseconds, and far more when a worker has to wait for a busy core.
// Elementwise and row loops of the ops and the optimizers, in elements: a pass over fewer costs
// less than waking the team.
inline constexpr int64_t kParallelElements = int64_t{1} << 15;
// Format conversions (halfgrad/precision/convert.h), in elements: a span is cut into chunks of at least
// 2^14 elements (halfgrad/precision/convert.cpp), and a team should get four chunks or more.
inline constexpr int64_t kParallelConvertElements = int64_t{1} << 16;
// Random fills (Generator::uniform and normal), in elements: the conversions' threshold, which it
// was given when the generator was written; not measured for fills, which cost more an element
// (a Philox block per four uniform or one normal value), so likely on the high side.
inline constexpr int64_t kParallelRandomElements = int64_t{1} << 16;
// Matrix products (halfgrad/autograd/kernels/gemm.h), in flops (2 m n k per product): ~50 us on one Zen3
// core, above which a product is worth splitting.
inline constexpr int64_t kParallelFlops = int64_t{1} << 22;

// Whether a loop over `work` (in the unit of `threshold`) should open a team: at least `threshold`,
// more than one thread allowed, and not already inside a parallel region (where a nested region
// would get one thread). `work` is a double so that a GEMM's flop count cannot overflow; for integer
// work the comparison is exact, as rounding to double keeps order and the thresholds are integers
// below 2^53.
bool use_team(double work, int64_t threshold);

// The number of threads a loop over `work` runs on: omp_get_max_threads() when use_team(), else 1
// (for loops that cut the work by the team size themselves, as the GEMM does).
int team_size(double work, int64_t threshold);

// Runs body() once on each thread of a new team when `parallel`, else once on the calling thread.
// The body's `#pragma omp for` loops (orphaned worksharing) split across the team, or run whole on
// the calling thread without touching libgomp's team machinery. Inside an active region (a caller
// that runs its own team) an orphaned loop would bind to that team and do only this thread's share
// of the iterations, so there the body gets a team of one of its own.
template <class Body>
void maybe_parallel(bool parallel, const Body& body) {
  if (parallel) {
#pragma omp parallel
    body();
  } else if (omp_in_parallel()) {
#pragma omp parallel num_threads(1)
    body();
  } else {
    body();
  }
}

inline constexpr const char* kDefaultSpinCount = "1000";

// Call first thing in main(). Unless OMP_WAIT_POLICY or GOMP_SPINCOUNT is set, sets
// GOMP_SPINCOUNT=kDefaultSpinCount and re-executes /proc/self/exe with the same argv (once:
// the new process finds the variable set). Thread binding (OMP_PROC_BIND, OMP_PLACES) comes out
// as the user set it. Returns normally when a policy is already set or the exec fails (the
// program then runs with libgomp's default).
void use_default_wait_policy(char** argv);

// The policy in effect, for logs: "OMP_WAIT_POLICY=..." and/or "GOMP_SPINCOUNT=...", or
// "libgomp default (spins ~300000 iterations)".
std::string thread_wait_policy();

}  // namespace hg
