// The team decision and the OpenMP wait-policy default with its report (see parallel.h).
#include "base/parallel.h"

#include <omp.h>
#include <unistd.h>

#include <cstdlib>

namespace hg {

void use_default_wait_policy(char** argv) {
  if (std::getenv("OMP_WAIT_POLICY") != nullptr || std::getenv("GOMP_SPINCOUNT") != nullptr) return;
  if (setenv("GOMP_SPINCOUNT", kDefaultSpinCount, 0) != 0) return;
  execv("/proc/self/exe", argv);
  unsetenv("GOMP_SPINCOUNT");  // exec failed: this process keeps libgomp's default; say so
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
