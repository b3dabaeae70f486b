// The shares and the merge of an fp8 cast record, and the observer's slot (see fp8_cast.h).
#include "halfgrad/autograd/fp8_cast.h"

#include <algorithm>
#include <atomic>
#include <utility>

#include "halfgrad/base/error.h"

namespace hg {

double Fp8Cast::flushed_share() const { return stats.total() ? double(stats.underflow) / double(stats.total()) : 0.0; }
double Fp8Cast::saturated_share() const { return stats.total() ? double(stats.overflow) / double(stats.total()) : 0.0; }
void Fp8Cast::merge(const Fp8Cast& later) {
  amax = std::max(amax, later.amax);
  scale = later.scale;
  stats.merge(later.stats);
}

namespace {
std::atomic<Fp8CastObserver*> g_fp8_cast_observer{nullptr};
}  // namespace

Fp8CastObserver::Fp8CastObserver() {
  Fp8CastObserver* expected = nullptr;
  check(g_fp8_cast_observer.compare_exchange_strong(expected, this),
        "Fp8CastObserver: another observer is already installed");
}

Fp8CastObserver::~Fp8CastObserver() { g_fp8_cast_observer.store(nullptr); }

std::vector<Fp8Cast> Fp8CastObserver::take() {
  std::lock_guard lock(mutex_);
  return std::exchange(casts_, {});
}

void Fp8CastObserver::add(Fp8Cast cast) {
  std::lock_guard lock(mutex_);
  casts_.push_back(std::move(cast));
}

Fp8CastObserver* fp8_cast_observer() { return g_fp8_cast_observer.load(std::memory_order_relaxed); }

}  // namespace hg
