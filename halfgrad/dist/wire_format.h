// The gradients' wire format of data-parallel training (--ddp-comm, TrainingArguments::ddp_comm):
// f32, or fp16/bf16 cast while still loss-scaled (halfgrad/dist/ddp.h, docs/distributed.md). Its own
// header so that the settings name it without the DDP machinery.
#pragma once

#include "halfgrad/base/enum_names.h"

namespace hg::dist {

enum class WireFormat { kF32, kF16, kBf16 };

inline constexpr EnumNames<WireFormat, 3, 2> kWireFormatNames{
    {{{WireFormat::kF32, "f32"}, {WireFormat::kF16, "fp16"}, {WireFormat::kBf16, "bf16"}}},
    {{{WireFormat::kF32, "fp32"}, {WireFormat::kF16, "f16"}}}};

// The wire format's name (kWireFormatNames), for the programs that print it.
inline const char* wire_format_name(WireFormat format) { return kWireFormatNames.name(format).data(); }

}  // namespace hg::dist
