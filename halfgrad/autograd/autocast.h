// Autocast: a per-op precision policy, following torch.autocast's op lists (CUDA lists in
// PyTorch's docs, "Autocast Op Reference"). While an Autocast guard lives, each op casts its
// inputs by its category before computing:
//   kLowerPrecision (matmul, bmm, linear, attention products): inputs cast to the autocast
//     dtype (f16 or bf16); matrix products still accumulate in f32 and round once.
//   kFloat32 (cross_entropy and other losses, sum, mean, exp, log, pow, norms): inputs cast to
//     f32, output f32. Their outputs can leave f16's range (sums, exp) or need f32's precision.
//   kNormalization (softmax, log_softmax, layer_norm): in torch's f32 list too, and always
//     computed in f32 here (each row widened, the output rounded once). Where the output is
//     stored is the guard's choice (NormalizationOutputs): f32 as torch.autocast does (O1), or
//     the widest input dtype (as kPromote), as apex's O2 runs them on an f16 model: the values
//     are bounded, and the next op, a matrix product, would round them to f16 anyway.
//   kPromote (add, mul, cat, ... everything else): inputs cast to the widest input dtype.
// The guard also says how sums accumulate (Accumulation, halfgrad/autograd/kernels/accumulate.h): in f32
// (the default, as torch.autocast and apex always do), or in an f16 accumulator rounded after
// every addition (kF16), or in f16 blocks with an f32 carry (kF16Blocked). It reaches every GEMM
// (matmul, matmul_transposed, linear, attention's products) and sum and mean, in forward and --
// captured when the op runs -- in their backward passes, with linear's bias gradient; and the
// forward statistics of softmax, log_softmax and layer norm (sum of exponentials, mean,
// variance) and cross_entropy's sums (log-softmax, label smoothing's row sums, the total over
// the rows). Still f32: those four ops' backward sums, embedding's scatter-add and the tape's
// sums of broadcast gradients (sum_to).
// Casts of leaf tensors that require grad (the weights) are cached for the life of the guard,
// so a weight used by several ops is rounded once per region (torch does the same). Outside a
// guard ops run in their inputs' dtypes.
//
// A guard may also carry fp8 scaling (halfgrad/autograd/fp8_scaling.h): then `linear` computes its GEMMs
// on fp8 operands with that state's per-tensor scales (the fp8 mode of halfgrad/optim/mixed_precision.h).
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

class Autocast {
 public:
  explicit Autocast(DType dtype = DType::f16, bool enabled = true,
                    NormalizationOutputs normalizations = NormalizationOutputs::kFloat32,
                    std::shared_ptr<Fp8Scaling> fp8 = nullptr,
                    Accumulation accumulation = Accumulation::kF32);
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
// Casts `input` for an op of `policy`: a no-op when the dtype already matches; cached for
// weights inside an autocast region.
Tensor autocast_input(const Tensor& input, DType target);
// The widest of two dtypes (torch.promote_types restricted to f32/f16/bf16).
DType promote(DType a, DType b);

}  // namespace hg
