// The vectorised row operations (softmax, SwiGLU) against double-precision references over the ranges attention
// scores and FFN gates reach, including row lengths that leave a partial vector and extreme inputs.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "support/isa_test.h"
#include "tensor/tensor_ops.h"

namespace tessera {
namespace {

// Each path is a test case of its own: one the CPU lacks is skipped, naming the missing ISA, never passed silently.
class TensorOps : public test::IsaTest {};

TEST_P(TensorOps, SoftmaxMatchesDoubleReference) {
  {
    const Isa isa = GetParam();
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
        softmax_on(isa, y.data(), n);
        for (int64_t i = 0; i < n; ++i) {
          const double want = std::exp(static_cast<double>(x[i] - max)) / sum;
          EXPECT_NEAR(y[i], want, 1e-6 * want + 1e-37)
              << isa_name(isa) << " n " << n << " spread " << spread << " i " << i;
        }
      }
    }
  }
}

TEST_P(TensorOps, SwigluMatchesDoubleReference) {
  std::vector<float> gate, up;
  for (float g = -120.0f; g <= 120.0f; g += 0.37f) {
    gate.push_back(g);
    up.push_back(1.0f + g * 0.01f);
  }
  for (float g : {-1e30f, -100.0f, -88.5f, -0.0f, 0.0f, 1e-20f, 88.5f, 100.0f, 1e30f}) {
    gate.push_back(g);
    up.push_back(2.0f);
  }
  {
    const Isa isa = GetParam();
    // Every tail length: a row that ends inside a vector must not read or write past it.
    for (size_t len : {gate.size(), gate.size() - 1, gate.size() - 5, size_t{3}}) {
      std::vector<float> out(len + 1, 42.0f);
      swiglu_on(isa, gate.data(), up.data(), static_cast<int64_t>(len), out.data());
      EXPECT_EQ(out[len], 42.0f) << isa_name(isa) << ": wrote past the row";
      for (size_t i = 0; i < len; ++i) {
        const double g = gate[i];
        const double want = g / (1.0 + std::exp(-g)) * up[i];
        EXPECT_NEAR(out[i], want, 4e-7 * std::fabs(want) + 1e-30) << isa_name(isa) << " gate " << g;
      }
    }
  }
}

TEST_P(TensorOps, SoftcapMatchesTanh) {
  const Isa isa = GetParam();
  std::vector<float> x;
  for (float v = -400.0f; v <= 400.0f; v += 0.173f) x.push_back(v);
  for (float v : {-1e30f, -0.0f, 0.0f, 1e-30f, 1e-6f, -3e-4f, 1e30f, INFINITY, -INFINITY}) x.push_back(v);
  const size_t n_finite = x.size();
  x.push_back(NAN);
  x.push_back(-NAN);
  for (float cap : {30.0f, 50.0f, 1.0f}) {
    for (size_t len : {x.size(), x.size() - 1, x.size() - 7, size_t{3}}) {
      std::vector<float> y(x.begin(), x.begin() + static_cast<ptrdiff_t>(len));
      y.push_back(42.0f);
      softcap_on(isa, y.data(), static_cast<int64_t>(len), cap);
      EXPECT_EQ(y[len], 42.0f) << isa_name(isa) << ": wrote past the row";
      for (size_t i = 0; i < len; ++i) {
        if (i >= n_finite) {
          EXPECT_TRUE(std::isnan(y[i])) << isa_name(isa) << ": NaN became " << y[i];
          continue;
        }
        const double want = cap * std::tanh(static_cast<double>(x[i]) / cap);
        EXPECT_NEAR(y[i], want, 3e-7 * cap) << isa_name(isa) << " x " << x[i] << " cap " << cap;
        EXPECT_EQ(std::signbit(y[i]), std::signbit(x[i])) << isa_name(isa) << " x " << x[i];
      }
    }
  }
}

TEST_P(TensorOps, GegluTableMatchesScalarLookupBitForBit) {
  const Isa isa = GetParam();
  static const GeluTable table;
  std::vector<float> gate, up;
  std::mt19937 rng(5);
  std::normal_distribution<float> dist(0.0f, 4.0f);
  for (int i = 0; i < 3000; ++i) gate.push_back(dist(rng));
  for (float g : {-10.0f, -9.999f, 10.0f, 9.999f, -1e30f, 1e30f, -0.0f, 0.0f, 65504.0f, 70000.0f, 1e-8f, -1e-8f})
    gate.push_back(g);
  for (size_t i = 0; i < gate.size(); ++i) up.push_back(1.0f + 0.001f * static_cast<float>(i % 17));
  for (size_t len : {gate.size(), gate.size() - 1, gate.size() - 9, size_t{5}}) {
    std::vector<float> out(len + 1, 42.0f);
    geglu_on(isa, gate.data(), up.data(), static_cast<int64_t>(len), out.data(), table);
    EXPECT_EQ(out[len], 42.0f) << isa_name(isa) << ": wrote past the row";
    for (size_t i = 0; i < len; ++i) {
      const float want = table(gate[i]) * up[i];
      EXPECT_EQ(out[i], want) << isa_name(isa) << " gate " << gate[i];
    }
  }
}

TESSERA_ISA_TEST_SUITE(TensorOps);

}  // namespace
}  // namespace tessera
