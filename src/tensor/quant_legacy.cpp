// Scalar reference codecs for the 32-element formats Q4_0, Q4_1, Q5_0, Q5_1, Q8_0 and Q8_1,
// bit-compatible with ggml's reference quantizers, plus their integer dot products.
#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstring>

#include "tensor/fp16.h"
#include "tensor/quant_internal.h"

namespace tessera::quant {
namespace {

// The value of largest magnitude, keeping its sign; the first one wins a tie. Symmetric formats map it
// to the most negative level, which has one more step than the positive side.
float signed_absmax(const float* x, int n) {
  float amax = 0;
  float max = 0;
  for (int j = 0; j < n; ++j) {
    if (std::fabs(x[j]) > amax) {
      amax = std::fabs(x[j]);
      max = x[j];
    }
  }
  return max;
}

// The asymmetric formats' (Q4_1, Q5_1) block minimum and the scale d taking it to the maximum in `steps` levels,
// with id = 1/d (0 for a constant block).
struct MinScale {
  float min, d, id;
};
MinScale min_scale(const float* x, float steps) {
  float min = FLT_MAX;
  float max = -FLT_MAX;
  for (int j = 0; j < kQK; ++j) {
    min = std::min(min, x[j]);
    max = std::max(max, x[j]);
  }
  const float d = (max - min) / steps;
  return {min, d, d != 0.0f ? 1.0f / d : 0.0f};
}

float absmax(const float* x, int n) {
  float amax = 0;
  for (int j = 0; j < n; ++j) amax = std::max(amax, std::fabs(x[j]));
  return amax;
}

uint32_t load_qh(const uint8_t* qh) {
  uint32_t bits;
  std::memcpy(&bits, qh, 4);
  return bits;
}

void store_qh(uint8_t* qh, uint32_t bits) { std::memcpy(qh, &bits, 4); }

// 5-bit level of element j (0..31) from its nibble and the qh bit.
int q5_level(const uint8_t* qs, uint32_t qh, int j) {
  const int nibble = j < kQK / 2 ? (qs[j] & 0xf) : (qs[j - kQK / 2] >> 4);
  return nibble | static_cast<int>(((qh >> j) & 1u) << 4);
}

int q4_level(const uint8_t* qs, int j) { return j < kQK / 2 ? (qs[j] & 0xf) : (qs[j - kQK / 2] >> 4); }

// Q8_0 and Q8_1 (whose s these leave aside) decode and dot alike.
template <typename Block>
void dequantize_q8(const Block* x, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, y += kQK) {
    const float d = fp16_to_fp32(x[i].d);
    for (int j = 0; j < kQK; ++j) y[j] = static_cast<float>(x[i].qs[j]) * d;
  }
}

template <typename Block>
double dot_q8_q8(const Block* w, const Block* x, int64_t nb) {
  double sum = 0;
  for (int64_t i = 0; i < nb; ++i) {
    int sumi = 0;
    for (int j = 0; j < kQK; ++j) sumi += w[i].qs[j] * x[i].qs[j];
    sum += static_cast<double>(fp16_to_fp32(w[i].d)) * fp16_to_fp32(x[i].d) * sumi;
  }
  return sum;
}

}  // namespace

void dequantize_q4_0(const BlockQ4_0* x, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, y += kQK) {
    const float d = fp16_to_fp32(x[i].d);
    for (int j = 0; j < kQK; ++j) y[j] = static_cast<float>(q4_level(x[i].qs, j) - 8) * d;
  }
}

void dequantize_q4_1(const BlockQ4_1* x, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, y += kQK) {
    const float d = fp16_to_fp32(x[i].d);
    const float m = fp16_to_fp32(x[i].m);
    for (int j = 0; j < kQK; ++j) y[j] = static_cast<float>(q4_level(x[i].qs, j)) * d + m;
  }
}

void dequantize_q5_0(const BlockQ5_0* x, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, y += kQK) {
    const float d = fp16_to_fp32(x[i].d);
    const uint32_t qh = load_qh(x[i].qh);
    for (int j = 0; j < kQK; ++j) y[j] = static_cast<float>(q5_level(x[i].qs, qh, j) - 16) * d;
  }
}

void dequantize_q5_1(const BlockQ5_1* x, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, y += kQK) {
    const float d = fp16_to_fp32(x[i].d);
    const float m = fp16_to_fp32(x[i].m);
    const uint32_t qh = load_qh(x[i].qh);
    for (int j = 0; j < kQK; ++j) y[j] = static_cast<float>(q5_level(x[i].qs, qh, j)) * d + m;
  }
}

void dequantize_q8_0(const BlockQ8_0* x, float* y, int64_t nb) { dequantize_q8(x, y, nb); }

void dequantize_q8_1(const BlockQ8_1* x, float* y, int64_t nb) { dequantize_q8(x, y, nb); }

// The float -> int conversions below truncate; ggml adds 0.5 (plus the offset) first, so levels round
// half up. The arguments are never negative: |x * id| <= 8 (or 16) by the choice of d.
void quantize_q4_0(const float* x, BlockQ4_0* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, x += kQK) {
    const float d = signed_absmax(x, kQK) / -8.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    y[i].d = fp32_to_fp16(d);
    for (int j = 0; j < kQK / 2; ++j) {
      const int lo = std::min(15, static_cast<int>(x[j] * id + 8.5f));
      const int hi = std::min(15, static_cast<int>(x[j + kQK / 2] * id + 8.5f));
      y[i].qs[j] = static_cast<uint8_t>(lo | (hi << 4));
    }
  }
}

void quantize_q4_1(const float* x, BlockQ4_1* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, x += kQK) {
    const auto [min, d, id] = min_scale(x, 15.0f);
    y[i].d = fp32_to_fp16(d);
    y[i].m = fp32_to_fp16(min);
    for (int j = 0; j < kQK / 2; ++j) {
      const int lo = std::min(15, static_cast<int>((x[j] - min) * id + 0.5f));
      const int hi = std::min(15, static_cast<int>((x[j + kQK / 2] - min) * id + 0.5f));
      y[i].qs[j] = static_cast<uint8_t>(lo | (hi << 4));
    }
  }
}

void quantize_q5_0(const float* x, BlockQ5_0* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, x += kQK) {
    const float d = signed_absmax(x, kQK) / -16.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    y[i].d = fp32_to_fp16(d);
    uint32_t qh = 0;
    for (int j = 0; j < kQK / 2; ++j) {
      const int lo = std::min(31, static_cast<int>(x[j] * id + 16.5f));
      const int hi = std::min(31, static_cast<int>(x[j + kQK / 2] * id + 16.5f));
      y[i].qs[j] = static_cast<uint8_t>((lo & 0xf) | ((hi & 0xf) << 4));
      qh |= static_cast<uint32_t>(lo >> 4) << j;
      qh |= static_cast<uint32_t>(hi >> 4) << (j + kQK / 2);
    }
    store_qh(y[i].qh, qh);
  }
}

void quantize_q5_1(const float* x, BlockQ5_1* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, x += kQK) {
    const auto [min, d, id] = min_scale(x, 31.0f);
    y[i].d = fp32_to_fp16(d);
    y[i].m = fp32_to_fp16(min);
    uint32_t qh = 0;
    for (int j = 0; j < kQK / 2; ++j) {
      const int lo = std::min(31, static_cast<int>((x[j] - min) * id + 0.5f));
      const int hi = std::min(31, static_cast<int>((x[j + kQK / 2] - min) * id + 0.5f));
      y[i].qs[j] = static_cast<uint8_t>((lo & 0xf) | ((hi & 0xf) << 4));
      qh |= static_cast<uint32_t>(lo >> 4) << j;
      qh |= static_cast<uint32_t>(hi >> 4) << (j + kQK / 2);
    }
    store_qh(y[i].qh, qh);
  }
}

// Weight quantizer: id = 1/d and round half away from zero (ggml's reference).
void quantize_q8_0(const float* x, BlockQ8_0* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, x += kQK) {
    const float d = absmax(x, kQK) / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    y[i].d = fp32_to_fp16(d);
    for (int j = 0; j < kQK; ++j) y[i].qs[j] = static_cast<int8_t>(std::round(x[j] * id));
  }
}

void quantize_q8_1(const float* x, BlockQ8_1* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, x += kQK) {
    const float d = absmax(x, kQK) / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    y[i].d = fp32_to_fp16(d);
    int sum = 0;
    for (int j = 0; j < kQK; ++j) {
      y[i].qs[j] = static_cast<int8_t>(std::round(x[j] * id));
      sum += y[i].qs[j];
    }
    y[i].s = fp32_to_fp16(static_cast<float>(sum) * d);
  }
}

// Activation quantizers: id = 127/amax (not 1/d) and round half to even, like ggml's AVX2 from_float.
// std::nearbyint rounds in the current mode, which is round-to-nearest-even unless someone changed it.
void quantize_q8_0_activation(const float* x, BlockQ8_0* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, x += kQK) {
    const float amax = absmax(x, kQK);
    const float id = amax != 0.0f ? 127.0f / amax : 0.0f;
    y[i].d = fp32_to_fp16(amax / 127.0f);
    for (int j = 0; j < kQK; ++j) y[i].qs[j] = static_cast<int8_t>(std::nearbyint(x[j] * id));
  }
}

void quantize_q8_1_activation(const float* x, BlockQ8_1* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, x += kQK) {
    const float amax = absmax(x, kQK);
    const float d = amax / 127.0f;
    const float id = amax != 0.0f ? 127.0f / amax : 0.0f;
    y[i].d = fp32_to_fp16(d);
    int sum = 0;
    for (int j = 0; j < kQK; ++j) {
      y[i].qs[j] = static_cast<int8_t>(std::nearbyint(x[j] * id));
      sum += y[i].qs[j];
    }
    y[i].s = fp32_to_fp16(d * static_cast<float>(sum));
  }
}

// Dot products: an exact integer sum per block, scaled in double. The product of two fp16 scales is
// exact in double, so each block term is rounded once.
double dot_q4_0_q8_0(const BlockQ4_0* w, const BlockQ8_0* x, int64_t nb) {
  double sum = 0;
  for (int64_t i = 0; i < nb; ++i) {
    int sumi = 0;
    for (int j = 0; j < kQK; ++j) sumi += (q4_level(w[i].qs, j) - 8) * x[i].qs[j];
    sum += static_cast<double>(fp16_to_fp32(w[i].d)) * fp16_to_fp32(x[i].d) * sumi;
  }
  return sum;
}

// Q4_1/Q5_1: sum_j (d_w*q_j + m_w) * d_x*p_j = d_w*d_x*sum(q*p) + m_w * (d_x*sum(p)); the last factor is
// the activation block's precomputed s.
double dot_q4_1_q8_1(const BlockQ4_1* w, const BlockQ8_1* x, int64_t nb) {
  double sum = 0;
  for (int64_t i = 0; i < nb; ++i) {
    int sumi = 0;
    for (int j = 0; j < kQK; ++j) sumi += q4_level(w[i].qs, j) * x[i].qs[j];
    sum += static_cast<double>(fp16_to_fp32(w[i].d)) * fp16_to_fp32(x[i].d) * sumi +
           static_cast<double>(fp16_to_fp32(w[i].m)) * fp16_to_fp32(x[i].s);
  }
  return sum;
}

double dot_q5_0_q8_0(const BlockQ5_0* w, const BlockQ8_0* x, int64_t nb) {
  double sum = 0;
  for (int64_t i = 0; i < nb; ++i) {
    const uint32_t qh = load_qh(w[i].qh);
    int sumi = 0;
    for (int j = 0; j < kQK; ++j) sumi += (q5_level(w[i].qs, qh, j) - 16) * x[i].qs[j];
    sum += static_cast<double>(fp16_to_fp32(w[i].d)) * fp16_to_fp32(x[i].d) * sumi;
  }
  return sum;
}

double dot_q5_1_q8_1(const BlockQ5_1* w, const BlockQ8_1* x, int64_t nb) {
  double sum = 0;
  for (int64_t i = 0; i < nb; ++i) {
    const uint32_t qh = load_qh(w[i].qh);
    int sumi = 0;
    for (int j = 0; j < kQK; ++j) sumi += q5_level(w[i].qs, qh, j) * x[i].qs[j];
    sum += static_cast<double>(fp16_to_fp32(w[i].d)) * fp16_to_fp32(x[i].d) * sumi +
           static_cast<double>(fp16_to_fp32(w[i].m)) * fp16_to_fp32(x[i].s);
  }
  return sum;
}

double dot_q8_0_q8_0(const BlockQ8_0* w, const BlockQ8_0* x, int64_t nb) { return dot_q8_q8(w, x, nb); }

double dot_q8_1_q8_1(const BlockQ8_1* w, const BlockQ8_1* x, int64_t nb) { return dot_q8_q8(w, x, nb); }

}  // namespace tessera::quant
