// Module bookkeeping: the parameter tree, modes, in-place dtype changes and state dicts.
#include "halfgrad/nn/module.h"

#include <set>

#include "halfgrad/autograd/ops/shape_ops.h"
#include "halfgrad/autograd/tape.h"
#include "halfgrad/base/error.h"
#include "halfgrad/base/fingerprint.h"

namespace hg::nn {

Tensor Module::register_parameter(const std::string& name, Tensor value) {
  value.set_requires_grad(true);
  value.set_name(name);
  parameters_.emplace_back(name, value);
  return value;
}

void Module::collect(const std::string& prefix, NamedTensors& out) const {
  for (const auto& [name, tensor] : parameters_) out.emplace_back(prefix + name, tensor);
  for (const auto& [name, child] : children_) child->collect(prefix + name + ".", out);
}

NamedTensors Module::named_parameters() const {
  NamedTensors out;
  collect("", out);
  // Each tensor carries its full path, so reports (anomalies, skipped steps, the inspector)
  // can name it.
  for (auto& [name, tensor] : out) tensor.set_name(name);
  return out;
}

std::vector<Tensor> Module::parameters() const {
  std::vector<Tensor> out;
  for (auto& [name, tensor] : named_parameters()) out.push_back(tensor);
  return out;
}

int64_t Module::parameter_count() const {
  int64_t n = 0;
  for (const Tensor& t : parameters()) n += t.numel();
  return n;
}

void Module::train(bool on) {
  training_ = on;
  for (auto& [name, child] : children_) child->train(on);
}

namespace {

// Replaces t's storage with `values` converted to `dtype` (t's handles stay valid).
void assign(const Tensor& t, const Tensor& values, DType dtype) {
  NoGrad no_grad;
  // A copy even when the dtype matches: the parameter must not share storage with `values`.
  const Tensor converted = values.dtype() == dtype ? values.clone() : cast(values.detach(), dtype);
  TensorImpl& impl = t.impl();
  impl.storage = converted.detach().impl().storage;
  impl.dtype = dtype;
  Tensor(t).zero_grad();  // dense or row-sparse, it no longer matches
}

}  // namespace

void Module::to(DType dtype) {
  for (const Tensor& t : parameters()) {
    if (t.dtype() != dtype) assign(t, t, dtype);
  }
}

void Module::zero_grad() {
  for (Tensor& t : parameters()) t.zero_grad();
}

StateDict Module::state_dict() const {
  StateDict out;
  for (const auto& [name, tensor] : named_parameters()) out.emplace(name, tensor);
  return out;
}

uint64_t Module::fingerprint() const {
  uint64_t h = kFnv1aOffset;
  auto mix = [&h](const void* data, size_t n) { h = fnv1a(data, n, h); };
  for (const auto& [name, tensor] : named_parameters()) {
    mix(name.data(), name.size());
    const DType dtype = tensor.dtype();
    mix(&dtype, sizeof dtype);
    mix(tensor.bytes(), tensor.nbytes());
  }
  return h;
}

void Module::load_state_dict(const StateDict& state, bool strict) {
  std::set<std::string> used;
  for (const auto& [name, tensor] : named_parameters()) {
    const auto it = state.find(name);
    check(it != state.end(), "load_state_dict: missing key '", name, "' (shape ", tensor.shape(), ")");
    check(it->second.shape() == tensor.shape(), "load_state_dict: key '", name, "' has shape ", it->second.shape(),
          " but the model expects ", tensor.shape());
    assign(tensor, it->second, tensor.dtype());
    used.insert(name);
  }
  if (strict) {
    for (const auto& [name, tensor] : state) {
      check(used.count(name) != 0, "load_state_dict: unexpected key '", name, "' (shape ", tensor.shape(),
            ") is not a parameter of this model");
    }
  }
}

}  // namespace hg::nn
