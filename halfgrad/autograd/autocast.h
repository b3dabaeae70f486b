// Autocast: a per-op precision policy after torch.autocast's op lists. While a guard lives each op
// casts its inputs by its category (kLowerPrecision, kFloat32, kNormalization, kPromote), sums
// accumulate as the guard's Accumulation says, the weights' casts are cached, and `linear` may run
// on fp8 operands (fp8_scaling.h). The categories and which sums honour the accumulation:
// docs/design_notes.md#autocast.
#pragma once

#include <initializer_list>
#include <map>
#include <memory>
#include <optional>
#include <vector>

#include "halfgrad/autograd/kernels/accumulate.h"
#include "halfgrad/autograd/tensor.h"

namespace hg {

class Fp8Scaling;

enum class CastPolicy { kLowerPrecision, kFloat32, kNormalization, kPromote };

// Where a guard stores the outputs of kNormalization ops. kInputDtype halves the bytes of the
// largest activations of a transformer (the (B, H, T, T) attention weights): "activations
// really stored in 2 bytes" for an f16 model.
enum class NormalizationOutputs { kFloat32, kInputDtype };

using kernels::Accumulation;
using kernels::Bf16Dot;

// What a guard sets; MixedPrecision builds it from MixedPrecisionOptions (autocast_options()).
// Designated initializers name what differs from the defaults: Autocast({.dtype = DType::bf16}).
struct AutocastOptions {
  DType dtype = DType::f16;  // the dtype of kLowerPrecision ops
  bool enabled = true;       // false: a guard that restores torch's no-autocast behaviour
  NormalizationOutputs normalizations = NormalizationOutputs::kFloat32;
  std::shared_ptr<Fp8Scaling> fp8;  // non-null: `linear` runs on fp8 operands (fp8_scaling.h)
  Accumulation accumulation = Accumulation::kF32;
  Bf16Dot bf16_dot = Bf16Dot::kAuto;
};

class Autocast {
 public:
  explicit Autocast(AutocastOptions options = {});
  ~Autocast();
  Autocast(const Autocast&) = delete;
  Autocast& operator=(const Autocast&) = delete;

  struct State;  // defined in autocast.cpp

 private:
  std::unique_ptr<State> state_;
  State* previous_;
};

// The dtype ops of `policy` compute in for these inputs: under autocast the policy decides,
// otherwise (and for kPromote) the widest input dtype (f16 with bf16 promotes to f32).
DType autocast_dtype(CastPolicy policy, std::initializer_list<Tensor> inputs);
// The autocast dtype in force, if any.
std::optional<DType> active_autocast();
// The fp8 scaling of the enabled guard in force, if any (linear's backward keeps it alive).
std::shared_ptr<Fp8Scaling> active_fp8();
// How the sums of ops run now accumulate: the innermost enabled guard's, else kF32. An op reads
// it once, when it runs, and its backward closure captures that value.
Accumulation active_accumulation();
// How bf16 x bf16 products are summed (kernels/gemm_bf16dot.h): the innermost enabled guard's
// request, else kAuto; read and captured as active_accumulation is.
Bf16Dot active_bf16_dot();
// Casts `input` for an op of `policy`: a no-op when the dtype already matches; cached for
// weights inside an autocast region.
Tensor autocast_input(const Tensor& input, DType target);
// The widest of two dtypes (torch.promote_types restricted to f32/f16/bf16).
DType promote(DType a, DType b);

}  // namespace hg
