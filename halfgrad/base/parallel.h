// When halfgrad opens an OpenMP team, and how its threads wait: the one place both are decided.
// Every threading decision in the library is use_team() or team_size() against one of the
// thresholds below, so a threshold is tuned here and nowhere else. base/ sits below precision/, so
// the conversion kernels use the same policy as the ops.
//
// Why not open a team for everything: a region that runs on one thread (an `if` clause that is
// false, one thread allowed, or nested inside another region) is still a GOMP_parallel call that
// sets up a team and ends with a futex wake: a system call per op, about 35,000 per config-S
// training step on one thread. So below a threshold, or when the team could not help, the work runs
// on the calling thread with no region at all.
//
// How threads wait: libgomp's default spins a waiting thread for about 300,000 iterations before it
// sleeps; on a machine whose other cores are busy (a shared 2-core box, CI) the spinning threads
// take the cores from the threads they wait for, and a 2-thread training step was measured 4x
// slower than 1 thread. GOMP_SPINCOUNT=1000 (the count libgomp itself uses when threads outnumber
// cores) kept 2 threads as fast as 1 under that load. libgomp reads its environment once, when it
// is loaded, before main(): a setenv() in main, in a static constructor or even in the executable's
// .preinit_array (glibc's own initialiser resets the environment after it) comes too late. So the
// default is applied by re-executing the program.
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
