// Row operations of the forward pass against hand-computed values; YaRN and bad rope metadata are refused clearly.
#include <gtest/gtest.h>

#include <cmath>

#include "gguf/gguf_writer.h"
#include "model/model_weights.h"
#include "model/synthetic_model.h"
#include "support/test_paths.h"
#include "tensor/tensor_ops.h"
#include "util/error.h"

namespace tessera {
namespace {

TEST(Ops, RmsNorm) {
  const float x[4] = {1, 2, 3, 4};
  const float w[4] = {1, 1, 2, 0.5f};
  float out[4];
  rms_norm(x, w, 4, 0.0f, out);
  const float inv = 1.0f / std::sqrt(7.5f);
  EXPECT_FLOAT_EQ(out[0], 1 * inv);
  EXPECT_FLOAT_EQ(out[2], 6 * inv);
  EXPECT_FLOAT_EQ(out[3], 2 * inv);
}

TEST(Ops, SoftmaxSumsToOneAndIsShiftInvariant) {
  float a[3] = {1, 2, 3};
  float b[3] = {1001, 1002, 1003};
  softmax(a, 3);
  softmax(b, 3);
  EXPECT_NEAR(a[0] + a[1] + a[2], 1.0f, 1e-6);
  for (int i = 0; i < 3; ++i) EXPECT_NEAR(a[i], b[i], 1e-6);
  EXPECT_NEAR(a[2] / a[1], std::exp(1.0f), 1e-5);
}

TEST(Ops, RopeNormAndNeoxPairDifferentDimensions) {
  // One head of 4 dims, position 1, base 10000: pair 0 turns by 1 rad, pair 1 by 0.01 rad.
  const float in[4] = {1, 0, 0, 1};
  float norm[4], neox[4];
  std::copy(in, in + 4, norm);
  std::copy(in, in + 4, neox);
  rope(norm, 1, 4, 4, 1, 10000.0f, 1.0f, nullptr, RopeMode::Norm);
  rope(neox, 1, 4, 4, 1, 10000.0f, 1.0f, nullptr, RopeMode::Neox);
  // NORM rotates (x0, x1) by 1 and (x2, x3) by 0.01.
  EXPECT_NEAR(norm[0], std::cos(1.0f), 1e-6);
  EXPECT_NEAR(norm[1], std::sin(1.0f), 1e-6);
  EXPECT_NEAR(norm[2], -std::sin(0.01f), 1e-6);
  EXPECT_NEAR(norm[3], std::cos(0.01f), 1e-6);
  // NEOX rotates (x0, x2) by 1 and (x1, x3) by 0.01.
  EXPECT_NEAR(neox[0], std::cos(1.0f), 1e-6);
  EXPECT_NEAR(neox[2], std::sin(1.0f), 1e-6);
  EXPECT_NEAR(neox[1], -std::sin(0.01f), 1e-6);
  EXPECT_NEAR(neox[3], std::cos(0.01f), 1e-6);
}

TEST(Ops, RopeFrequencyFactorsDivideTheAngle) {
  float a[8] = {1, 2, 3, 4, 5, 6, 7, 8};
  float b[8] = {1, 2, 3, 4, 5, 6, 7, 8};
  const float factors[4] = {2, 2, 2, 2};
  rope(a, 1, 8, 8, 7, 500000.0f, 1.0f, factors, RopeMode::Norm);
  rope(b, 1, 8, 8, 7, 500000.0f, 0.5f, nullptr, RopeMode::Norm);  // linear scaling by 2: the same angles
  for (int i = 0; i < 8; ++i) EXPECT_NEAR(a[i], b[i], 1e-5) << i;
}

TEST(Ops, SwiGlu) {
  const float g[2] = {0.0f, 2.0f};
  const float u[2] = {5.0f, 3.0f};
  float out[2];
  swiglu(g, u, 2, out);
  EXPECT_FLOAT_EQ(out[0], 0.0f);
  EXPECT_NEAR(out[1], 2.0f / (1.0f + std::exp(-2.0f)) * 3.0f, 1e-6);
}

TEST(ModelWeights, YarnScalingIsRefusedClearly) {
  test::TempDir dir;
  SyntheticSpec spec;
  spec.config = preset_config("tiny", "qwen2");
  write_synthetic_model(spec, dir / "m.gguf");
  // Copy the file with rope scaling metadata added.
  const auto src = gguf::GgufFile::open(dir / "m.gguf");
  gguf::GgufWriter w;
  w.metadata() = src.metadata();
  w.set("qwen2.rope.scaling.type", gguf::Value("yarn"));
  w.set("qwen2.rope.scaling.factor", gguf::Value(4.0f));
  for (const auto& t : src.tensors()) {
    const auto data = src.tensor_data(t);
    w.add_tensor(t.name, t.type, t.ne, std::vector<uint8_t>(data.begin(), data.end()));
  }
  w.write(dir / "yarn.gguf");
  try {
    ModelWeights::load(dir / "yarn.gguf");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("YaRN rope scaling is not supported"), std::string::npos) << e.what();
  }
  // The same metadata parses for inspect (the scaling is reported, not hidden).
  const auto yarn = gguf::GgufFile::open(dir / "yarn.gguf");
  const auto c = ModelConfig::from_gguf(yarn);
  EXPECT_EQ(c.rope_scaling, RopeScaling::Yarn);
  EXPECT_FLOAT_EQ(c.rope_freq_scale, 0.25f);
}

}  // namespace
}  // namespace tessera
