// The threading policy of halfgrad/base/parallel.h: where use_team opens a team (each threshold, thread
// count, nesting), that maybe_parallel's loops cover their range inside a caller's team, and that
// the default OpenMP wait policy reaches libgomp: a child process started without a policy
// re-executes itself through use_default_wait_policy, and what omp_display_env prints there
// (libgomp's own view of its settings) holds the default spin count, and the places of a user's
// OMP_PROC_BIND.
#include <omp.h>
#include <sched.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "halfgrad/base/parallel.h"

namespace hg {

// Hidden (run only by name): the re-executed child of the test below.
TEST_CASE("parallel child: print libgomp's settings", "[.parallel_child]") {
  omp_display_env(1);  // to stderr, which the parent reads
  std::fprintf(stderr, "policy: %s\n", thread_wait_policy().c_str());
  std::fprintf(stderr, "places: %d\n", omp_get_num_places());
}

// Hidden: a program started in the test's environment, whose libgomp has read it, applying the
// default policy as a program's main() does: it re-executes into the case above.
TEST_CASE("parallel child: apply the default policy", "[.parallel_child]") {
  static char name[] = "halfgrad_tests", filter[] = "parallel child: print libgomp's settings";
  char* argv[] = {name, filter, nullptr};
  use_default_wait_policy(argv);
  FAIL("use_default_wait_policy returned without re-executing");
}

namespace {

// Forks a child without OMP_WAIT_POLICY and GOMP_SPINCOUNT but with `settings` (NAME=value
// each), which calls use_default_wait_policy to re-execute this test binary's hidden child case;
// returns the child's stderr. With `exec_first` the child first executes this binary afresh (so
// that libgomp starts from `settings`, as in a program the user starts) into the hidden case that
// applies the policy.
std::string child_output(const std::vector<std::string>& settings, bool exec_first = false) {
  int fds[2];
  REQUIRE(pipe(fds) == 0);
  const pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    dup2(fds[1], 2);
    close(fds[0]);
    std::freopen("/dev/null", "w", stdout);  // the re-executed test runner's report
    unsetenv("OMP_WAIT_POLICY");
    unsetenv("GOMP_SPINCOUNT");
    for (const std::string& set : settings) putenv(const_cast<char*>(set.c_str()));
    static char name[] = "halfgrad_tests", filter[] = "parallel child: print libgomp's settings",
                apply[] = "parallel child: apply the default policy";
    if (exec_first) {
      char* fresh[] = {name, apply, nullptr};
      execv("/proc/self/exe", fresh);
      _exit(127);
    }
    char* argv[] = {name, filter, nullptr};
    use_default_wait_policy(argv);  // re-executes when no policy is set
    omp_display_env(1);             // not re-executed: this process's (inherited) settings
    std::fprintf(stderr, "policy: %s\n", thread_wait_policy().c_str());
    _exit(0);
  }
  close(fds[1]);
  std::string text;
  char buffer[4096];
  for (ssize_t n; (n = read(fds[0], buffer, sizeof buffer)) > 0;) text.append(buffer, size_t(n));
  close(fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  CHECK(WIFEXITED(status));
  return text;
}

}  // namespace

TEST_CASE("use_team opens a team from each threshold up, with more than one thread, outside any region", "[parallel]") {
  const int saved = omp_get_max_threads();
  for (const int64_t threshold :
       {kParallelElements, kParallelConvertElements, kParallelRandomElements, kParallelFlops}) {
    INFO("threshold " << threshold);
    omp_set_num_threads(2);
    CHECK_FALSE(use_team(threshold - 1, threshold));
    CHECK(use_team(threshold, threshold));
    CHECK(team_size(threshold - 1, threshold) == 1);
    CHECK(team_size(threshold, threshold) == 2);
    CHECK(team_size(1e30, threshold) == 2);  // a GEMM's flop count beyond int64 still counts as large
    // Inside a caller's team a nested region would get one thread: no team.
    std::vector<int> inside(2, -1);
#pragma omp parallel num_threads(2)
    inside[size_t(omp_get_thread_num())] = team_size(threshold, threshold);
    CHECK(inside == std::vector<int>{1, 1});
    omp_set_num_threads(1);
    CHECK_FALSE(use_team(threshold, threshold));
    CHECK(team_size(threshold, threshold) == 1);
  }
  omp_set_num_threads(saved);
}

// A `#pragma omp for` inside a caller's team binds to that team: without maybe_parallel's team of
// one, each calling thread would fill only its share of its own range.
TEST_CASE("maybe_parallel runs the whole loop for each caller inside a team and splits it outside", "[parallel]") {
  const int saved = omp_get_max_threads();
  omp_set_num_threads(2);
  const int64_t n = kParallelElements;
  const auto fill = [n](std::vector<int>& hits, std::vector<int>& by_thread) {
    maybe_parallel(use_team(n, kParallelElements), [&] {
#pragma omp for schedule(static)
      for (int64_t i = 0; i < n; ++i) {
        hits[size_t(i)] += 1;
        by_thread[size_t(i)] = omp_get_thread_num();
      }
    });
  };
  std::vector<int> hits(size_t(n), 0), by_thread(size_t(n), -1);
  fill(hits, by_thread);
  CHECK(hits == std::vector<int>(size_t(n), 1));
  CHECK(by_thread.front() == 0);
  CHECK(by_thread.back() == 1);  // the team of 2 split the range (static: the second half on thread 1)

  std::vector<std::vector<int>> own_hits(2, std::vector<int>(size_t(n), 0)), own_by_thread(2, by_thread);
#pragma omp parallel num_threads(2)
  {
    const size_t t = size_t(omp_get_thread_num());
    fill(own_hits[t], own_by_thread[t]);
  }
  for (size_t t = 0; t < 2; ++t) {
    INFO("caller thread " << t);
    CHECK(own_hits[t] == std::vector<int>(size_t(n), 1));
    CHECK(own_by_thread[t] == std::vector<int>(size_t(n), 0));  // thread 0 of its own team of one
  }
  omp_set_num_threads(saved);
}

TEST_CASE("without a user policy libgomp runs with GOMP_SPINCOUNT=1000 and a user's policy is kept", "[parallel]") {
  const std::string defaulted = child_output({});
  INFO(defaulted);
  CHECK(defaulted.find(std::string("GOMP_SPINCOUNT = '") + kDefaultSpinCount + "'") != std::string::npos);
  CHECK(defaulted.find(std::string("policy: GOMP_SPINCOUNT=") + kDefaultSpinCount) != std::string::npos);

  // A policy of the user's: no re-execution (the forked child reports its own, unchanged settings).
  const std::string user = child_output({"OMP_WAIT_POLICY=active"});
  INFO(user);
  CHECK(user.find("policy: OMP_WAIT_POLICY=active\n") != std::string::npos);
  CHECK(user.find("GOMP_SPINCOUNT=") == std::string::npos);
}

// With OMP_PROC_BIND libgomp binds the initial thread to the first place as it starts, and exec
// keeps that mask: a plain re-execution found one place, a single CPU here, and ran every thread on
// it. With OMP_PLACES=threads there is one place per CPU of the mask the program started with.
TEST_CASE("the default policy's re-execution keeps the places of OMP_PROC_BIND", "[parallel]") {
  cpu_set_t mask;
  REQUIRE(sched_getaffinity(0, sizeof mask, &mask) == 0);
  const int cpus = CPU_COUNT(&mask);  // the child starts with this mask
  const std::string bound = child_output({"OMP_PROC_BIND=spread", "OMP_PLACES=threads"}, /*exec_first=*/true);
  INFO(bound);
  CHECK(bound.find(std::string("policy: GOMP_SPINCOUNT=") + kDefaultSpinCount) != std::string::npos);
  CHECK(bound.find("places: " + std::to_string(cpus) + "\n") != std::string::npos);
}

}  // namespace hg
