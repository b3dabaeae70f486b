// Optimizer: the base of SGD, Adam and AdamW (torch.optim semantics). Parameters come in groups
// with their own learning rate and weight decay (e.g. no decay for biases and LayerNorm
// weights). State (momentum, moments) is f32 whatever the parameter's dtype; a step reads each
// parameter and gradient widened to f32, computes in f32 and rounds the new value once into
// the parameter's dtype. So an f16 parameter without f32 master weights loses every update
// smaller than half its ulp -- the failure master weights (master_weights.h) exist to fix.
// A row-sparse gradient (a sparse embedding's, autograd/sparse_rows.h) is applied lazily, as
// torch.optim.SparseAdam does: update() runs on the touched rows of the parameter and of its
// state only; untouched rows keep their values and state (no weight decay, no moment decay),
// and the step count (bias correction) is the parameter's. So a row touched at every step
// follows the dense path bit for bit; a row that misses a step neither decays nor coasts on its
// momentum in it, as it would on the dense path.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "autograd/sparse_rows.h"
#include "autograd/tensor.h"

namespace hg::optim {

struct ParamGroup {
  std::vector<Tensor> params;
  float lr = 1e-3f;
  float weight_decay = 0.0f;
};

// What a checkpoint stores of an optimizer: f32 state tensors named
// "state.<param index>.<name>" and scalars (step counts, hyperparameters) as JSON.
struct OptimizerState {
  std::map<std::string, Tensor> tensors;
  nlohmann::json meta;
};

class Optimizer {
 public:
  explicit Optimizer(std::vector<ParamGroup> groups);
  virtual ~Optimizer() = default;
  Optimizer(const Optimizer&) = delete;
  Optimizer& operator=(const Optimizer&) = delete;

  // Updates every parameter that has a gradient, dense or row-sparse (parameters without one
  // are skipped, as torch).
  void step();
  void zero_grad();  // drops gradients (set_to_none)

  std::vector<ParamGroup>& param_groups() { return groups_; }
  const std::vector<ParamGroup>& param_groups() const { return groups_; }
  std::vector<Tensor> parameters() const;
  int64_t steps() const { return steps_; }

  OptimizerState state_dict() const;
  // Restores state saved from an optimizer over the same parameters (checked: count, shapes).
  void load_state_dict(const OptimizerState& state);

 protected:
  // One parameter's update. p, g: the parameter and its gradient widened to f32 (n values); p
  // is written back (rounded once) by step(). state: this parameter's named f32 buffers.
  virtual void update(std::vector<float>& p, const std::vector<float>& g, const ParamGroup& group,
                      std::map<std::string, std::vector<float>>& state, int64_t step) = 0;
  virtual nlohmann::json hyperparameters() const = 0;

 private:
  // update() on the rows of a row-sparse gradient: gathers those rows of the parameter and of
  // its state buffers, updates them, scatters them back.
  void update_rows(const Tensor& param, const SparseRows& grad, const ParamGroup& group,
                   std::map<std::string, std::vector<float>>& state, int64_t step);

  std::vector<ParamGroup> groups_;
  // Per parameter (in group order): named state buffers and its own step count.
  std::vector<std::map<std::string, std::vector<float>>> state_;
  std::vector<int64_t> param_steps_;
  int64_t steps_ = 0;
};

}  // namespace hg::optim
