// Dot products of every weight format against its activation format on random blocks, and the errors and
// traits of the quant API for unsupported types and partial blocks.
#include <gtest/gtest.h>

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

template <typename Block, typename Fix>
void fix_blocks(std::vector<uint8_t>& bytes, Fix fix) {
  for (size_t off = 0; off + sizeof(Block) <= bytes.size(); off += sizeof(Block)) {
    Block b;
    std::memcpy(&b, bytes.data() + off, sizeof b);
    fix(b);
    std::memcpy(bytes.data() + off, &b, sizeof b);
  }
}

// A weight row of random bytes (every level and scale pattern occurs) whose float fields are set to finite
// values of moderate size; float formats get Gaussian values.
std::vector<uint8_t> random_weight_row(GgmlType type, int64_t n, std::mt19937& rng) {
  std::vector<uint8_t> bytes(row_size(type, n));
  for (auto& c : bytes) c = static_cast<uint8_t>(rng());
  std::uniform_real_distribution<float> uniform(-0.1f, 0.1f);
  auto h = [&] { return fp32_to_fp16(uniform(rng)); };
  switch (type) {
    case GgmlType::F32:
    case GgmlType::F16:
    case GgmlType::BF16: {
      const auto v = make_data(Dist::kNormal, n, static_cast<unsigned>(rng()));
      quantize_row(type, v.data(), bytes.data(), n);
      break;
    }
    case GgmlType::Q4_0:
      fix_blocks<BlockQ4_0>(bytes, [&](BlockQ4_0& b) { b.d = h(); });
      break;
    case GgmlType::Q4_1:
      fix_blocks<BlockQ4_1>(bytes, [&](BlockQ4_1& b) {
        b.d = h();
        b.m = h();
      });
      break;
    case GgmlType::Q5_0:
      fix_blocks<BlockQ5_0>(bytes, [&](BlockQ5_0& b) { b.d = h(); });
      break;
    case GgmlType::Q5_1:
      fix_blocks<BlockQ5_1>(bytes, [&](BlockQ5_1& b) {
        b.d = h();
        b.m = h();
      });
      break;
    case GgmlType::Q8_0:
      fix_blocks<BlockQ8_0>(bytes, [&](BlockQ8_0& b) { b.d = h(); });
      break;
    case GgmlType::Q8_1:
      fix_blocks<BlockQ8_1>(bytes, [&](BlockQ8_1& b) {
        b.d = h();
        b.s = h();
      });
      break;
    case GgmlType::Q2_K:
      fix_blocks<BlockQ2_K>(bytes, [&](BlockQ2_K& b) {
        b.d = h();
        b.dmin = h();
      });
      break;
    case GgmlType::Q3_K:
      fix_blocks<BlockQ3_K>(bytes, [&](BlockQ3_K& b) { b.d = h(); });
      break;
    case GgmlType::Q4_K:
      fix_blocks<BlockQ4_K>(bytes, [&](BlockQ4_K& b) {
        b.d = h();
        b.dmin = h();
      });
      break;
    case GgmlType::Q5_K:
      fix_blocks<BlockQ5_K>(bytes, [&](BlockQ5_K& b) {
        b.d = h();
        b.dmin = h();
      });
      break;
    case GgmlType::Q6_K:
      fix_blocks<BlockQ6_K>(bytes, [&](BlockQ6_K& b) { b.d = h(); });
      break;
    case GgmlType::Q8_K:
      fix_blocks<BlockQ8_K>(bytes, [&](BlockQ8_K& b) { b.d = uniform(rng); });
      break;
    case GgmlType::IQ4_NL:
      fix_blocks<BlockIQ4_NL>(bytes, [&](BlockIQ4_NL& b) { b.d = h(); });
      break;
    case GgmlType::IQ4_XS:
      fix_blocks<BlockIQ4_XS>(bytes, [&](BlockIQ4_XS& b) { b.d = h(); });
      break;
    default:
      ADD_FAILURE() << "no random rows for " << type_name(type);
  }
  return bytes;
}

constexpr GgmlType kDotTypes[] = {GgmlType::F32,    GgmlType::F16,   GgmlType::BF16, GgmlType::Q4_0, GgmlType::Q4_1,
                                  GgmlType::Q5_0,   GgmlType::Q5_1,  GgmlType::Q8_0, GgmlType::Q8_1, GgmlType::Q2_K,
                                  GgmlType::Q3_K,   GgmlType::Q4_K,  GgmlType::Q5_K, GgmlType::Q6_K, GgmlType::Q8_K,
                                  GgmlType::IQ4_NL, GgmlType::IQ4_XS};

class Dot : public ::testing::TestWithParam<GgmlType> {};

// vec_dot_row must equal the exact dot of the two dequantized rows (for Q4_1/Q5_1: with the activation's
// stored s standing in for d_x * sum(q_x) in the min term) to 1e-6 of the sum of |products|.
TEST_P(Dot, MatchesExactDotOfDequantizedRows) {
  const GgmlType type = GetParam();
  const GgmlType act = vec_dot_type(type);
  constexpr int64_t n = 1024;
  std::mt19937 rng(77);
  for (int trial = 0; trial < 16; ++trial) {
    const auto w = random_weight_row(type, n, rng);
    const auto x = make_data(trial % 2 ? Dist::kNormal : Dist::kOutliers, n, static_cast<unsigned>(rng()));
    std::vector<uint8_t> xq(row_size(act, n));
    quantize_row_activation(act, x.data(), xq.data(), n);
    std::vector<float> wd(n);
    std::vector<float> xd(n);
    dequantize_row(type, w.data(), wd.data(), n);
    dequantize_row(act, xq.data(), xd.data(), n);
    double exact = 0;
    double scale = 0;
    for (int64_t i = 0; i < n; ++i) {
      exact += static_cast<double>(wd[i]) * xd[i];
      scale += std::fabs(static_cast<double>(wd[i]) * xd[i]);
    }
    if (act == GgmlType::Q8_1) {
      const size_t wbytes = type_traits(type).type_size;
      for (int64_t b = 0; b < n / 32; ++b) {
        uint16_t m;  // Q4_1 and Q5_1 both keep the fp16 min at byte 2 of the block
        std::memcpy(&m, w.data() + b * wbytes + 2, 2);
        const auto xb = load<BlockQ8_1>(xq.data() + b * sizeof(BlockQ8_1));
        double block_sum = 0;
        for (int64_t i = 32 * b; i < 32 * b + 32; ++i) block_sum += xd[i];
        exact += static_cast<double>(fp16_to_fp32(m)) * (fp16_to_fp32(xb.s) - block_sum);
        scale += std::fabs(static_cast<double>(fp16_to_fp32(m)) * fp16_to_fp32(xb.s));
      }
    }
    const float dot = vec_dot_row(type, w.data(), xq.data(), n);
    ASSERT_GT(scale, 0.0);
    EXPECT_LE(std::fabs(dot - exact), 1e-6 * scale) << type_name(type) << " trial " << trial;
  }
}

INSTANTIATE_TEST_SUITE_P(Formats, Dot, ::testing::ValuesIn(kDotTypes), type_param_name);

template <typename F>
void expect_error_naming(F call, const std::string& needle) {
  try {
    call();
    ADD_FAILURE() << "no exception; expected one naming " << needle;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

TEST(QuantErrors, UnsupportedTypesThrowNamingTheType) {
  std::vector<float> f(512, 0.0f);
  std::vector<uint8_t> buf(4096, 0);
  expect_error_naming([&] { dequantize_row(GgmlType::IQ2_XXS, buf.data(), f.data(), 256); }, "iq2_xxs");
  expect_error_naming([&] { dequantize_row(GgmlType::I32, buf.data(), f.data(), 256); }, "i32");
  expect_error_naming([&] { dequantize_row(static_cast<GgmlType>(99), buf.data(), f.data(), 256); }, "99");
  expect_error_naming([&] { quantize_row(GgmlType::IQ2_XXS, f.data(), buf.data(), 256); }, "iq2_xxs");
  expect_error_naming([&] { quantize_row(GgmlType::MXFP4, f.data(), buf.data(), 256); }, "mxfp4");
  expect_error_naming([&] { quantize_row_activation(GgmlType::Q4_0, f.data(), buf.data(), 256); }, "q4_0");
  expect_error_naming([&] { vec_dot_type(GgmlType::IQ3_S); }, "iq3_s");
  expect_error_naming([&] { vec_dot_row(GgmlType::TQ1_0, buf.data(), buf.data(), 256); }, "tq1_0");
  expect_error_naming([&] { vec_dot_row(static_cast<GgmlType>(12345), buf.data(), buf.data(), 256); }, "12345");
}

TEST(QuantErrors, PartialBlocksAreRejected) {
  std::vector<float> f(512, 0.0f);
  std::vector<uint8_t> buf(4096, 0);
  expect_error_naming([&] { dequantize_row(GgmlType::Q4_0, buf.data(), f.data(), 33); }, "q4_0");
  expect_error_naming([&] { quantize_row(GgmlType::Q4_K, f.data(), buf.data(), 128); }, "q4_K");
  expect_error_naming([&] { quantize_row_activation(GgmlType::Q8_K, f.data(), buf.data(), 32); }, "q8_K");
  expect_error_naming([&] { vec_dot_row(GgmlType::Q6_K, buf.data(), buf.data(), 96); }, "q6_K");
  expect_error_naming([&] { dequantize_row(GgmlType::F16, buf.data(), f.data(), -1); }, "f16");
}

// The traits table's can_dequantize flag and dequantize_row agree; zero bytes decode to zeros everywhere.
TEST(QuantApi, DequantizeRowAcceptsExactlyTheDequantizableTypes) {
  std::vector<float> f(256, 1.0f);
  const std::vector<uint8_t> zeros(4096, 0);
  int supported = 0;
  for (uint32_t id = 0; id < 64; ++id) {
    const auto traits = find_type_traits(id);
    if (!traits) continue;
    if (traits->can_dequantize) {
      dequantize_row(traits->type, zeros.data(), f.data(), 256);
      for (float v : f) ASSERT_EQ(v, 0.0f) << traits->name;
      ++supported;
    } else {
      expect_error_naming([&] { dequantize_row(traits->type, zeros.data(), f.data(), 256); },
                          std::string(traits->name));
    }
  }
  EXPECT_EQ(supported, 17);
}

TEST(QuantApi, CanQuantizeAndVecDotType) {
  for (GgmlType t : {GgmlType::F32, GgmlType::F16, GgmlType::BF16, GgmlType::Q4_0, GgmlType::Q4_1, GgmlType::Q5_0,
                     GgmlType::Q5_1, GgmlType::Q8_0, GgmlType::Q8_1, GgmlType::Q2_K, GgmlType::Q3_K, GgmlType::Q4_K,
                     GgmlType::Q5_K, GgmlType::Q6_K, GgmlType::Q8_K, GgmlType::IQ4_NL, GgmlType::IQ4_XS}) {
    EXPECT_TRUE(can_quantize(t)) << type_name(t);
  }
  for (GgmlType t : {GgmlType::IQ2_XXS, GgmlType::I8, GgmlType::F64}) {
    EXPECT_FALSE(can_quantize(t)) << type_name(t);
  }
  EXPECT_EQ(vec_dot_type(GgmlType::F32), GgmlType::F32);
  EXPECT_EQ(vec_dot_type(GgmlType::F16), GgmlType::F16);
  EXPECT_EQ(vec_dot_type(GgmlType::BF16), GgmlType::BF16);
  for (GgmlType t : {GgmlType::Q4_0, GgmlType::Q5_0, GgmlType::Q8_0, GgmlType::IQ4_NL}) {
    EXPECT_EQ(vec_dot_type(t), GgmlType::Q8_0) << type_name(t);
  }
  for (GgmlType t : {GgmlType::Q4_1, GgmlType::Q5_1}) EXPECT_EQ(vec_dot_type(t), GgmlType::Q8_1) << type_name(t);
  for (GgmlType t :
       {GgmlType::Q2_K, GgmlType::Q3_K, GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::Q6_K, GgmlType::IQ4_XS}) {
    EXPECT_EQ(vec_dot_type(t), GgmlType::Q8_K) << type_name(t);
  }
}

}  // namespace
}  // namespace tessera
