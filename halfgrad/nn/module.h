// Module: the base of every layer, as torch.nn.Module: a tree of submodules owning named
// parameters. Names are PyTorch-style dotted paths (`encoder.layers.0.attn.q_proj.weight`),
// so a state dict maps one-to-one onto an equivalent PyTorch model's.
//
// Parameters are Tensor handles shared with whoever holds them (optimizers, the scaler);
// to(dtype) and load_state_dict change the tensors in place, so those handles stay valid.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "halfgrad/autograd/tensor.h"

namespace hg::nn {

using NamedTensors = std::vector<std::pair<std::string, Tensor>>;
// Name -> tensor, in name order (what a checkpoint stores).
using StateDict = std::map<std::string, Tensor>;

class Module {
 public:
  virtual ~Module() = default;
  Module() = default;
  Module(const Module&) = delete;
  Module& operator=(const Module&) = delete;

  // Every parameter of this module and its submodules, in registration order, dotted names.
  NamedTensors named_parameters() const;
  std::vector<Tensor> parameters() const;
  int64_t parameter_count() const;

  // Train mode enables dropout; eval mode disables it. Applies to the whole subtree.
  void train(bool on = true);
  void eval() { train(false); }
  bool is_training() const { return training_; }

  // Converts every parameter to `dtype` in place (rounding once); gradients are dropped.
  void to(DType dtype);
  void zero_grad();

  StateDict state_dict() const;
  // FNV-1a hash of every parameter's name, dtype and bytes: equal fingerprints mean bit-equal
  // weights (used to show that training paths agree).
  uint64_t fingerprint() const;
  // Copies values into the parameters. Every key must exist with the same shape (the dtype is
  // converted, rounding once); with strict, the state dict may hold no other keys. A mismatch
  // throws hg::Error naming the key and both shapes.
  void load_state_dict(const StateDict& state, bool strict = true);

 protected:
  // Registers a parameter (marked requires_grad and named) and returns it.
  Tensor register_parameter(const std::string& name, Tensor value);
  template <class M>
  std::shared_ptr<M> register_module(const std::string& name, std::shared_ptr<M> module) {
    children_.emplace_back(name, module);
    return module;
  }

 private:
  void collect(const std::string& prefix, NamedTensors& out) const;

  NamedTensors parameters_;
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> children_;
  bool training_ = true;
};

}  // namespace hg::nn
