// Thread-local rounding state behind RoundingScope.
#include "autograd/rounding_scope.h"

namespace hg {
namespace {
thread_local precision::RoundingOptions t_options{};
thread_local uint64_t t_seed = 0;
thread_local uint64_t t_events = 0;
}  // namespace

RoundingScope::RoundingScope(precision::RoundingOptions options, uint64_t seed)
    : previous_options_(t_options), previous_seed_(t_seed), previous_events_(t_events) {
  t_options = options;
  t_seed = seed;
  t_events = 0;  // a scope starts its own event count, so a run inside it is reproducible
}

RoundingScope::~RoundingScope() {
  t_options = previous_options_;
  t_seed = previous_seed_;
  t_events = previous_events_;
}

const precision::RoundingOptions& current_rounding() { return t_options; }
uint64_t current_rounding_seed() { return t_seed; }

uint64_t reserve_rounding_events(uint64_t n) {
  const uint64_t first = t_events;
  t_events += n;
  return first;
}

}  // namespace hg
