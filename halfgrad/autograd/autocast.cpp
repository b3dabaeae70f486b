// Autocast state (thread-local, nestable) and the weight-cast cache.
#include "halfgrad/autograd/autocast.h"

#include "halfgrad/autograd/ops/shape_ops.h"
#include "halfgrad/autograd/tape.h"

namespace hg {

struct Autocast::State {
  AutocastOptions options;
  // Weight casts of this region, keyed by (tensor, target dtype); the cached cast stays on the
  // tape, so every use of it sends its gradient back through one cast node. An entry from an
  // earlier tape generation (a backward ran, and an optimizer may have changed the weight
  // since) is stale and is cast again.
  struct Entry {
    Tensor source;  // pinned, so its address cannot be reused by another tensor
    Tensor cast;
    uint64_t generation;
  };
  std::map<std::pair<const TensorImpl*, DType>, Entry> cache;
};

namespace {
thread_local Autocast::State* t_state = nullptr;
}

Autocast::Autocast(AutocastOptions options)
    : state_(std::make_unique<State>(State{std::move(options), {}})), previous_(t_state) {
  t_state = state_.get();
}

Autocast::~Autocast() { t_state = previous_; }

namespace {
// The options of the innermost guard when it is enabled, else null.
const AutocastOptions* enabled_autocast_options() {
  return t_state != nullptr && t_state->options.enabled ? &t_state->options : nullptr;
}
}  // namespace

std::optional<DType> active_autocast() {
  const AutocastOptions* options = enabled_autocast_options();
  return options != nullptr ? std::optional<DType>(options->dtype) : std::nullopt;
}

std::shared_ptr<Fp8Scaling> active_fp8() {
  const AutocastOptions* options = enabled_autocast_options();
  return options != nullptr ? options->fp8 : nullptr;
}

Accumulation active_accumulation() {
  const AutocastOptions* options = enabled_autocast_options();
  return options != nullptr ? options->accumulation : Accumulation::kF32;
}

Bf16Dot active_bf16_dot() {
  const AutocastOptions* options = enabled_autocast_options();
  return options != nullptr ? options->bf16_dot : Bf16Dot::kAuto;
}

DType promote(DType a, DType b) { return a == b ? a : DType::f32; }

DType autocast_dtype(CastPolicy policy, std::initializer_list<Tensor> inputs) {
  const std::optional<DType> autocast = active_autocast();
  if (autocast && policy == CastPolicy::kLowerPrecision) return *autocast;
  if (autocast && policy == CastPolicy::kFloat32) return DType::f32;
  if (autocast && policy == CastPolicy::kNormalization &&
      t_state->options.normalizations == NormalizationOutputs::kFloat32) {
    return DType::f32;
  }
  bool first = true;
  DType widest = DType::f32;
  for (const Tensor& t : inputs) {
    if (!t.defined()) continue;
    widest = first ? t.dtype() : promote(widest, t.dtype());
    first = false;
  }
  return widest;
}

Tensor autocast_input(const Tensor& input, DType target) {
  if (input.dtype() == target) return input;
  const bool cacheable = t_state != nullptr && input.is_leaf() && input.requires_grad();
  if (!cacheable) return cast(input, target);
  auto key = std::make_pair(&input.impl(), target);
  const uint64_t generation = active_tape().generation();
  auto it = t_state->cache.find(key);
  if (it == t_state->cache.end() || it->second.generation != generation) {
    it = t_state->cache.insert_or_assign(key, Autocast::State::Entry{input, cast(input, target), generation}).first;
  }
  return it->second.cast;
}

}  // namespace hg
