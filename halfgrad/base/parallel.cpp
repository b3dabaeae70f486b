// The team decision and the OpenMP wait-policy default with its report (see parallel.h).
#include "halfgrad/base/parallel.h"

#include <omp.h>
#include <sched.h>
#include <unistd.h>

#include <cstdlib>
#include <vector>

namespace hg {
namespace {

// libgomp started with a list of places (OMP_PLACES, or OMP_PROC_BIND, whose default is one place
// per core) has bound this thread to the first place, and exec keeps a thread's CPU mask: the
// re-executed program would see that place's CPUs only and bind every thread of a team to them
// (2 threads ran at 1 thread's speed). So before exec the mask is widened back to the union of the
// places, the CPUs libgomp built the list from, and the new process builds the same list.
void unbind_for_exec() {
  const int places = omp_get_num_places();  // 0 without a places list: nothing was bound
  if (places <= 0) return;
  cpu_set_t cpus;
  CPU_ZERO(&cpus);
  for (int p = 0; p < places; ++p) {
    std::vector<int> ids(size_t(omp_get_place_num_procs(p)));
    omp_get_place_proc_ids(p, ids.data());
    for (const int id : ids) {
      if (id >= 0 && id < CPU_SETSIZE) CPU_SET(id, &cpus);
    }
  }
  sched_setaffinity(0, sizeof cpus, &cpus);  // on failure the program runs bound, as it would have
}

}  // namespace

void use_default_wait_policy(char** argv) {
  if (std::getenv("OMP_WAIT_POLICY") != nullptr || std::getenv("GOMP_SPINCOUNT") != nullptr) return;
  if (setenv("GOMP_SPINCOUNT", kDefaultSpinCount, 0) != 0) return;
  cpu_set_t bound;
  const bool saved = sched_getaffinity(0, sizeof bound, &bound) == 0;
  unbind_for_exec();
  execv("/proc/self/exe", argv);
  // exec failed: this process keeps libgomp's default (say so) and its binding
  unsetenv("GOMP_SPINCOUNT");
  if (saved) sched_setaffinity(0, sizeof bound, &bound);
}

std::string thread_wait_policy() {
  const char* policy = std::getenv("OMP_WAIT_POLICY");
  const char* spin = std::getenv("GOMP_SPINCOUNT");
  std::string out;
  if (policy != nullptr) out = std::string("OMP_WAIT_POLICY=") + policy;
  if (spin != nullptr) out += (out.empty() ? "" : " ") + std::string("GOMP_SPINCOUNT=") + spin;
  return out.empty() ? "libgomp default (spins ~300000 iterations)" : out;
}

bool use_team(double work, int64_t threshold) {
  return work >= double(threshold) && omp_get_max_threads() > 1 && !omp_in_parallel();
}

int team_size(double work, int64_t threshold) { return use_team(work, threshold) ? omp_get_max_threads() : 1; }

}  // namespace hg
