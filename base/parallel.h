// How halfgrad's OpenMP threads wait. libgomp's default spins a waiting thread for about 300,000
// iterations before it sleeps; on a machine whose other cores are busy (a shared 2-core box, CI)
// the spinning threads take the cores from the threads they wait for, and a 2-thread training
// step was measured 4x slower than 1 thread. GOMP_SPINCOUNT=1000 (the count libgomp itself uses
// when threads outnumber cores) kept 2 threads as fast as 1 under that load.
// libgomp reads its environment once, when it is loaded, before main(): a setenv() in main, in a
// static constructor or even in the executable's .preinit_array (glibc's own initialiser resets
// the environment after it) comes too late. So the default is applied by re-executing the program.
//
// Below: when an op opens an OpenMP team at all. A region that runs on one thread (an `if`
// clause that is false, one thread allowed, or nested inside another region) is still a
// GOMP_parallel call that sets up a team and ends with a futex wake: a system call per op, about
// 35,000 per config-S training step on one thread.
#pragma once

#include <cstdint>
#include <string>

namespace hg {

inline constexpr const char* kDefaultSpinCount = "1000";

// Call first thing in main(). Unless OMP_WAIT_POLICY or GOMP_SPINCOUNT is set, sets
// GOMP_SPINCOUNT=kDefaultSpinCount and re-executes /proc/self/exe with the same argv (once:
// the new process finds the variable set). Returns normally when a policy is already set or the
// exec fails (the program then runs with libgomp's default).
void use_default_wait_policy(char** argv);

// The policy in effect, for logs: "OMP_WAIT_POLICY=..." and/or "GOMP_SPINCOUNT=...", or
// "libgomp default (spins ~300000 iterations)".
std::string thread_wait_policy();

// Elements below which a loop runs on the calling thread: waking the team costs microseconds,
// more than a pass over this many elements (and far more when a core is busy).
inline constexpr int64_t kParallelElements = 1 << 15;

// Whether a loop over `work` elements should open a team: at least `threshold` elements, more
// than one thread allowed, and not already inside a parallel region.
bool use_team(int64_t work, int64_t threshold);

// Runs body() once on each thread of a new team when `parallel`, else once on the calling
// thread. The body's `#pragma omp for` loops (orphaned worksharing) split across the team, or run
// whole on the calling thread without touching libgomp's team machinery.
template <class Body>
void maybe_parallel(bool parallel, const Body& body) {
  if (parallel) {
#pragma omp parallel
    body();
  } else {
    body();
  }
}

}  // namespace hg
