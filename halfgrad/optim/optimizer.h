// Optimizer: the base of SGD, Adam and AdamW (torch.optim semantics), with parameter groups. State
// is f32; a step widens each parameter and gradient to f32 and rounds the new value once into the
// parameter's dtype. A row-sparse gradient is applied lazily, as torch.optim.SparseAdam does.
// Details: docs/design_notes.md#optimizer.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "halfgrad/autograd/sparse_rows.h"
#include "halfgrad/autograd/tensor.h"
#include "halfgrad/base/enum_names.h"

namespace hg::optim {

// How a step writes the updated value into a 16-bit parameter (one the optimizer updates
// directly, without f32 master weights; f32 parameters are written exactly under every mode).
// Zamirai et al. 2020 ("Revisiting BFloat16 Training", arXiv:2010.06192): nearest rounding
// cancels every update below half an ulp of its weight; stochastic rounding or Kahan-compensated
// updates keep them without an f32 copy.
//   nearest     round to nearest even (what a 16-bit FPU does);
//   stochastic  away from zero with probability equal to the discarded fraction (unbiased:
//               E[w'] = w + u), random bits from (seed, parameter, step, element);
//   kahan       the state buffer "kahan" (one value of the parameter's dtype per element) holds
//               the part of the updates the weight has not absorbed: c += u; w' = round(w + c);
//               c -= w' - w (torchdistx AnyPrecisionAdamW @0552f1b, use_kahan_summation).
enum class UpdateRounding { kNearest, kStochastic, kKahan };
inline constexpr EnumNames<UpdateRounding, 3> kUpdateRoundingNames{{{{UpdateRounding::kNearest, "nearest"},
                                                                     {UpdateRounding::kStochastic, "stochastic"},
                                                                     {UpdateRounding::kKahan, "kahan"}}}};

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
  // How later steps write 16-bit parameters (default nearest); `seed` feeds stochastic rounding.
  void set_update_rounding(UpdateRounding mode, uint64_t seed = 0) {
    update_rounding_ = mode;
    rounding_seed_ = seed;
  }
  UpdateRounding update_rounding() const { return update_rounding_; }

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
  // The state buffers update() keeps for a parameter of `group` (Adam: exp_avg, exp_avg_sq; SGD
  // with momentum: momentum_buffer). A row-sparse update creates them zeroed, full size, before
  // its chunks run, so update() must treat a zero buffer as a fresh one.
  virtual std::vector<std::string> state_names(const ParamGroup& group) const = 0;

 private:
  // state_names(), and kahan for a 16-bit parameter under Kahan update rounding, created where
  // absent: zero, param.numel() values.
  void create_row_state(const Tensor& param, const ParamGroup& group,
                        std::map<std::string, std::vector<float>>& state) const;
  // update() on the rows of a row-sparse gradient: gathers those rows of the parameter and of
  // its state buffers, updates them, scatters them back.
  void update_rows(const Tensor& param, const SparseRows& grad, const ParamGroup& group,
                   std::map<std::string, std::vector<float>>& state, int64_t step, size_t index);

  // Writes the updated values `p` of the parameter (all of it, or `rows`) under the update
  // rounding; `before`: its values before the update (Kahan only). `index`: its place in the
  // optimizer, for stochastic rounding's bits.
  void write_update(const Tensor& param, std::span<const int64_t> rows, std::vector<float>& p,
                    const std::vector<float>& before, std::map<std::string, std::vector<float>>& state,
                    size_t index) const;

  std::vector<ParamGroup> groups_;
  UpdateRounding update_rounding_ = UpdateRounding::kNearest;
  uint64_t rounding_seed_ = 0;
  // Per parameter (in group order): named state buffers and its own step count.
  std::vector<std::map<std::string, std::vector<float>>> state_;
  std::vector<int64_t> param_steps_;
  int64_t steps_ = 0;
};

}  // namespace hg::optim
