// Seeded random data of several distributions for the quantizer tests (test_quant_random.cpp, test_quant_dot.cpp).
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "tensor/ggml_type.h"

namespace tessera::quant_test {

// Kinds of test data; kMixed varies per 32-element block (zeros, constants, lone spikes, tiny, normal).
enum class Dist { kNormal, kTiny, kLarge, kPositive, kLaplace, kOutliers, kUniform, kMixed };
inline constexpr Dist kAllDists[] = {Dist::kNormal,  Dist::kTiny,     Dist::kLarge,   Dist::kPositive,
                                     Dist::kLaplace, Dist::kOutliers, Dist::kUniform, Dist::kMixed};

inline std::vector<float> make_data(Dist dist, int64_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::exponential_distribution<float> expo(1.0f);
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(n));
  for (auto& v : x) {
    v = normal(rng);
    switch (dist) {
      case Dist::kTiny:
        v *= 1e-3f;
        break;
      case Dist::kLarge:
        v *= 50.0f;
        break;
      case Dist::kPositive:
        v = 0.25f + 0.5f * std::fabs(v);
        break;
      case Dist::kLaplace:
        v = (rng() & 1u ? 1.0f : -1.0f) * expo(rng);
        break;
      case Dist::kOutliers:
        v *= (rng() % 64 == 0) ? 10.0f : 1.0f;
        break;
      case Dist::kUniform:
        v = uniform(rng);
        break;
      default:
        break;
    }
  }
  if (dist == Dist::kMixed) {
    for (size_t b = 0; b < x.size(); b += 32) {
      float* blk = x.data() + b;
      switch (rng() % 5) {
        case 0:
          std::fill(blk, blk + 32, 0.0f);
          break;
        case 1:
          std::fill(blk, blk + 32, uniform(rng) * 3.0f);
          break;
        case 2:
          std::fill(blk, blk + 32, 0.0f);
          blk[rng() % 32] = uniform(rng) * 5.0f;
          break;
        case 3:
          for (int j = 0; j < 32; ++j) blk[j] *= 1e-4f;
          break;
        default:
          break;
      }
    }
  }
  return x;
}

inline std::string type_param_name(const ::testing::TestParamInfo<GgmlType>& info) {
  return std::string(type_name(info.param));
}

// A block's bytes as its struct (the bytes may be unaligned).
template <typename Block>
Block load(const uint8_t* p) {
  Block b;
  std::memcpy(&b, p, sizeof b);
  return b;
}

}  // namespace tessera::quant_test
