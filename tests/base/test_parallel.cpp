// The default OpenMP wait policy reaches libgomp: a child process started without a policy
// re-executes itself through use_default_wait_policy, and what omp_display_env prints there
// (libgomp's own view of its settings) holds the default spin count.
#include <omp.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "base/parallel.h"

namespace hg {

// Hidden (run only by name): the re-executed child of the test below.
TEST_CASE("parallel child: print libgomp's settings", "[.parallel_child]") {
  omp_display_env(1);  // to stderr, which the parent reads
  std::fprintf(stderr, "policy: %s\n", thread_wait_policy().c_str());
}

namespace {

// Forks a child without OMP_WAIT_POLICY and GOMP_SPINCOUNT but with `set` (NAME=value, or
// nothing), which calls use_default_wait_policy to re-execute this test binary's hidden child case;
// returns the child's stderr.
std::string child_output(const std::string& set) {
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
    if (!set.empty()) putenv(const_cast<char*>(set.c_str()));
    static char name[] = "halfgrad_tests", filter[] = "parallel child: print libgomp's settings";
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

TEST_CASE("without a user policy libgomp runs with GOMP_SPINCOUNT=1000 and a user's policy is kept", "[parallel]") {
  const std::string defaulted = child_output("");
  INFO(defaulted);
  CHECK(defaulted.find(std::string("GOMP_SPINCOUNT = '") + kDefaultSpinCount + "'") != std::string::npos);
  CHECK(defaulted.find(std::string("policy: GOMP_SPINCOUNT=") + kDefaultSpinCount) != std::string::npos);

  // A policy of the user's: no re-execution (the forked child reports its own, unchanged settings).
  const std::string user = child_output("OMP_WAIT_POLICY=active");
  INFO(user);
  CHECK(user.find("policy: OMP_WAIT_POLICY=active\n") != std::string::npos);
  CHECK(user.find("GOMP_SPINCOUNT=") == std::string::npos);
}

}  // namespace hg
