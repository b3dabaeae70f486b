// hg::bfloat16 conversions (halfgrad/precision/bfloat16.h): all 65536 patterns decode to the upper half
// of an f32 and round-trip; hand-derived boundaries in every mode; every f32 pattern
// (`[exhaustive]`) encodes as the classic bit-pattern formula and, where the CPU has it, as
// AVX512-BF16's VCVTNEPS2BF16 (with its denormals-are-zero behaviour accounted for).
#include <catch2/catch.hpp>

#include <bit>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "halfgrad/precision/bfloat16.h"
#include "tests/precision/oracles.h"

namespace {

using hg::bfloat16;
using hg::precision::Rounding;
using hg::precision::oracle::bf16_reference;
using hg::precision::oracle::cpu_has_avx512bf16;
using hg::precision::oracle::hex16;
using hg::precision::oracle::hex32;
using hg::precision::oracle::hexfloat;

bool is_f32_subnormal(uint32_t bits) { return (bits & 0x7F800000) == 0 && (bits & 0x007FFFFF) != 0; }

}  // namespace

// A bf16 is the upper half of an f32, so decode is a shift (NaNs quieted: | 0x00400000);
// NaN round trip: bits | 0x0040 (2 * 63 signaling NaNs, mantissa 0x01..0x3F, become quiet).
TEST_CASE("bf16: all 65536 patterns decode to the upper half of an f32 and encode back", "[precision][bfloat16]") {
  int wrong_value = 0, wrong_round_trip = 0, quieted = 0;
  for (uint32_t bits = 0; bits <= 0xFFFF; ++bits) {
    const bool nan = (bits & 0x7F80) == 0x7F80 && (bits & 0x007F) != 0;
    const uint32_t expected_f_bits = (bits << 16) | (nan ? 0x00400000u : 0);
    const uint32_t expected_back = nan ? bits | 0x0040 : bits;
    quieted += expected_back != bits;
    const float f = bfloat16::from_bits(uint16_t(bits)).to_float();
    if (std::bit_cast<uint32_t>(f) != expected_f_bits && wrong_value++ == 0) {
      INFO("bf16 " << hex16(bits));
      CHECK(hex32(std::bit_cast<uint32_t>(f)) == hex32(expected_f_bits));
    }
    const uint16_t back = bfloat16(f).bits();
    if (back != expected_back && wrong_round_trip++ == 0) {
      INFO("bf16 " << hex16(bits));
      CHECK(hex16(back) == hex16(expected_back));
    }
  }
  CHECK(wrong_value == 0);
  CHECK(wrong_round_trip == 0);
  CHECK(quieted == 2 * 63);
}

// bf16 has f32's exponent range and 8 significant bits: the spacing in [1,2) is 2^-7; the
// smallest subnormal is 2^-133 (2^-126 * 2^-7); max = (2 - 2^-7) * 2^127 = 0x7F7F with spacing
// 2^120, so max + half ulp = (2 - 2^-8) * 2^127. Ties go to the even mantissa.
TEST_CASE("bf16 encode: every directed mode at hand-derived boundaries", "[precision][bfloat16]") {
  struct Case {
    double x;
    uint16_t nearest, toward_zero, up, down;
    const char* why;
  };
  const Case cases[] = {
      {1.0, 0x3F80, 0x3F80, 0x3F80, 0x3F80, "exact"},
      {1 + 0x1p-8, 0x3F80, 0x3F80, 0x3F81, 0x3F80, "tie, 1.0 is even"},
      {1 + 0x1p-8 + 0x1p-30, 0x3F81, 0x3F80, 0x3F81, 0x3F80, "just above the tie"},
      {1 + 3 * 0x1p-8, 0x3F82, 0x3F81, 0x3F82, 0x3F81, "tie between 0x3F81 (odd) and 0x3F82"},
      {0x1p-133, 0x0001, 0x0001, 0x0001, 0x0001, "smallest subnormal"},
      {0x1p-134, 0x0000, 0x0000, 0x0001, 0x0000, "half of it: tie, 0 is even"},
      {3 * 0x1p-134, 0x0002, 0x0001, 0x0002, 0x0001, "1.5 units: tie, 2 is even"},
      {127.5 * 0x1p-133, 0x0080, 0x007F, 0x0080, 0x007F,
       "tie between the largest subnormal (odd) and the smallest normal 2^-126"},
      {0x1.FEp127, 0x7F7F, 0x7F7F, 0x7F7F, 0x7F7F, "max, exact"},
      {0x1.FFp127, 0x7F80, 0x7F7F, 0x7F80, 0x7F7F, "max + half ulp: tie, max is odd: inf"},
      {0x1.FEFFFFFFp127, 0x7F7F, 0x7F7F, 0x7F80, 0x7F7F, "just below max + half ulp"},
      {0x1.FFFFFEp127, 0x7F80, 0x7F7F, 0x7F80, 0x7F7F, "FLT_MAX rounds to inf"},
      {0x1p200, 0x7F80, 0x7F7F, 0x7F80, 0x7F7F, "beyond f32"},
  };
  constexpr Rounding kModes[4] = {Rounding::kNearestEven, Rounding::kTowardZero, Rounding::kUp, Rounding::kDown};
  for (const Case& c : cases) {
    const uint16_t expected[4] = {c.nearest, c.toward_zero, c.up, c.down};
    const uint16_t mirrored[4] = {uint16_t(0x8000 | c.nearest), uint16_t(0x8000 | c.toward_zero),
                                  uint16_t(0x8000 | c.down), uint16_t(0x8000 | c.up)};
    for (int m = 0; m < 4; ++m) {
      INFO("x = " << hexfloat(c.x) << " (" << c.why << "), mode " << m);
      CHECK(hex16(bfloat16(c.x, {.mode = kModes[m]}).bits()) == hex16(expected[m]));
      CHECK(hex16(bfloat16(-c.x, {.mode = kModes[m]}).bits()) == hex16(mirrored[m]));
    }
  }
  CHECK(hex16(bfloat16(1e39, {.saturate = true}).bits()) == hex16(0x7F7F));
  CHECK(hex16(bfloat16(INFINITY, {.saturate = true}).bits()) == hex16(0x7F80));
  CHECK(hex16(bfloat16(0x1p-127, {.flush_subnormals = true}).bits()) == hex16(0x0000));
  CHECK(hex16(bfloat16(0x1p-126, {.flush_subnormals = true}).bits()) == hex16(0x0080));
}

// Fast, every run: all bf16 ties and their float neighbours, plus 1e6 random f32 patterns,
// against the classic formula (bf16_reference in oracles.h).
TEST_CASE("bf16: every tie and its float neighbours plus 1e6 random floats match the formula",
          "[precision][bfloat16]") {
  std::vector<uint32_t> in;
  for (uint32_t bits = 0; bits <= 0x7F7F; ++bits) {
    const uint32_t mid = (bits << 16) | 0x8000;  // the f32 halfway to the next bf16
    for (uint32_t x : {bits << 16, mid, mid - 1, mid + 1}) {
      in.push_back(x);
      in.push_back(x | 0x80000000u);
    }
  }
  std::mt19937 rng(8);
  for (int i = 0; i < 1000000; ++i) in.push_back(uint32_t(rng()));
  int mismatches = 0;
  for (uint32_t x : in) {
    const uint16_t ours = bfloat16(std::bit_cast<float>(x)).bits();
    if (ours != bf16_reference(x) && mismatches++ == 0) {
      INFO("f32 " << hex32(x));
      CHECK(hex16(ours) == hex16(bf16_reference(x)));
    }
  }
  CHECK(mismatches == 0);
}

// VCVTNEPS2BF16 (AVX512_BF16), per Intel's SDM entry "VCVTNEPS2BF16 - Convert Packed Single Data
// to Packed BF16 Data" (mirrored at https://www.felixcloutier.com/x86/vcvtneps2bf16): "This
// instruction uses 'Round to nearest (even)' rounding mode. Output denormals are always flushed
// to zero and input denormals are always treated as zero. MXCSR is not consulted nor updated."
// Its pseudocode maps a zero or denormal input to a zero of the same sign, NaN to the top half
// with bit 6 set (quiet), and everything else through the same +0x7FFF+LSB formula. (A normal
// f32 cannot round to a bf16 subnormal since both share the exponent range, so only the input
// side, DAZ, differs from IEEE.) We keep gradual underflow, so for the 2^24 - 2 subnormal f32
// inputs the hardware is compared with its documented DAZ result (a signed zero) and ours with
// the formula; all other inputs must match the hardware bit for bit.
TEST_CASE("bf16: VCVTNEPS2BF16 agrees on normal inputs and flushes subnormal inputs", "[precision][bfloat16][simd]") {
  if (!cpu_has_avx512bf16()) {
    WARN("this CPU has no AVX512-BF16: the VCVTNEPS2BF16 comparison is skipped");
    return;
  }
  std::vector<float> in = {0x1p-149f,       -0x1p-149f, 0x1.fffffcp-127f, 1.0f,
                           1.00390625f,     -0.0f,      INFINITY,         std::bit_cast<float>(0x7F800001u),
                           0x1.FFFFFEp127f, 0x1p-126f,  3.0e-39f,         -3.0e-39f,
                           1.01171875f,     0.1f,       65504.f,          1e-30f};
  while (in.size() % 16 != 0) in.push_back(0.f);  // the 512-bit form converts 16 at a time
  std::vector<uint16_t> cpu(in.size());
  hg::precision::oracle::avx512bf16_encode(in.data(), in.size(), cpu.data());
  for (size_t i = 0; i < in.size(); ++i) {
    const uint32_t x = std::bit_cast<uint32_t>(in[i]);
    INFO("f32 " << hex32(x));
    if (is_f32_subnormal(x)) {
      CHECK(hex16(cpu[i]) == hex16((x >> 16) & 0x8000));
      CHECK(hex16(bfloat16(in[i]).bits()) == hex16(bf16_reference(x)));
    } else {
      CHECK(hex16(bfloat16(in[i]).bits()) == hex16(cpu[i]));
    }
  }
}

// All 2^32 f32 patterns against the formula, and against VCVTNEPS2BF16 where the CPU has it
// (subnormal inputs: see the DAZ note above). Measured on this 2-core machine (Release, formula
// only, shared with other jobs): about 20 s of CPU, 11-22 s wall on 2 threads.
TEST_CASE("bf16: every f32 bit pattern encodes as the formula and as VCVTNEPS2BF16",
          "[precision][bfloat16][exhaustive]") {
  const bool hardware = cpu_has_avx512bf16();
  if (!hardware) WARN("this CPU has no AVX512-BF16: comparing with the formula only");
  const auto result = hg::precision::oracle::sweep_all_floats(
      [hardware](uint32_t base, const float* in, uint16_t* cpu, uint32_t n, uint64_t& first_bad) {
        if (hardware) hg::precision::oracle::avx512bf16_encode(in, n, cpu);
        uint64_t bad = 0;
        for (uint32_t i = 0; i < n; ++i) {
          const uint32_t x = base + i;
          const uint16_t ours = bfloat16(in[i]).bits();
          bool ok = ours == bf16_reference(x);
          if (hardware) {
            ok = ok && cpu[i] == (is_f32_subnormal(x) ? uint16_t((x >> 16) & 0x8000) : ours);
          }
          if (!ok && bad++ == 0) first_bad = x;
        }
        return bad;
      });
  if (result.mismatches != 0) {
    const uint32_t x = uint32_t(result.first_bits);
    INFO(result.mismatches << " mismatches; the first: f32 " << hex32(x));
    CHECK(hex16(bfloat16(std::bit_cast<float>(x)).bits()) == hex16(bf16_reference(x)));
    if (hardware) {
      std::vector<float> one(16, std::bit_cast<float>(x));
      std::vector<uint16_t> cpu(16);
      hg::precision::oracle::avx512bf16_encode(one.data(), 16, cpu.data());
      INFO("VCVTNEPS2BF16 gives " << hex16(cpu[0]));
      CHECK(result.mismatches == 0);
    }
  }
  CHECK(result.mismatches == 0);
}
