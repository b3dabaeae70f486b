// The global observer slot and the mutex-guarded merge of per-call counts (see cast_observer.h).
#include "halfgrad/autograd/cast_observer.h"

#include <atomic>
#include <utility>

#include "halfgrad/base/error.h"

namespace hg {
namespace {

std::atomic<CastObserver*> g_observer{nullptr};

}  // namespace

CastObserver::CastObserver() {
  CastObserver* expected = nullptr;
  check(g_observer.compare_exchange_strong(expected, this), "CastObserver: another observer is already installed");
}

CastObserver::~CastObserver() { g_observer.store(nullptr); }

precision::NumericsStats CastObserver::take() {
  std::lock_guard lock(mutex_);
  return std::exchange(stats_, {});
}

void CastObserver::add(const precision::NumericsStats& stats) {
  std::lock_guard lock(mutex_);
  stats_.merge(stats);
}

CastObserver* cast_observer() { return g_observer.load(std::memory_order_relaxed); }

}  // namespace hg
