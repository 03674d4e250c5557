// The vectorised row operations (softmax, SwiGLU) against double-precision references over the ranges attention
// scores and FFN gates reach, including row lengths that leave a partial vector and extreme inputs.
#include "tensor/tensor_ops.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

namespace tessera {
namespace {

TEST(TensorOps, SoftmaxMatchesDoubleReference) {
  std::mt19937 rng(3);
  for (int64_t n : {1, 2, 15, 16, 17, 100, 511, 4096}) {
    for (float spread : {0.1f, 5.0f, 60.0f}) {
      std::normal_distribution<float> dist(0.0f, spread);
      std::vector<float> x(static_cast<size_t>(n));
      for (auto& v : x) v = dist(rng);
      float max = x[0];
      for (float v : x) max = std::fmax(max, v);
      // The shift is the float difference both versions compute; the rest is exact.
      double sum = 0;
      for (float v : x) sum += std::exp(static_cast<double>(v - max));
      std::vector<float> y = x;
      softmax(y.data(), n);
      for (int64_t i = 0; i < n; ++i) {
        const double want = std::exp(static_cast<double>(x[i] - max)) / sum;
        EXPECT_NEAR(y[i], want, 1e-6 * want + 1e-37) << "n " << n << " spread " << spread << " i " << i;
      }
    }
  }
}

TEST(TensorOps, SwigluMatchesDoubleReference) {
  std::vector<float> gate, up;
  for (float g = -120.0f; g <= 120.0f; g += 0.37f) {
    gate.push_back(g);
    up.push_back(1.0f + g * 0.01f);
  }
  for (float g : {-1e30f, -100.0f, -88.5f, -0.0f, 0.0f, 1e-20f, 88.5f, 100.0f, 1e30f}) {
    gate.push_back(g);
    up.push_back(2.0f);
  }
  std::vector<float> out(gate.size());
  swiglu(gate.data(), up.data(), static_cast<int64_t>(gate.size()), out.data());
  for (size_t i = 0; i < gate.size(); ++i) {
    const double g = gate[i];
    const double want = g / (1.0 + std::exp(-g)) * up[i];
    EXPECT_NEAR(out[i], want, 4e-7 * std::fabs(want) + 1e-30) << "gate " << g;
  }
}

}  // namespace
}  // namespace tessera
