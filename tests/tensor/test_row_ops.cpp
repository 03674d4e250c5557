// Row operations of the forward pass (RMSNorm, softmax, RoPE, SwiGLU) against hand-computed values.
#include <gtest/gtest.h>

#include <cmath>

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

// A row long enough for the partial sums, with a remainder: against the mean of squares in double.
TEST(Ops, RmsNormOfALongRowMatchesTheDoubleReference) {
  constexpr int64_t n = 2051;
  std::vector<float> x(n), w(n), out(n);
  for (int64_t i = 0; i < n; ++i) {
    x[static_cast<size_t>(i)] = std::sin(0.37f * static_cast<float>(i)) * (1.0f + static_cast<float>(i % 13));
    w[static_cast<size_t>(i)] = 0.5f + static_cast<float>(i % 7) * 0.25f;
  }
  rms_norm(x.data(), w.data(), n, 1e-5f, out.data());
  double sum = 0;
  for (float v : x) sum += static_cast<double>(v) * v;
  const double scale = 1.0 / std::sqrt(sum / n + 1e-5);
  for (size_t i = 0; i < x.size(); ++i)
    EXPECT_NEAR(out[i], x[i] * scale * w[i], 2e-6 * std::fabs(x[i] * scale * w[i]) + 1e-7) << i;
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

// Several heads, part of each rotated (n_rot < head_dim): the angles of a position computed once (rope_angles)
// turn every head as rope() does, and the dimensions past n_rot stay as they were.
TEST(Ops, RopeAnglesOnceTurnEveryHeadAlike) {
  constexpr int64_t heads = 3, head_dim = 10, n_rot = 6;
  for (RopeMode mode : {RopeMode::Norm, RopeMode::Neox}) {
    std::vector<float> x(heads * head_dim);
    for (size_t i = 0; i < x.size(); ++i) x[i] = 0.1f * static_cast<float>(i) - 1.0f;
    std::vector<float> cs(n_rot);
    rope_angles(37, n_rot, 10000.0f, 1.0f, nullptr, cs.data());
    std::vector<float> got = x;
    rope_rotate(got.data(), heads, head_dim, n_rot, cs.data(), mode);
    for (int64_t h = 0; h < heads; ++h) {
      std::vector<float> one(x.begin() + h * head_dim, x.begin() + (h + 1) * head_dim);
      rope(one.data(), 1, head_dim, n_rot, 37, 10000.0f, 1.0f, nullptr, mode);
      for (int64_t i = 0; i < head_dim; ++i) {
        EXPECT_EQ(got[static_cast<size_t>(h * head_dim + i)], one[static_cast<size_t>(i)]) << h << " " << i;
      }
      // Pair p turns by 37 * 10000^(-2p / n_rot).
      for (int64_t p = 0; p < n_rot / 2; ++p) {
        const int64_t a = mode == RopeMode::Norm ? 2 * p : p;
        const int64_t b = mode == RopeMode::Norm ? 2 * p + 1 : p + n_rot / 2;
        const double theta = 37.0 * std::pow(10000.0, -2.0 * static_cast<double>(p) / n_rot);
        const double x0 = x[static_cast<size_t>(h * head_dim + a)], x1 = x[static_cast<size_t>(h * head_dim + b)];
        EXPECT_NEAR(got[static_cast<size_t>(h * head_dim + a)], x0 * std::cos(theta) - x1 * std::sin(theta), 1e-4);
        EXPECT_NEAR(got[static_cast<size_t>(h * head_dim + b)], x0 * std::sin(theta) + x1 * std::cos(theta), 1e-4);
      }
      for (int64_t i = n_rot; i < head_dim; ++i) {
        EXPECT_EQ(got[static_cast<size_t>(h * head_dim + i)], x[static_cast<size_t>(h * head_dim + i)]);
      }
    }
  }
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

}  // namespace
}  // namespace tessera
