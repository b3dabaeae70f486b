// median: the middle of a list of measurements (step times, benchmark repeats), as Python's
// statistics.median takes it: the mean of the two middle values for an even count. One
// definition for the adaptive team-size policy and the benchmark programs, so that their medians
// are the ones the Python comparison scripts compute (bench/compare.sh, bench/torch_step.py).
#pragma once

#include <algorithm>
#include <vector>

namespace hg {

// `v` must not be empty.
inline double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

}  // namespace hg
