// hg::half conversions (halfgrad/precision/half.h) against the CPU's own F16C instructions: all 65536
// patterns decode as VCVTPH2PS and round-trip; every f16 tie and its float neighbours (default
// run) and every one of the 2^32 f32 patterns (`[exhaustive]`) encode as VCVTPS2PH with
// round-to-nearest-even. Arithmetic is in test_small_float.cpp, rounding modes in
// test_float_format.cpp.
#include <catch2/catch.hpp>

#include <bit>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "halfgrad/precision/half.h"
#include "tests/precision/oracles.h"

namespace {

using hg::half;
using hg::precision::oracle::cpu_has_avx512f;
using hg::precision::oracle::cpu_has_f16c;
using hg::precision::oracle::hex16;
using hg::precision::oracle::hex32;

bool is_f16_nan(uint32_t bits) { return (bits & 0x7C00) == 0x7C00 && (bits & 0x03FF) != 0; }

}  // namespace

// IEEE 754 leaves the signaling/quiet distinction of a converted NaN to "quiet it": here a
// signaling f16 NaN (mantissa 0x001..0x1FF, quiet bit 0x200 clear) decodes to the quiet float
// NaN with the same sign and payload (mantissa << 13 | 0x400000) and so comes back quiet:
// bits | 0x0200. Quiet NaNs, infinities, zeros and every finite value come back unchanged.
TEST_CASE("f16: all 65536 patterns decode to their exact value and encode back", "[precision][half]") {
  int wrong_value = 0, wrong_round_trip = 0, quieted = 0;
  for (uint32_t bits = 0; bits <= 0xFFFF; ++bits) {
    const half h = half::from_bits(uint16_t(bits));
    const float f = h.to_float();
    const uint32_t f_bits = std::bit_cast<uint32_t>(f);
    uint32_t expected_f_bits;
    uint32_t expected_back = bits;
    if (is_f16_nan(bits)) {
      expected_f_bits = ((bits & 0x8000) << 16) | 0x7FC00000 | ((bits & 0x03FF) << 13);
      expected_back = bits | 0x0200;
      quieted += expected_back != bits;
    } else if ((bits & 0x7FFF) == 0x7C00) {
      expected_f_bits = ((bits & 0x8000) << 16) | 0x7F800000;
    } else {  // the value k * 2^-24 from integer arithmetic; the sign of zero from the sign bit
      const double value = std::ldexp(double(hg::precision::oracle::f16_units(uint16_t(bits))), -24);
      expected_f_bits = std::bit_cast<uint32_t>(std::copysign(float(value), (bits & 0x8000) ? -1.f : 1.f));
    }
    if (f_bits != expected_f_bits && wrong_value++ == 0) {
      INFO("f16 " << hex16(bits));
      CHECK(hex32(f_bits) == hex32(expected_f_bits));
    }
    const uint16_t back = half(f).bits();
    if (back != expected_back && wrong_round_trip++ == 0) {
      INFO("f16 " << hex16(bits) << " decoded to " << hex32(f_bits));
      CHECK(hex16(back) == hex16(expected_back));
    }
  }
  CHECK(wrong_value == 0);
  CHECK(wrong_round_trip == 0);
  CHECK(quieted == 2 * 511);  // both signs of mantissa 0x001..0x1FF: the signaling NaNs
}

// Observed on this machine's F16C (and in Intel's SDM pseudocode for VCVTPH2PS): a signaling
// f16 NaN comes out as the quiet float NaN with the payload kept, 0x7C01 -> 0x7FC02000, exactly
// what decode produces; so the comparison below includes every NaN bit for bit.
TEST_CASE("f16: decode equals F16C VCVTPH2PS on all 65536 patterns including NaNs", "[precision][half][simd]") {
  if (!cpu_has_f16c()) {
    WARN("this CPU has no F16C: the VCVTPH2PS comparison is skipped");
    return;
  }
  CHECK(hex32(std::bit_cast<uint32_t>(hg::precision::oracle::f16c_decode(0x7C01))) == hex32(0x7FC02000));
  int mismatches = 0;
  for (uint32_t bits = 0; bits <= 0xFFFF; ++bits) {
    const uint32_t ours = std::bit_cast<uint32_t>(half::from_bits(uint16_t(bits)).to_float());
    const uint32_t cpu = std::bit_cast<uint32_t>(hg::precision::oracle::f16c_decode(uint16_t(bits)));
    if (ours != cpu && mismatches++ == 0) {
      INFO("f16 " << hex16(bits) << ": decode vs VCVTPH2PS");
      CHECK(hex32(ours) == hex32(cpu));
    }
  }
  CHECK(mismatches == 0);
}

namespace {

// VCVTPS2PH over `in`, with the widest form this CPU has; in.size() a multiple of 16.
void cpu_encode_f16(const std::vector<float>& in, std::vector<uint16_t>& out) {
  out.resize(in.size());
  if (cpu_has_avx512f()) {
    hg::precision::oracle::avx512_encode_f16(in.data(), in.size(), out.data());
  } else {
    hg::precision::oracle::f16c_encode(in.data(), in.size(), out.data());
  }
}

uint16_t cpu_encode_f16(float x) {
  std::vector<float> in(16, x);
  std::vector<uint16_t> out;
  cpu_encode_f16(in, out);
  return out[0];
}

}  // namespace

// The places where rounding can go wrong, with F16C as the judge, fast enough for every run:
// each f16 value v, the midpoint between v and its successor (exact in float: 12 bits), and
// the floats one ulp either side of it, both signs; plus a million random f32 patterns.
TEST_CASE("f16: every tie and its float neighbours plus 1e6 random floats encode as F16C does",
          "[precision][half][simd]") {
  if (!cpu_has_f16c()) {
    WARN("this CPU has no F16C: the VCVTPS2PH comparison is skipped");
    return;
  }
  std::vector<float> in;
  for (uint32_t bits = 0; bits <= 0x7BFF; ++bits) {
    const float v = half::from_bits(uint16_t(bits)).to_float();
    const float next = bits == 0x7BFF ? 65536.f : half::from_bits(uint16_t(bits + 1)).to_float();
    const float mid = (v + next) / 2;  // exact: v and next differ in the 11th bit only
    for (float x : {v, mid, std::nextafter(mid, 0.f), std::nextafter(mid, INFINITY)}) {
      in.push_back(x);
      in.push_back(-x);
    }
  }
  std::mt19937 rng(16);
  for (int i = 0; i < 1000000; ++i) in.push_back(std::bit_cast<float>(uint32_t(rng())));
  while (in.size() % 16 != 0) in.push_back(0.f);
  std::vector<uint16_t> cpu;
  cpu_encode_f16(in, cpu);
  int mismatches = 0;
  for (size_t i = 0; i < in.size(); ++i) {
    const uint16_t ours = half(in[i]).bits();
    if (ours != cpu[i] && mismatches++ == 0) {
      INFO("f32 " << hex32(std::bit_cast<uint32_t>(in[i])) << ": half(float) vs VCVTPS2PH");
      CHECK(hex16(ours) == hex16(cpu[i]));
    }
  }
  CHECK(mismatches == 0);
}

// All 2^32 f32 patterns, in blocks of 2^16 over OpenMP threads. Measured on this 2-core machine
// (Release, no AVX-512, so the 256-bit F16C form), shared with other jobs: 20-23 s of CPU, 12-16 s
// wall on 2 threads; the cost is the scalar reference encode, about 4.5 ns a value.
TEST_CASE("f16: every f32 bit pattern encodes as F16C VCVTPS2PH (round to nearest even)",
          "[precision][half][exhaustive]") {
  if (!cpu_has_f16c()) {
    WARN("this CPU has no F16C: the exhaustive VCVTPS2PH comparison is skipped");
    return;
  }
  const bool wide = cpu_has_avx512f();
  const auto result = hg::precision::oracle::sweep_all_floats(
      [wide](uint32_t base, const float* in, uint16_t* cpu, uint32_t n, uint64_t& first_bad) {
        if (wide) {
          hg::precision::oracle::avx512_encode_f16(in, n, cpu);
        } else {
          hg::precision::oracle::f16c_encode(in, n, cpu);
        }
        uint64_t bad = 0;
        for (uint32_t i = 0; i < n; ++i) {
          if (half(in[i]).bits() != cpu[i] && bad++ == 0) first_bad = base + i;
        }
        return bad;
      });
  if (result.mismatches != 0) {
    const float x = std::bit_cast<float>(uint32_t(result.first_bits));
    INFO(result.mismatches << " mismatches; the first: f32 " << hex32(uint32_t(result.first_bits)));
    CHECK(hex16(half(x).bits()) == hex16(cpu_encode_f16(x)));
  }
  CHECK(result.mismatches == 0);
}

// The double constructor rounds once. x = 1 + 2^-11 + 2^-40 is just above a tie, so it rounds
// up to 0x3C01; through float it would first lose 2^-40 (float keeps 24 bits) and land exactly on
// the tie, which goes to even 0x3C00.
TEST_CASE("half(double) rounds once and half(float) rounds the float", "[precision][half]") {
  const double x = 1 + 0x1p-11 + 0x1p-40;
  CHECK(hex16(half(x).bits()) == hex16(0x3C01));
  CHECK(hex16(half(float(x)).bits()) == hex16(0x3C00));
  CHECK(hex16(half(0.1).bits()) == hex16(0x2E66));  // 0.1 = 0x1.999999...p-4 -> 0x1.998p-4
  CHECK(hex16(half(-65504.0f).bits()) == hex16(0xFBFF));
  CHECK(hex16(half().bits()) == hex16(0x0000));
}
