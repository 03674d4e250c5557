// Checks the reference codecs against ggml's own output in shared/fixtures/quant (see its README.md):
// dequantization bit for bit, quantization byte for byte, activation conversion and per-row dot products.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cctype>
#include <cmath>
#include <cstring>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "support/test_paths.h"
#include "tensor/ggml_type.h"
#include "tensor/quant.h"

namespace tessera {
namespace {

constexpr int64_t kRowLen = 256;
constexpr int kRows = 8;

std::filesystem::path fixture(const std::string& name) { return test::shared_dir() / "fixtures" / "quant" / name; }

// Fixture files are named after the upper-case type: "Q4_K", "IQ4_NL", "BF16".
std::string stem(GgmlType type) {
  std::string s(type_name(type));
  for (char& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return s;
}

// The raw tensor bytes of <T>.gguf: 8 rows, starting at byte 256 (float types) or 320 (quantized).
std::vector<uint8_t> tensor_bytes(GgmlType type) {
  const auto file = test::read_file(fixture(stem(type) + ".gguf"));
  const size_t offset = type_traits(type).quantized ? 320 : 256;
  const size_t size = row_size(type, kRowLen) * kRows;
  // The tensor is the last thing in the file, padded to GGUF's 32-byte alignment.
  EXPECT_EQ(file.size(), offset + (size + 31) / 32 * 32) << "the tensor should fill the file after the header";
  if (file.size() < offset + size) return {};
  return {file.begin() + static_cast<std::ptrdiff_t>(offset),
          file.begin() + static_cast<std::ptrdiff_t>(offset + size)};
}

double row_rmse(const float* a, const float* b, int64_t n) {
  double sum = 0;
  for (int64_t i = 0; i < n; ++i) {
    const double d = static_cast<double>(a[i]) - b[i];
    sum += d * d;
  }
  return std::sqrt(sum / static_cast<double>(n));
}

constexpr GgmlType kFixtureTypes[] = {GgmlType::F32,  GgmlType::F16,    GgmlType::BF16,  GgmlType::Q8_0,
                                      GgmlType::Q4_0, GgmlType::Q4_1,   GgmlType::Q5_0,  GgmlType::Q5_1,
                                      GgmlType::Q2_K, GgmlType::Q3_K,   GgmlType::Q4_K,  GgmlType::Q5_K,
                                      GgmlType::Q6_K, GgmlType::IQ4_NL, GgmlType::IQ4_XS};

// Every quantizer is byte-exact with ggml on this fixture; IQ4_NL/IQ4_XS are dequantize-only.
constexpr GgmlType kQuantizableFixtureTypes[] = {
    GgmlType::F32,  GgmlType::F16,  GgmlType::BF16, GgmlType::Q8_0, GgmlType::Q4_0, GgmlType::Q4_1, GgmlType::Q5_0,
    GgmlType::Q5_1, GgmlType::Q2_K, GgmlType::Q3_K, GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::Q6_K};

std::string param_name(const ::testing::TestParamInfo<GgmlType>& info) { return stem(info.param); }

class FixtureDequant : public ::testing::TestWithParam<GgmlType> {};

TEST_P(FixtureDequant, MatchesGgmlBitForBit) {
  const GgmlType type = GetParam();
  const auto bytes = tensor_bytes(type);
  ASSERT_FALSE(bytes.empty());
  const auto expected = test::read_floats(fixture(stem(type) + ".dequant.f32"));
  ASSERT_EQ(expected.size(), static_cast<size_t>(kRows * kRowLen));
  const size_t rs = row_size(type, kRowLen);
  std::vector<float> got(kRowLen);
  for (int r = 0; r < kRows; ++r) {
    dequantize_row(type, bytes.data() + r * rs, got.data(), kRowLen);
    for (int64_t i = 0; i < kRowLen; ++i) {
      const float want = expected[static_cast<size_t>(r * kRowLen + i)];
      ASSERT_EQ(std::bit_cast<uint32_t>(got[static_cast<size_t>(i)]), std::bit_cast<uint32_t>(want))
          << "row " << r << " element " << i << ": got " << got[static_cast<size_t>(i)] << ", ggml " << want;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(AllTypes, FixtureDequant, ::testing::ValuesIn(kFixtureTypes), param_name);

class FixtureQuantize : public ::testing::TestWithParam<GgmlType> {};

TEST_P(FixtureQuantize, MatchesGgmlBytes) {
  const GgmlType type = GetParam();
  ASSERT_TRUE(can_quantize(type));
  const auto expected = tensor_bytes(type);
  ASSERT_FALSE(expected.empty());
  const auto src = test::read_floats(fixture("src.f32"));
  ASSERT_EQ(src.size(), static_cast<size_t>(kRows * kRowLen));
  const size_t rs = row_size(type, kRowLen);
  std::vector<uint8_t> got(rs);
  for (int r = 0; r < kRows; ++r) {
    quantize_row(type, src.data() + r * kRowLen, got.data(), kRowLen);
    for (size_t b = 0; b < rs; ++b) {
      ASSERT_EQ(got[b], expected[r * rs + b])
          << "row " << r << " byte " << b << " (block " << b / type_traits(type).type_size << ", offset "
          << b % type_traits(type).type_size << ")";
    }
  }
}

// Independent of byte equality: our round trip must not lose more than ggml's, row by row.
TEST_P(FixtureQuantize, RoundTripRmseWithinFivePercentOfGgml) {
  const GgmlType type = GetParam();
  const auto src = test::read_floats(fixture("src.f32"));
  const auto ggml = test::read_floats(fixture(stem(type) + ".dequant.f32"));
  ASSERT_EQ(src.size(), static_cast<size_t>(kRows * kRowLen));
  ASSERT_EQ(ggml.size(), src.size());
  std::vector<uint8_t> q(row_size(type, kRowLen));
  std::vector<float> back(kRowLen);
  for (int r = 0; r < kRows; ++r) {
    const float* x = src.data() + r * kRowLen;
    quantize_row(type, x, q.data(), kRowLen);
    dequantize_row(type, q.data(), back.data(), kRowLen);
    const double ours = row_rmse(x, back.data(), kRowLen);
    const double theirs = row_rmse(x, ggml.data() + r * kRowLen, kRowLen);
    EXPECT_LE(ours, 1.05 * theirs) << "row " << r;
  }
}

INSTANTIATE_TEST_SUITE_P(QuantizableTypes, FixtureQuantize, ::testing::ValuesIn(kQuantizableFixtureTypes), param_name);

struct ActivationCase {
  GgmlType type;
  const char* file;
};

std::string activation_name(const ::testing::TestParamInfo<ActivationCase>& info) { return stem(info.param.type); }

class FixtureActivation : public ::testing::TestWithParam<ActivationCase> {};

TEST_P(FixtureActivation, MatchesGgmlFromFloat) {
  const auto [type, file] = GetParam();
  const auto x = test::read_floats(fixture("x.f32"));
  ASSERT_EQ(x.size(), static_cast<size_t>(kRowLen));
  const auto expected = test::read_file(fixture(file));
  std::vector<uint8_t> got(row_size(type, kRowLen));
  ASSERT_EQ(got.size(), expected.size());
  quantize_row_activation(type, x.data(), got.data(), kRowLen);
  for (size_t b = 0; b < got.size(); ++b) ASSERT_EQ(got[b], expected[b]) << file << " byte " << b;
}

INSTANTIATE_TEST_SUITE_P(VecDotTypes, FixtureActivation,
                         ::testing::Values(ActivationCase{GgmlType::Q8_0, "x.q8_0.bin"},
                                           ActivationCase{GgmlType::Q8_1, "x.q8_1.bin"},
                                           ActivationCase{GgmlType::Q8_K, "x.q8_K.bin"},
                                           ActivationCase{GgmlType::F16, "x.f16.bin"},
                                           ActivationCase{GgmlType::BF16, "x.bf16.bin"}),
                         activation_name);

class FixtureDot : public ::testing::TestWithParam<GgmlType> {};

// The activation is converted by us (checked byte-exact above) and each row's dot is compared with the exact
// double dot of the dequantized operands from <T>.dot.json. ggml's own vec_dot stays within 1.06e-7 relative.
TEST_P(FixtureDot, MatchesExactDotPerRow) {
  const GgmlType type = GetParam();
  const auto json = nlohmann::json::parse(test::read_file(fixture(stem(type) + ".dot.json")));
  ASSERT_EQ(json.at("ggml_type_id").get<uint32_t>(), static_cast<uint32_t>(type));
  const GgmlType act = vec_dot_type(type);
  ASSERT_EQ(json.at("vec_dot_type_id").get<uint32_t>(), static_cast<uint32_t>(act));
  const auto weights = tensor_bytes(type);
  ASSERT_FALSE(weights.empty());
  const auto x = test::read_floats(fixture("x.f32"));
  std::vector<uint8_t> xq(row_size(act, kRowLen));
  quantize_row_activation(act, x.data(), xq.data(), kRowLen);
  const bool uses_q8_1_s = act == GgmlType::Q8_1;
  const size_t rs = row_size(type, kRowLen);
  const auto& rows = json.at("rows");
  ASSERT_EQ(rows.size(), static_cast<size_t>(kRows));
  for (const auto& row : rows) {
    const int r = row.at("row").get<int>();
    const float dot = vec_dot_row(type, weights.data() + r * rs, xq.data(), kRowLen);
    const double exact = row.at(uses_q8_1_s ? "dot_exact_f64_xq_with_q8_1_s" : "dot_exact_f64_xq").get<double>();
    const double scale = row.at("abs_dot_f64_xq").get<double>();
    const float ggml = std::bit_cast<float>(
        static_cast<uint32_t>(std::stoul(row.at("vec_dot_f32_bits").get<std::string>(), nullptr, 16)));
    if (r == 3) {
      EXPECT_EQ(dot, 0.0f) << "an all-zero row must give exactly 0";
      continue;
    }
    EXPECT_GT(scale, 0.0) << "row " << r;
    EXPECT_LE(std::fabs(dot - exact), 1e-6 * scale) << "row " << r << ": dot " << dot << ", exact " << exact;
    EXPECT_LE(std::fabs(static_cast<double>(dot) - ggml), 1e-6 * scale) << "row " << r << ": ggml vec_dot " << ggml;
  }
}

INSTANTIATE_TEST_SUITE_P(AllTypes, FixtureDot, ::testing::ValuesIn(kFixtureTypes), param_name);

}  // namespace
}  // namespace tessera
