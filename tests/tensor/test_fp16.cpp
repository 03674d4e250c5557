// Checks the f16/bf16 <-> f32 conversions exhaustively over all 16-bit patterns and at every rounding
// boundary: round to nearest even, overflow to infinity, subnormals, NaN.
#include <gtest/gtest.h>

#include <bit>
#include <cfloat>
#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "support/isa_test.h"
#include "tensor/fp16.h"
#include "tensor/vec_ops.h"

namespace tessera {
namespace {

bool is_half_nan(uint16_t h) { return (h & 0x7c00u) == 0x7c00u && (h & 0x3ffu) != 0; }
bool is_bf16_nan(uint16_t h) { return (h & 0x7f80u) == 0x7f80u && (h & 0x7fu) != 0; }

// The value of a half from its definition, computed independently of fp16.h.
double half_value(uint16_t h) {
  const int exp = (h >> 10) & 0x1f;
  const int mant = h & 0x3ff;
  const double sign = (h & 0x8000u) ? -1.0 : 1.0;
  if (exp == 0x1f) return sign * std::numeric_limits<double>::infinity();
  if (exp == 0) return sign * std::ldexp(mant, -24);
  return sign * std::ldexp(1024 + mant, exp - 25);
}

// Correctly rounded (nearest, ties to even) value of x in a binary format with `mant_bits` stored mantissa
// bits, minimum normal exponent `emin` and largest finite value `max_finite`, computed in double.
double round_to_format(float x, int mant_bits, int emin, double max_finite) {
  if (x == 0.0f || std::isinf(x)) return x;
  int e;
  std::frexp(static_cast<double>(x), &e);  // |x| = m * 2^e with m in [0.5, 1)
  const int quantum_exp = std::max(e - 1, emin) - mant_bits;
  const double r = std::ldexp(std::nearbyint(std::ldexp(static_cast<double>(x), -quantum_exp)), quantum_exp);
  // Past the largest finite value by half a quantum or more, round-to-nearest gives infinity.
  const double limit = max_finite + std::ldexp(1.0, std::max(e - 1, emin) - mant_bits - 1);
  if (std::fabs(static_cast<double>(x)) >= limit) return std::copysign(std::numeric_limits<double>::infinity(), x);
  return r;
}

TEST(Fp16, EveryHalfDecodesToItsDefinedValue) {
  for (uint32_t i = 0; i < 65536; ++i) {
    const auto h = static_cast<uint16_t>(i);
    const float f = fp16_to_fp32(h);
    if (is_half_nan(h)) {
      EXPECT_TRUE(std::isnan(f)) << std::hex << i;
    } else {
      ASSERT_EQ(static_cast<double>(f), half_value(h)) << std::hex << i;
      ASSERT_EQ(std::signbit(f), (h & 0x8000u) != 0) << std::hex << i;
    }
  }
}

TEST(Fp16, AllNonNanHalvesRoundTripThroughF32) {
  int checked = 0;
  for (uint32_t i = 0; i < 65536; ++i) {
    const auto h = static_cast<uint16_t>(i);
    if (is_half_nan(h)) continue;
    ASSERT_EQ(fp32_to_fp16(fp16_to_fp32(h)), h) << std::hex << i;
    ++checked;
  }
  EXPECT_EQ(checked, 65536 - 2 * 1023);
}

// Adjacent halves h, h+1 (same sign): their midpoint is exact in f32 and must go to the even one; one f32 ulp
// either side must go to the nearer one. Covers every subnormal and normal rounding boundary.
TEST(Fp16, RoundsToNearestEvenAtEveryMidpoint) {
  for (uint16_t sign : {uint16_t{0}, uint16_t{0x8000}}) {
    for (uint16_t h = 0; h < 0x7bff; ++h) {
      const auto lo = static_cast<uint16_t>(sign | h);
      const auto hi = static_cast<uint16_t>(sign | (h + 1));
      const double mid_d = (half_value(lo) + half_value(hi)) / 2;
      const auto mid = static_cast<float>(mid_d);
      ASSERT_EQ(static_cast<double>(mid), mid_d);
      ASSERT_EQ(fp32_to_fp16(mid), (h % 2 == 0) ? lo : hi) << std::hex << h;
      ASSERT_EQ(fp32_to_fp16(std::nextafter(mid, 0.0f)), lo) << std::hex << h;
      ASSERT_EQ(fp32_to_fp16(std::nextafter(mid, sign ? -INFINITY : INFINITY)), hi) << std::hex << h;
    }
  }
}

TEST(Fp16, OverflowsToInfinity) {
  EXPECT_EQ(fp32_to_fp16(65504.0f), 0x7bffu);
  EXPECT_EQ(fp32_to_fp16(std::nextafter(65520.0f, 0.0f)), 0x7bffu);
  EXPECT_EQ(fp32_to_fp16(65520.0f), 0x7c00u);  // the tie rounds to the even "65536", which is infinity
  EXPECT_EQ(fp32_to_fp16(-65520.0f), 0xfc00u);
  EXPECT_EQ(fp32_to_fp16(1e10f), 0x7c00u);
  EXPECT_EQ(fp32_to_fp16(FLT_MAX), 0x7c00u);
  EXPECT_EQ(fp32_to_fp16(INFINITY), 0x7c00u);
  EXPECT_EQ(fp32_to_fp16(-INFINITY), 0xfc00u);
}

TEST(Fp16, SubnormalsAndUnderflow) {
  EXPECT_EQ(fp32_to_fp16(0x1p-24f), 0x0001u);                        // smallest subnormal
  EXPECT_EQ(fp32_to_fp16(0x1p-25f), 0x0000u);                        // tie between 0 and 2^-24 -> 0
  EXPECT_EQ(fp32_to_fp16(std::nextafter(0x1p-25f, 1.0f)), 0x0001u);  // just above the tie
  EXPECT_EQ(fp32_to_fp16(3 * 0x1p-25f), 0x0002u);                    // tie between 1 and 2 -> 2
  EXPECT_EQ(fp32_to_fp16(0x1p-14f), 0x0400u);                        // smallest normal
  EXPECT_EQ(fp32_to_fp16(std::nextafter(0x1p-14f, 0.0f)), 0x0400u);  // rounds up into the normals
  EXPECT_EQ(fp32_to_fp16(0x3ffp-24f), 0x03ffu);                      // largest subnormal
  EXPECT_EQ(fp32_to_fp16(std::numeric_limits<float>::denorm_min()), 0x0000u);
  EXPECT_EQ(fp32_to_fp16(-std::numeric_limits<float>::denorm_min()), 0x8000u);
  EXPECT_EQ(fp32_to_fp16(-0.0f), 0x8000u);
  EXPECT_EQ(fp16_to_fp32(0x0001u), 0x1p-24f);
  EXPECT_EQ(fp16_to_fp32(0x8001u), -0x1p-24f);
}

TEST(Fp16, NanStaysNan) {
  EXPECT_TRUE(is_half_nan(fp32_to_fp16(std::numeric_limits<float>::quiet_NaN())));
  EXPECT_TRUE(is_half_nan(fp32_to_fp16(std::bit_cast<float>(0x7f800001u))));  // signaling payload in the low bits
  EXPECT_TRUE(is_half_nan(fp32_to_fp16(std::bit_cast<float>(0xffc00000u))));
  EXPECT_TRUE(std::isnan(fp16_to_fp32(0x7e00u)));
}

// Random f32 across and beyond the half range against a rounding oracle computed in double.
TEST(Fp16, RandomValuesMatchCorrectRounding) {
  std::mt19937 rng(1234);
  std::uniform_int_distribution<uint32_t> mantissa(0, 0x7fffff);
  std::uniform_int_distribution<uint32_t> exponent(127 - 30, 127 + 17);
  for (int i = 0; i < 200000; ++i) {
    const uint32_t bits = (static_cast<uint32_t>(i & 1) << 31) | (exponent(rng) << 23) | mantissa(rng);
    const float x = std::bit_cast<float>(bits);
    const double want = round_to_format(x, 10, -14, 65504.0);
    ASSERT_EQ(static_cast<double>(fp16_to_fp32(fp32_to_fp16(x))), want) << std::hexfloat << x;
  }
}

// The KV cache's row conversions (VecOps::f32_to_f16 / f16_to_f32) on every path the CPU has: the same bits as
// fp16.h for every midpoint and its neighbours, overflow, subnormals and random values, at lengths that leave
// partial vectors.
// Each path is a test case of its own: one the CPU lacks is skipped, naming the missing ISA, never passed silently.
class Fp16Rows : public test::IsaTest {};

TEST_P(Fp16Rows, RowConversionsMatchTheScalar) {
  const Isa isa = GetParam();
  std::vector<float> x;
  for (uint16_t h = 0; h < 0x7bff; h += 7) {
    const auto mid = static_cast<float>((half_value(h) + half_value(static_cast<uint16_t>(h + 1))) / 2);
    for (float v : {mid, std::nextafter(mid, 0.0f), std::nextafter(mid, INFINITY)}) {
      x.push_back(v);
      x.push_back(-v);
    }
  }
  for (float v : {65504.0f, 65520.0f, 1e6f, INFINITY, -INFINITY, 0x1p-25f, 0x1p-24f, 3e-8f, 0.0f, -0.0f})
    x.push_back(v);
  std::mt19937 rng(5);
  std::normal_distribution<float> n(0.0f, 100.0f);
  for (int i = 0; i < 1001; ++i) x.push_back(n(rng));
  std::vector<uint16_t> want(x.size());
  for (size_t i = 0; i < x.size(); ++i) want[i] = fp32_to_fp16(x[i]);
  const VecOps& ops = VecOps::get(isa);
  for (size_t len : {x.size(), size_t{37}, size_t{5}}) {
    std::vector<uint16_t> got(len, 0xffff);
    ops.f32_to_f16(x.data(), got.data(), static_cast<int64_t>(len));
    for (size_t i = 0; i < len; ++i) ASSERT_EQ(got[i], want[i]) << isa_name(isa) << " " << std::hexfloat << x[i];
    std::vector<float> back(len);
    ops.f16_to_f32(got.data(), back.data(), static_cast<int64_t>(len));
    for (size_t i = 0; i < len; ++i) ASSERT_EQ(back[i], fp16_to_fp32(want[i])) << isa_name(isa) << " " << i;
  }
}

TESSERA_ISA_TEST_SUITE(Fp16Rows);

TEST(Bf16, AllNonNanValuesRoundTripThroughF32) {
  int checked = 0;
  for (uint32_t i = 0; i < 65536; ++i) {
    const auto h = static_cast<uint16_t>(i);
    if (is_bf16_nan(h)) continue;
    const float f = bf16_to_fp32(h);
    ASSERT_EQ(std::bit_cast<uint32_t>(f), i << 16);
    ASSERT_EQ(fp32_to_bf16(f), h) << std::hex << i;
    ++checked;
  }
  EXPECT_EQ(checked, 65536 - 2 * 127);
}

TEST(Bf16, RoundsToNearestEvenAtEveryMidpoint) {
  for (uint32_t sign : {0u, 0x8000u}) {
    for (uint32_t h = 0; h < 0x7f7f; ++h) {
      const auto lo = static_cast<uint16_t>(sign | h);
      const auto hi = static_cast<uint16_t>(sign | (h + 1));
      const double mid_d = (static_cast<double>(bf16_to_fp32(lo)) + bf16_to_fp32(hi)) / 2;
      const auto mid = static_cast<float>(mid_d);
      ASSERT_EQ(static_cast<double>(mid), mid_d);
      ASSERT_EQ(fp32_to_bf16(mid), (h % 2 == 0) ? lo : hi) << std::hex << h;
      ASSERT_EQ(fp32_to_bf16(std::nextafter(mid, 0.0f)), lo) << std::hex << h;
      ASSERT_EQ(fp32_to_bf16(std::nextafter(mid, sign ? -INFINITY : INFINITY)), hi) << std::hex << h;
    }
  }
}

TEST(Bf16, OverflowNanAndSubnormals) {
  EXPECT_EQ(fp32_to_bf16(FLT_MAX), 0x7f80u);  // FLT_MAX is past the last bf16 midpoint
  EXPECT_EQ(fp32_to_bf16(std::bit_cast<float>(0x7f7f7fffu)), 0x7f7fu);
  EXPECT_EQ(fp32_to_bf16(std::bit_cast<float>(0x7f7f8000u)), 0x7f80u);  // tie goes to the even: infinity
  EXPECT_EQ(fp32_to_bf16(INFINITY), 0x7f80u);
  EXPECT_EQ(fp32_to_bf16(-INFINITY), 0xff80u);
  EXPECT_TRUE(is_bf16_nan(fp32_to_bf16(std::numeric_limits<float>::quiet_NaN())));
  // A signaling NaN whose payload sits only in the low 16 bits must not truncate to infinity.
  EXPECT_TRUE(is_bf16_nan(fp32_to_bf16(std::bit_cast<float>(0x7f800001u))));
  EXPECT_EQ(fp32_to_bf16(std::numeric_limits<float>::denorm_min()), 0x0000u);  // tie between 0 and 2^-133
  EXPECT_EQ(fp32_to_bf16(std::bit_cast<float>(0x00018000u)), 0x0002u);         // tie between 1 and 2 -> 2
  EXPECT_EQ(fp32_to_bf16(-0.0f), 0x8000u);
}

TEST(Bf16, RandomValuesMatchCorrectRounding) {
  std::mt19937 rng(99);
  std::uniform_int_distribution<uint32_t> bits_dist;
  for (int i = 0; i < 200000; ++i) {
    const float x = std::bit_cast<float>(bits_dist(rng));
    if (std::isnan(x)) continue;
    const double want = round_to_format(x, 7, -126, static_cast<double>(std::bit_cast<float>(0x7f7f0000u)));
    ASSERT_EQ(static_cast<double>(bf16_to_fp32(fp32_to_bf16(x))), want) << std::hexfloat << x;
  }
}

}  // namespace
}  // namespace tessera
