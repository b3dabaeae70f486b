// Thread-local rounding state behind RoundingScope, and the rounding of op results under it.
#include "halfgrad/autograd/rounding_scope.h"

#include "halfgrad/autograd/kernels/cast.h"
#include "halfgrad/base/error.h"

namespace hg {
namespace {
thread_local precision::RoundingOptions t_options{};
thread_local uint64_t t_seed = 0;
thread_local uint64_t t_events = 0;
}  // namespace

RoundingScope::RoundingScope(precision::RoundingOptions options, uint64_t seed, uint64_t first_event)
    : previous_options_(t_options), previous_seed_(t_seed), previous_events_(t_events) {
  t_options = options;
  t_seed = seed;
  t_events = first_event;  // a scope starts its own event count, so a run inside it is reproducible
}

RoundingScope::~RoundingScope() {
  t_options = previous_options_;
  t_seed = previous_seed_;
  t_events = previous_events_;
}

// An f16/bf16 output's elements take the next out.numel() stochastic-rounding event numbers of
// this thread's count, so every rounded element of a run draws different, reproducible random
// bits; an f32 output (a copy, nothing rounded) takes none.
ScopedRounder::ScopedRounder(Tensor out)
    : out_(std::move(out)), rounding_(t_options), seed_(t_seed), events_(t_events) {
  if (out_.dtype() != DType::f32) t_events += uint64_t(out_.numel());
}

void ScopedRounder::store(std::span<const float> values, int64_t first) const {
  check(first >= 0 && first <= out_.numel() && values.size() <= size_t(out_.numel() - first),
        "ScopedRounder::store: elements [", first, ", ", first + int64_t(values.size()),
        ") are outside the output of shape ", out_.shape());
  kernels::store_rounded(out_.bytes(), out_.dtype(), first, values.data(), int64_t(values.size()), rounding_, seed_,
                         events_ + uint64_t(first));
}

Tensor round_scoped(std::span<const float> values, const Shape& shape, DType dtype) {
  check(int64_t(values.size()) == shape.numel(), "round_scoped: ", values.size(), " values for shape ", shape);
  const ScopedRounder rounder(Tensor::empty(shape, dtype));
  rounder.store(values);
  return rounder.out();
}

}  // namespace hg
