// Quantizers for IQ4_NL and IQ4_XS (gen-model's synthetic files and `quantize_row`): each block's scale from its
// largest value, every element to the nearest of the 16 table values, then the least-squares scale for those
// choices and a second pick. ggml searches more candidate scales; this gets within a few percent of its error.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "tensor/fp16.h"
#include "tensor/quant_internal.h"

namespace tessera::quant {
namespace {

int nearest_value(float v) {
  int best = 0;
  float err = std::fabs(v - static_cast<float>(kIQ4NLValues[0]));
  for (int i = 1; i < 16; ++i) {
    const float e = std::fabs(v - static_cast<float>(kIQ4NLValues[i]));
    if (e < err) {
      err = e;
      best = i;
    }
  }
  return best;
}

// 32 values' table indices under scale d (all 8, the value nearest zero, when d is 0).
void pick(const float* x, float d, uint8_t* idx) {
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  for (int j = 0; j < kQK; ++j) idx[j] = static_cast<uint8_t>(d != 0.0f ? nearest_value(x[j] * id) : 8);
}

// The best scale for 32 values: the largest one on the table's end, then least squares over the picks, twice.
float block_scale(const float* x) {
  float amax = 0, max = 0;
  for (int j = 0; j < kQK; ++j) {
    if (std::fabs(x[j]) > amax) {
      amax = std::fabs(x[j]);
      max = x[j];
    }
  }
  if (amax == 0.0f) return 0.0f;
  float d = max / static_cast<float>(kIQ4NLValues[0]);
  uint8_t idx[kQK];
  for (int round = 0; round < 2; ++round) {
    pick(x, d, idx);
    double sumqx = 0, sumq2 = 0;
    for (int j = 0; j < kQK; ++j) {
      const double q = kIQ4NLValues[idx[j]];
      sumqx += q * x[j];
      sumq2 += q * q;
    }
    if (sumq2 > 0) d = static_cast<float>(sumqx / sumq2);
  }
  return d;
}

// Element j in the low nibble of qs[j], j + 16 in the high one.
void store(const uint8_t* idx, uint8_t* qs) {
  for (int j = 0; j < kQK / 2; ++j) qs[j] = static_cast<uint8_t>(idx[j] | idx[j + kQK / 2] << 4);
}

}  // namespace

void quantize_iq4_nl(const float* x, BlockIQ4_NL* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, x += kQK) {
    const uint16_t d = fp32_to_fp16(block_scale(x));
    uint8_t idx[kQK];
    pick(x, fp16_to_fp32(d), idx);
    y[i].d = d;
    store(idx, y[i].qs);
  }
}

// Each 32-element group's best scale, then one fp16 d with signed 6-bit multiples (-32..31) of it, the largest
// group scale on -32; each group's picks again under its stored scale.
void quantize_iq4_xs(const float* x, BlockIQ4_XS* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, x += kQKK) {
    float scale[kQKK / kQK];
    float amax = 0, max = 0;
    for (int g = 0; g < kQKK / kQK; ++g) {
      scale[g] = block_scale(x + kQK * g);
      if (std::fabs(scale[g]) > amax) {
        amax = std::fabs(scale[g]);
        max = scale[g];
      }
    }
    const uint16_t dh = fp32_to_fp16(max / -32.0f);
    const float d = fp16_to_fp32(dh);
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    std::memset(&y[i], 0, sizeof y[i]);
    y[i].d = dh;
    for (int g = 0; g < kQKK / kQK; ++g) {
      const int ls = std::clamp(static_cast<int>(std::nearbyint(scale[g] * id)), -32, 31);
      const int stored = ls + 32;
      y[i].scales_l[g / 2] = static_cast<uint8_t>(y[i].scales_l[g / 2] | (stored & 0xf) << 4 * (g % 2));
      y[i].scales_h = static_cast<uint16_t>(y[i].scales_h | (stored >> 4) << 2 * g);
      uint8_t idx[kQK];
      pick(x + kQK * g, d * static_cast<float>(ls), idx);
      store(idx, y[i].qs + kQK / 2 * g);
    }
  }
}

}  // namespace tessera::quant
