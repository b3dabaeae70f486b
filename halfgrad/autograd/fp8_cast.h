// Fp8Cast: the record of one fp8 operand cast (which tensor of which GEMM, its format and scale,
// its input's amax, and what the cast flushed or saturated), and Fp8Role, the tensor's part in
// the GEMM. Fp8Scaling (halfgrad/autograd/fp8_scaling.h) makes the records and a CastObserver
// (halfgrad/autograd/cast_observer.h) collects them: both include this header, not each other.
#pragma once

#include <array>
#include <cstdint>
#include <string>

#include "halfgrad/base/enum_names.h"
#include "halfgrad/precision/float_format.h"
#include "halfgrad/precision/numerics_stats.h"

namespace hg {

// The scaled tensors of one GEMM (TE: forward input and weight, backward grad_output).
enum class Fp8Role : uint8_t { kInput, kWeight, kGradOutput };
inline constexpr std::array<Fp8Role, 3> kFp8Roles = {Fp8Role::kInput, Fp8Role::kWeight, Fp8Role::kGradOutput};
inline constexpr EnumNames<Fp8Role, 3> kFp8RoleNames{
    {{{Fp8Role::kInput, "input"}, {Fp8Role::kWeight, "weight"}, {Fp8Role::kGradOutput, "grad_output"}}}};
inline const char* fp8_role_name(Fp8Role role) { return kFp8RoleNames.name(role).data(); }  // NUL-terminated

// One fp8 cast as a CastObserver sees it: which tensor, the format and scale it was cast with,
// max |x| of its input, and what the cast did (NumericsStats of the scaled values: underflow =
// flushed to zero, overflow = saturated to +-max). While an observer is installed, every
// Fp8Scaling::quantize that records its amax (training's casts, not evaluation's) also counts
// these (a scalar pass) and reports them to it. Several casts of one tensor (micro-batches,
// steps) merge into one record.
struct Fp8Cast {
  std::string key;
  Fp8Role role = Fp8Role::kInput;
  precision::FloatFormat format = precision::kE4M3;
  float scale = 1, amax = 0;
  precision::NumericsStats stats;

  double flushed_share() const;    // of the values: nonzero ones the cast made zero
  double saturated_share() const;  // beyond the format's max, clamped to it
  void merge(const Fp8Cast& later);  // amax: the larger; scale: the later cast's; stats summed
};

}  // namespace hg
