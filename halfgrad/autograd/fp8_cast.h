// Fp8Cast: the record of one fp8 operand cast (which tensor of which GEMM, its format and scale,
// its input's amax, and what the cast flushed or saturated); Fp8Role, the tensor's part in the
// GEMM; and Fp8CastObserver, which collects the records Fp8Scaling (fp8_scaling.h) makes.
// Details: docs/design_notes.md#fp8scaling.
#pragma once

#include <array>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

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

// One fp8 cast as an Fp8CastObserver sees it: which tensor, the format and scale it was cast with,
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

  double flushed_share() const;      // of the values: nonzero ones the cast made zero
  double saturated_share() const;    // beyond the format's max, clamped to it
  void merge(const Fp8Cast& later);  // amax: the larger; scale: the later cast's; stats summed
};

// While one lives, training's fp8 casts (Fp8Scaling::quantize with record_amax) report an Fp8Cast
// to it. Global, at most one at a time, as CastObserver (which sees the f16/bf16 roundings); the
// numerics inspector installs both.
class Fp8CastObserver {
 public:
  Fp8CastObserver();  // throws if another Fp8CastObserver is installed
  ~Fp8CastObserver();
  Fp8CastObserver(const Fp8CastObserver&) = delete;
  Fp8CastObserver& operator=(const Fp8CastObserver&) = delete;

  // The casts since construction or the previous take(); add is called by Fp8Scaling::quantize.
  std::vector<Fp8Cast> take();
  void add(Fp8Cast cast);

 private:
  std::mutex mutex_;
  std::vector<Fp8Cast> casts_;
};

// The installed fp8 cast observer, or nullptr (a relaxed atomic load).
Fp8CastObserver* fp8_cast_observer();

}  // namespace hg
