// Round-trip error bounds of every quantizer on seeded random data, activation rounding rules, dot products
// on random blocks, and the errors for unsupported types. The bounds are documented in docs/quant-formats.md:
//
//   format       bound on |x - dequant(quant(x))|, per block (A = max|x|, lo/hi = min/max of the block)
//   Q4_0         d + 8 e(d)              with d = A/8     (the positive extreme is clipped to +7 steps)
//   Q5_0         d + 16 e(d)             with d = A/16
//   Q8_0, Q8_1   d/2 + 128 e(d)          with d = A/127   (weights and activations)
//   Q4_1         d/2 + 15 e(d) + e(lo)   with d = (hi-lo)/15
//   Q5_1         d/2 + 31 e(d) + e(lo)   with d = (hi-lo)/31
//   Q8_K         d/2                     with d = A/127   (f32 scale)
//   F16          e(x);   BF16  2^-8 |x|;   F32  exact
// where e(v) = 2^-11 |v| + 2^-25 bounds the error of storing v as an fp16 (subnormals included).
// K-quants (Q2_K..Q6_K) fit their scales, so the provable property is structural: with the block's stored
// scale s and offset m per group, each value rounds to the nearest level s*l - m, or to the nearest end
// of the level range when it lies outside. On N(0,1) data they also meet (measured, with margin):
// max error <= 1.5 * (max(hi,0) - min(lo,0)) / (2^bits - 1) per group, and the RMSE limits in kRmseLimit.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "tensor/fp16.h"
#include "tensor/ggml_type.h"
#include "tensor/quant.h"
#include "tensor/quant_blocks.h"
#include "tensor/quant_test_data.h"
#include "util/error.h"

namespace tessera {
namespace {

using namespace quant;
using namespace quant_test;

std::vector<float> round_trip(GgmlType type, const std::vector<float>& x) {
  const auto n = static_cast<int64_t>(x.size());
  std::vector<uint8_t> q(row_size(type, n));
  quantize_row(type, x.data(), q.data(), n);
  std::vector<float> y(x.size());
  dequantize_row(type, q.data(), y.data(), n);
  return y;
}

double fp16_store_error(double v) { return std::ldexp(std::fabs(v), -11) + std::ldexp(1.0, -25); }

// The input-based bound of the table above for one block (32 elements, 256 for Q8_K).
double block_bound(GgmlType type, const float* x, int n) {
  double amax = 0;
  double lo = x[0];
  double hi = x[0];
  for (int i = 0; i < n; ++i) {
    amax = std::max(amax, static_cast<double>(std::fabs(x[i])));
    lo = std::min(lo, static_cast<double>(x[i]));
    hi = std::max(hi, static_cast<double>(x[i]));
  }
  double bound = 0;
  switch (type) {
    case GgmlType::Q4_0:
      bound = amax / 8 + 8 * fp16_store_error(amax / 8);
      break;
    case GgmlType::Q5_0:
      bound = amax / 16 + 16 * fp16_store_error(amax / 16);
      break;
    case GgmlType::Q8_0:
    case GgmlType::Q8_1:
      bound = amax / 127 / 2 + 128 * fp16_store_error(amax / 127);
      break;
    case GgmlType::Q4_1:
      bound = (hi - lo) / 15 / 2 + 15 * fp16_store_error((hi - lo) / 15) + fp16_store_error(lo);
      break;
    case GgmlType::Q5_1:
      bound = (hi - lo) / 31 / 2 + 31 * fp16_store_error((hi - lo) / 31) + fp16_store_error(lo);
      break;
    case GgmlType::Q8_K:
      bound = amax / 127 / 2;
      break;
    default:
      ADD_FAILURE() << "no input-based bound for " << type_name(type);
  }
  return bound + 1e-6 * amax;  // float rounding in the quantizer's own arithmetic
}

struct BoundCase {
  GgmlType type;
  bool activation;  // quantize_row_activation instead of quantize_row
};

class InputBound : public ::testing::TestWithParam<BoundCase> {};

TEST_P(InputBound, HoldsOnEveryBlockOfEveryDistribution) {
  const auto [type, activation] = GetParam();
  const int bs = static_cast<int>(type_traits(type).block_size);
  unsigned seed = 10;
  for (Dist dist : kAllDists) {
    const auto x = make_data(dist, 256 * 32, seed++);
    const auto n = static_cast<int64_t>(x.size());
    std::vector<uint8_t> q(row_size(type, n));
    if (activation) {
      quantize_row_activation(type, x.data(), q.data(), n);
    } else {
      quantize_row(type, x.data(), q.data(), n);
    }
    std::vector<float> y(x.size());
    dequantize_row(type, q.data(), y.data(), n);
    for (int64_t b = 0; b < n; b += bs) {
      const double bound = block_bound(type, x.data() + b, bs);
      for (int64_t i = b; i < b + bs; ++i) {
        ASSERT_LE(std::fabs(static_cast<double>(x[i]) - y[i]), bound)
            << type_name(type) << " distribution " << static_cast<int>(dist) << " element " << i;
      }
    }
  }
}

std::string bound_name(const ::testing::TestParamInfo<BoundCase>& info) {
  return std::string(type_name(info.param.type)) + (info.param.activation ? "_activation" : "_weights");
}

INSTANTIATE_TEST_SUITE_P(Formats, InputBound,
                         ::testing::Values(BoundCase{GgmlType::Q4_0, false}, BoundCase{GgmlType::Q4_1, false},
                                           BoundCase{GgmlType::Q5_0, false}, BoundCase{GgmlType::Q5_1, false},
                                           BoundCase{GgmlType::Q8_0, false}, BoundCase{GgmlType::Q8_1, false},
                                           BoundCase{GgmlType::Q8_K, false}, BoundCase{GgmlType::Q8_0, true},
                                           BoundCase{GgmlType::Q8_1, true}, BoundCase{GgmlType::Q8_K, true}),
                         bound_name);

TEST(FloatFormats, RoundTripErrorBounds) {
  unsigned seed = 30;
  for (Dist dist : kAllDists) {
    const auto x = make_data(dist, 4096, seed++);
    const auto f32 = round_trip(GgmlType::F32, x);
    const auto f16 = round_trip(GgmlType::F16, x);
    const auto bf16 = round_trip(GgmlType::BF16, x);
    for (size_t i = 0; i < x.size(); ++i) {
      const double v = x[i];
      ASSERT_EQ(f32[i], x[i]);
      ASSERT_LE(std::fabs(v - f16[i]), fp16_store_error(v)) << v;
      ASSERT_LE(std::fabs(v - bf16[i]), std::ldexp(std::fabs(v), -8)) << v;
    }
  }
}

// One group of a K-quant block: values step * l - offset for integer l in [lo, hi].
struct Group {
  int first;
  int size;
  double step;
  double offset;
  int lo;
  int hi;
};

// The step and offset of each group exactly as the dequantizer forms them (f32 products of the stored fields).
std::vector<Group> k_groups(GgmlType type, const uint8_t* p) {
  std::vector<Group> groups;
  switch (type) {
    case GgmlType::Q2_K: {
      const auto b = load<BlockQ2_K>(p);
      for (int g = 0; g < 16; ++g) {
        groups.push_back({16 * g, 16, fp16_to_fp32(b.d) * static_cast<float>(b.scales[g] & 0xf),
                          fp16_to_fp32(b.dmin) * static_cast<float>(b.scales[g] >> 4), 0, 3});
      }
      break;
    }
    case GgmlType::Q3_K: {
      const auto b = load<BlockQ3_K>(p);
      for (int g = 0; g < 16; ++g) {
        groups.push_back({16 * g, 16, fp16_to_fp32(b.d) * static_cast<float>(q3k_scale(b.scales, g)), 0.0, -4, 3});
      }
      break;
    }
    case GgmlType::Q4_K:
    case GgmlType::Q5_K: {
      // d, dmin and scales sit at the same offsets in both blocks.
      const auto b = load<BlockQ4_K>(p);
      for (int g = 0; g < 8; ++g) {
        uint8_t sc;
        uint8_t m;
        get_scale_min_k4(g, b.scales, sc, m);
        groups.push_back({32 * g, 32, fp16_to_fp32(b.d) * static_cast<float>(sc),
                          fp16_to_fp32(b.dmin) * static_cast<float>(m), 0, type == GgmlType::Q4_K ? 15 : 31});
      }
      break;
    }
    case GgmlType::Q6_K: {
      const auto b = load<BlockQ6_K>(p);
      for (int g = 0; g < 16; ++g) {
        groups.push_back({16 * g, 16, fp16_to_fp32(b.d) * static_cast<float>(b.scales[g]), 0.0, -32, 31});
      }
      break;
    }
    default:
      ADD_FAILURE() << "not a K-quant: " << type_name(type);
  }
  return groups;
}

constexpr GgmlType kKQuants[] = {GgmlType::Q2_K, GgmlType::Q3_K, GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::Q6_K};

class KQuant : public ::testing::TestWithParam<GgmlType> {};

TEST_P(KQuant, EveryValueGoesToTheNearestLevelOfItsGroup) {
  const GgmlType type = GetParam();
  const size_t bytes = type_traits(type).type_size;
  unsigned seed = 50;
  for (Dist dist : kAllDists) {
    const auto x = make_data(dist, 256 * 32, seed++);
    const auto n = static_cast<int64_t>(x.size());
    std::vector<uint8_t> q(row_size(type, n));
    quantize_row(type, x.data(), q.data(), n);
    std::vector<float> y(x.size());
    dequantize_row(type, q.data(), y.data(), n);
    for (int64_t sb = 0; sb < n / 256; ++sb) {
      for (const Group& g : k_groups(type, q.data() + sb * bytes)) {
        const double a = g.step * g.lo - g.offset;
        const double b = g.step * g.hi - g.offset;
        const double lo = std::min(a, b);
        const double hi = std::max(a, b);
        for (int64_t i = sb * 256 + g.first; i < sb * 256 + g.first + g.size; ++i) {
          const double v = x[i];
          const double slack = 1e-6 * (std::fabs(v) + std::fabs(g.offset) + std::fabs(g.step) * (g.hi - g.lo));
          const double nearest_end = std::clamp(v, lo, hi);
          const double err =
              v >= lo && v <= hi ? std::fabs(v - y[i]) - std::fabs(g.step) / 2 : std::fabs(nearest_end - y[i]);
          ASSERT_LE(err, slack) << type_name(type) << " distribution " << static_cast<int>(dist) << " element " << i
                                << ": x " << v << " -> " << y[i] << ", step " << g.step << ", offset " << g.offset;
        }
      }
    }
  }
}

int bits_of(GgmlType type) {
  switch (type) {
    case GgmlType::Q2_K:
      return 2;
    case GgmlType::Q3_K:
      return 3;
    case GgmlType::Q4_K:
      return 4;
    case GgmlType::Q5_K:
      return 5;
    default:
      return 6;
  }
}

// Measured rmse / rms on N(0,1) was 0.297, 0.151, 0.072, 0.036, 0.018 (Q2_K..Q6_K); limits leave ~10%.
double rmse_limit(GgmlType type) {
  switch (type) {
    case GgmlType::Q2_K:
      return 0.33;
    case GgmlType::Q3_K:
      return 0.165;
    case GgmlType::Q4_K:
      return 0.08;
    case GgmlType::Q5_K:
      return 0.04;
    default:
      return 0.02;
  }
}

TEST_P(KQuant, GaussianDataMeetsTheDocumentedBounds) {
  const GgmlType type = GetParam();
  const int group = (type == GgmlType::Q4_K || type == GgmlType::Q5_K) ? 32 : 16;
  const double levels = std::ldexp(1.0, bits_of(type)) - 1;
  for (unsigned seed : {1u, 2u, 3u}) {
    const auto x = make_data(Dist::kNormal, 256 * 64, seed);
    const auto y = round_trip(type, x);
    double err2 = 0;
    double sum2 = 0;
    for (size_t g = 0; g < x.size(); g += static_cast<size_t>(group)) {
      const auto first = x.begin() + static_cast<std::ptrdiff_t>(g);
      const auto [mn, mx] = std::minmax_element(first, first + group);
      const double step = (std::max(*mx, 0.0f) - std::min(*mn, 0.0f)) / levels;
      for (size_t i = g; i < g + static_cast<size_t>(group); ++i) {
        const double e = static_cast<double>(x[i]) - y[i];
        ASSERT_LE(std::fabs(e), 1.5 * step) << type_name(type) << " element " << i;
        err2 += e * e;
        sum2 += static_cast<double>(x[i]) * x[i];
      }
    }
    EXPECT_LE(std::sqrt(err2 / sum2), rmse_limit(type)) << type_name(type) << " seed " << seed;
  }
}

INSTANTIATE_TEST_SUITE_P(Formats, KQuant, ::testing::ValuesIn(kKQuants), type_param_name);

// Legacy formats, Q8_K and the IQ4 formats on N(0,1): measured rmse / rms, limits with ~10% margin (IQ4_NL 0.075,
// IQ4_XS 0.076: below Q4_0 at the same bits, as their non-linear table intends).
TEST(Quantize, GaussianRmseOfTheOtherFormats) {
  const struct {
    GgmlType type;
    double limit;
  } cases[] = {{GgmlType::Q4_0, 0.095},  {GgmlType::Q4_1, 0.087},   {GgmlType::Q5_0, 0.048},  {GgmlType::Q5_1, 0.042},
               {GgmlType::Q8_0, 0.006},  {GgmlType::Q8_1, 0.006},   {GgmlType::Q8_K, 0.008},  {GgmlType::F16, 0.00025},
               {GgmlType::BF16, 0.0019}, {GgmlType::IQ4_NL, 0.083}, {GgmlType::IQ4_XS, 0.083}};
  const auto x = make_data(Dist::kNormal, 256 * 64, 7);
  for (const auto& c : cases) {
    const auto y = round_trip(c.type, x);
    double err2 = 0;
    double sum2 = 0;
    for (size_t i = 0; i < x.size(); ++i) {
      err2 += (static_cast<double>(x[i]) - y[i]) * (static_cast<double>(x[i]) - y[i]);
      sum2 += static_cast<double>(x[i]) * x[i];
    }
    EXPECT_LE(std::sqrt(err2 / sum2), c.limit) << type_name(c.type);
  }
}

TEST(Quantize, AllZeroInputGivesZeros) {
  for (GgmlType type : {GgmlType::Q4_0, GgmlType::Q4_1, GgmlType::Q5_0, GgmlType::Q5_1, GgmlType::Q8_0, GgmlType::Q8_1,
                        GgmlType::Q2_K, GgmlType::Q3_K, GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::Q6_K, GgmlType::Q8_K,
                        GgmlType::IQ4_NL, GgmlType::IQ4_XS}) {
    const std::vector<float> x(512, 0.0f);
    const auto y = round_trip(type, x);
    for (float v : y) ASSERT_EQ(v, 0.0f) << type_name(type);
  }
}

// On exact ties the activation path rounds half to even (ggml's AVX2 code); the weight quantizer rounds
// half away from zero (ggml's reference). amax = 127 makes the scale exactly 1.
TEST(Activation, Q8_0RoundsTiesToEvenWeightsAwayFromZero) {
  std::vector<float> x(32, 0.0f);
  x[0] = 127.0f;
  x[1] = 2.5f;
  x[2] = -2.5f;
  x[3] = 3.5f;
  x[4] = 0.5f;
  BlockQ8_0 act{};
  BlockQ8_0 ref{};
  quantize_row_activation(GgmlType::Q8_0, x.data(), &act, 32);
  quantize_row(GgmlType::Q8_0, x.data(), &ref, 32);
  EXPECT_EQ(fp16_to_fp32(act.d), 1.0f);
  EXPECT_EQ(act.qs[0], 127);
  EXPECT_EQ(act.qs[1], 2);
  EXPECT_EQ(act.qs[2], -2);
  EXPECT_EQ(act.qs[3], 4);
  EXPECT_EQ(act.qs[4], 0);
  EXPECT_EQ(ref.qs[1], 3);
  EXPECT_EQ(ref.qs[2], -3);
  EXPECT_EQ(ref.qs[3], 4);
  EXPECT_EQ(ref.qs[4], 1);
}

// s = fp16(d * sum(q)) with the unrounded f32 d = amax/127, as ggml's from_float computes it.
TEST(Activation, Q8_1StoresScaledSum) {
  const auto x = make_data(Dist::kNormal, 64, 3);
  BlockQ8_1 blocks[2];
  quantize_row_activation(GgmlType::Q8_1, x.data(), blocks, 64);
  for (int i = 0; i < 2; ++i) {
    float amax = 0;
    for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(x[32 * i + j]));
    int sum = 0;
    for (int8_t q : blocks[i].qs) sum += q;
    EXPECT_NE(sum, 0);
    EXPECT_EQ(blocks[i].d, fp32_to_fp16(amax / 127.0f));
    EXPECT_EQ(blocks[i].s, fp32_to_fp16(amax / 127.0f * static_cast<float>(sum)));
  }
}

// Q8_K takes its scale from the signed value of largest magnitude (the first on ties), stores d = 1/iscale
// as f32 and the sums of each 16 quants.
TEST(Activation, Q8_KUsesFirstSignedMaxAndGroupSums) {
  auto x = make_data(Dist::kNormal, 256, 5);
  for (auto& v : x) v = std::clamp(v, -4.0f, 4.0f);
  x[10] = -5.0f;
  x[20] = 5.0f;
  BlockQ8_K b{};
  quantize_row_activation(GgmlType::Q8_K, x.data(), &b, 256);
  EXPECT_EQ(b.qs[10], -127);
  EXPECT_EQ(b.qs[20], 127);
  EXPECT_EQ(b.d, 1.0f / (-127.0f / -5.0f));
  for (int g = 0; g < 16; ++g) {
    int sum = 0;
    for (int e = 16 * g; e < 16 * g + 16; ++e) sum += b.qs[e];
    EXPECT_EQ(b.bsums[g], sum) << "group " << g;
  }
  std::swap(x[10], x[20]);
  quantize_row_activation(GgmlType::Q8_K, x.data(), &b, 256);
  EXPECT_EQ(b.qs[10], -127);
  EXPECT_LT(b.d, 0.0f);

  const std::vector<float> zeros(256, 0.0f);
  quantize_row_activation(GgmlType::Q8_K, zeros.data(), &b, 256);
  EXPECT_EQ(b.d, 0.0f);
  for (int g = 0; g < 16; ++g) EXPECT_EQ(b.bsums[g], 0);
}

}  // namespace
}  // namespace tessera
