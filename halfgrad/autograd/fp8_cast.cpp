// The shares and the merge of an fp8 cast record (see fp8_cast.h).
#include "halfgrad/autograd/fp8_cast.h"

#include <algorithm>

namespace hg {

double Fp8Cast::flushed_share() const {
  return stats.total() ? double(stats.underflow) / double(stats.total()) : 0.0;
}
double Fp8Cast::saturated_share() const {
  return stats.total() ? double(stats.overflow) / double(stats.total()) : 0.0;
}
void Fp8Cast::merge(const Fp8Cast& later) {
  amax = std::max(amax, later.amax);
  scale = later.scale;
  stats.merge(later.stats);
}

}  // namespace hg
