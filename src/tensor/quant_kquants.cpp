// Scalar dequantizers and Q8_K dot products for the 256-element K-quant formats Q2_K ... Q6_K and Q8_K.
// Float expressions keep ggml's operation order (scale * level, then minus min) so results match bit for bit.
#include "tensor/fp16.h"
#include "tensor/quant_internal.h"

namespace tessera::quant {
namespace {

// 2-bit field of element e (0..255) in Q2_K/Q3_K qs: each 128-element half uses 32 bytes, four
// 32-element runs at bit offsets 0, 2, 4, 6.
int q2_field(const uint8_t* qs, int e) { return (qs[(e / 128) * 32 + e % 32] >> (2 * ((e % 128) / 32))) & 3; }

// 4-bit field of element e in Q4_K/Q5_K qs: each 64-element chunk uses 32 bytes, low nibbles first.
int q4_field(const uint8_t* qs, int e) {
  const uint8_t byte = qs[(e / 64) * 32 + e % 32];
  return (e % 64) < 32 ? (byte & 0xf) : (byte >> 4);
}

// Q5_K: the fifth bit of element e is bit e/32 of qh[e%32].
int q5k_level(const BlockQ5_K& b, int e) { return q4_field(b.qs, e) | (((b.qh[e % 32] >> (e / 32)) & 1) << 4); }

}  // namespace

int q2k_level(const BlockQ2_K& b, int e) { return q2_field(b.qs, e); }

int q3k_level(const BlockQ3_K& b, int e) { return q2_field(b.qs, e) - (((b.hmask[e % 32] >> (e / 32)) & 1) ? 0 : 4); }

int q6k_level(const BlockQ6_K& b, int e) {
  const int half = e / 128;
  const int r = e % 128;
  const int l = r % 32;
  const int quarter = r / 32;
  const uint8_t low_byte = b.ql[half * 64 + (quarter % 2) * 32 + l];
  const int low = quarter < 2 ? (low_byte & 0xf) : (low_byte >> 4);
  const int high = (b.qh[half * 32 + l] >> (2 * quarter)) & 3;
  return (low | (high << 4)) - 32;
}

void q6k_levels(const BlockQ6_K& b, int8_t* out) {
  for (int half = 0; half < 2; ++half) {
    const uint8_t* ql = b.ql + 64 * half;
    const uint8_t* qh = b.qh + 32 * half;
    int8_t* o = out + 128 * half;
    for (int l = 0; l < 32; ++l) {
      o[l] = static_cast<int8_t>(((ql[l] & 0xf) | (qh[l] & 3) << 4) - 32);
      o[l + 32] = static_cast<int8_t>(((ql[l + 32] & 0xf) | ((qh[l] >> 2) & 3) << 4) - 32);
      o[l + 64] = static_cast<int8_t>(((ql[l] >> 4) | ((qh[l] >> 4) & 3) << 4) - 32);
      o[l + 96] = static_cast<int8_t>(((ql[l + 32] >> 4) | ((qh[l] >> 6) & 3) << 4) - 32);
    }
  }
}

namespace {

int group_sum(const BlockQ8_K& x, int g) { return x.bsums[g]; }

// Q4_K and Q5_K: 32-element groups with a 6-bit scale and min each (get_scale_min_k4); the formats differ only in
// an element's level.
int q4k_level(const BlockQ4_K& b, int e) { return q4_field(b.qs, e); }

template <typename Block, int (*level)(const Block&, int)>
void dequantize_k4(const Block* x, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, y += kQKK) {
    const float d = fp16_to_fp32(x[i].d);
    const float dmin = fp16_to_fp32(x[i].dmin);
    for (int g = 0; g < kQKK / 32; ++g) {
      uint8_t sc;
      uint8_t m;
      get_scale_min_k4(g, x[i].scales, sc, m);
      const float dl = d * static_cast<float>(sc);
      const float ml = dmin * static_cast<float>(m);
      for (int e = g * 32; e < g * 32 + 32; ++e) y[e] = dl * static_cast<float>(level(x[i], e)) - ml;
    }
  }
}

template <typename Block, int (*level)(const Block&, int)>
double dot_k4_q8_k(const Block* w, const BlockQ8_K* x, int64_t nb) {
  double sum = 0;
  for (int64_t i = 0; i < nb; ++i) {
    int64_t scaled = 0;
    int64_t mins = 0;
    for (int g = 0; g < kQKK / 32; ++g) {
      uint8_t sc;
      uint8_t m;
      get_scale_min_k4(g, w[i].scales, sc, m);
      int sumi = 0;
      for (int e = g * 32; e < g * 32 + 32; ++e) sumi += level(w[i], e) * x[i].qs[e];
      scaled += static_cast<int64_t>(sc) * sumi;
      mins += static_cast<int64_t>(m) * (group_sum(x[i], 2 * g) + group_sum(x[i], 2 * g + 1));
    }
    sum += static_cast<double>(x[i].d) * (static_cast<double>(fp16_to_fp32(w[i].d)) * static_cast<double>(scaled) -
                                          static_cast<double>(fp16_to_fp32(w[i].dmin)) * static_cast<double>(mins));
  }
  return sum;
}

// Q3_K and Q6_K: 16-element groups with one signed scale each and no mins.
int q3k_group_scale(const BlockQ3_K& b, int g) { return q3k_scale(b.scales, g); }
int q6k_group_scale(const BlockQ6_K& b, int g) { return b.scales[g]; }

template <typename Block, int (*level)(const Block&, int), int (*scale)(const Block&, int)>
double dot_k16_q8_k(const Block* w, const BlockQ8_K* x, int64_t nb) {
  double sum = 0;
  for (int64_t i = 0; i < nb; ++i) {
    int64_t scaled = 0;
    for (int g = 0; g < kQKK / 16; ++g) {
      int sumi = 0;
      for (int e = g * 16; e < g * 16 + 16; ++e) sumi += level(w[i], e) * x[i].qs[e];
      scaled += static_cast<int64_t>(scale(w[i], g)) * sumi;
    }
    sum += static_cast<double>(x[i].d) * fp16_to_fp32(w[i].d) * static_cast<double>(scaled);
  }
  return sum;
}

}  // namespace

void dequantize_q2_k(const BlockQ2_K* x, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, y += kQKK) {
    const float d = fp16_to_fp32(x[i].d);
    const float dmin = fp16_to_fp32(x[i].dmin);
    for (int g = 0; g < kQKK / 16; ++g) {
      const float dl = d * static_cast<float>(x[i].scales[g] & 0xf);
      const float ml = dmin * static_cast<float>(x[i].scales[g] >> 4);
      for (int e = g * 16; e < g * 16 + 16; ++e) y[e] = dl * static_cast<float>(q2_field(x[i].qs, e)) - ml;
    }
  }
}

void dequantize_q3_k(const BlockQ3_K* x, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, y += kQKK) {
    const float d = fp16_to_fp32(x[i].d);
    for (int g = 0; g < kQKK / 16; ++g) {
      const float dl = d * static_cast<float>(q3k_scale(x[i].scales, g));
      for (int e = g * 16; e < g * 16 + 16; ++e) y[e] = dl * static_cast<float>(q3k_level(x[i], e));
    }
  }
}

void dequantize_q4_k(const BlockQ4_K* x, float* y, int64_t nb) { dequantize_k4<BlockQ4_K, q4k_level>(x, y, nb); }

void dequantize_q5_k(const BlockQ5_K* x, float* y, int64_t nb) { dequantize_k4<BlockQ5_K, q5k_level>(x, y, nb); }

void dequantize_q6_k(const BlockQ6_K* x, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, y += kQKK) {
    const float d = fp16_to_fp32(x[i].d);
    for (int e = 0; e < kQKK; ++e) {
      // (d * scale) * level, in that order, as ggml computes it.
      y[e] = d * static_cast<float>(x[i].scales[e / 16]) * static_cast<float>(q6k_level(x[i], e));
    }
  }
}

void dequantize_q8_k(const BlockQ8_K* x, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, y += kQKK) {
    for (int e = 0; e < kQKK; ++e) y[e] = x[i].d * static_cast<float>(x[i].qs[e]);
  }
}

// Dot products with Q8_K activations: integer sums per 16- or 32-element group weighted by the integer
// scales, then one double scale per super-block. Mins use the activation's bsums (sum of its 16 q's),
// so the min term costs one multiply per group, as in ggml.
double dot_q2_k_q8_k(const BlockQ2_K* w, const BlockQ8_K* x, int64_t nb) {
  double sum = 0;
  for (int64_t i = 0; i < nb; ++i) {
    int64_t scaled = 0;
    int64_t mins = 0;
    for (int g = 0; g < kQKK / 16; ++g) {
      int sumi = 0;
      for (int e = g * 16; e < g * 16 + 16; ++e) sumi += q2_field(w[i].qs, e) * x[i].qs[e];
      scaled += static_cast<int64_t>(w[i].scales[g] & 0xf) * sumi;
      mins += static_cast<int64_t>(w[i].scales[g] >> 4) * group_sum(x[i], g);
    }
    sum += static_cast<double>(x[i].d) * (static_cast<double>(fp16_to_fp32(w[i].d)) * static_cast<double>(scaled) -
                                          static_cast<double>(fp16_to_fp32(w[i].dmin)) * static_cast<double>(mins));
  }
  return sum;
}

double dot_q3_k_q8_k(const BlockQ3_K* w, const BlockQ8_K* x, int64_t nb) {
  return dot_k16_q8_k<BlockQ3_K, q3k_level, q3k_group_scale>(w, x, nb);
}

double dot_q4_k_q8_k(const BlockQ4_K* w, const BlockQ8_K* x, int64_t nb) {
  return dot_k4_q8_k<BlockQ4_K, q4k_level>(w, x, nb);
}

double dot_q5_k_q8_k(const BlockQ5_K* w, const BlockQ8_K* x, int64_t nb) {
  return dot_k4_q8_k<BlockQ5_K, q5k_level>(w, x, nb);
}

double dot_q6_k_q8_k(const BlockQ6_K* w, const BlockQ8_K* x, int64_t nb) {
  return dot_k16_q8_k<BlockQ6_K, q6k_level, q6k_group_scale>(w, x, nb);
}

double dot_q8_k_q8_k(const BlockQ8_K* w, const BlockQ8_K* x, int64_t nb) {
  double sum = 0;
  for (int64_t i = 0; i < nb; ++i) {
    int sumi = 0;
    for (int e = 0; e < kQKK; ++e) sumi += w[i].qs[e] * x[i].qs[e];
    sum += static_cast<double>(w[i].d) * x[i].d * sumi;
  }
  return sum;
}

}  // namespace tessera::quant
