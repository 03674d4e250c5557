// Reference quantizers (no importance matrix) for Q2_K ... Q6_K and Q8_K, reproducing ggml's search for
// scales and mins step by step (same candidates, same float operation order) so the bytes match ggml's.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "tensor/fp16.h"
#include "tensor/quant_internal.h"

namespace tessera::quant {
namespace {

// Below this magnitude a group counts as all zero (ggml's GROUP_MAX_EPS).
constexpr float kGroupMaxEps = 1e-15f;

// Index of the element with the largest magnitude (the first one on ties).
int argmax_abs(const float* x, int n) {
  int best = 0;
  float amax = 0;
  for (int i = 0; i < n; ++i) {
    if (std::fabs(x[i]) > amax) {
      amax = std::fabs(x[i]);
      best = i;
    }
  }
  return best;
}

// Symmetric levels -nmax..nmax-1 for n values, weighted by x^2 (ggml's make_qx_quants, rmse_type 1).
// Tries 19 scales around nmax/max and keeps the least-squares best. Writes L[i] = level + nmax and
// returns the scale.
float make_qx_quants(int n, int nmax, const float* x, int8_t* L) {
  const float max = x[argmax_abs(x, n)];
  if (std::fabs(max) < kGroupMaxEps) {
    std::fill(L, L + n, int8_t{0});
    return 0.0f;
  }
  auto level = [nmax](float v) { return std::clamp(nearest_int(v), -nmax, nmax - 1); };
  float iscale = static_cast<float>(-nmax) / max;
  float sumlx = 0;
  float suml2 = 0;
  for (int i = 0; i < n; ++i) {
    const int l = level(iscale * x[i]);
    L[i] = static_cast<int8_t>(l + nmax);
    const float w = x[i] * x[i];
    sumlx += w * x[i] * static_cast<float>(l);
    suml2 += w * static_cast<float>(l) * static_cast<float>(l);
  }
  float scale = suml2 != 0.0f ? sumlx / suml2 : 0.0f;
  float best = scale * sumlx;
  for (int is = -9; is <= 9; ++is) {
    if (is == 0) continue;
    iscale = -(static_cast<float>(nmax) + 0.1f * static_cast<float>(is)) / max;
    sumlx = 0;
    suml2 = 0;
    for (int i = 0; i < n; ++i) {
      const int l = level(iscale * x[i]);
      const float w = x[i] * x[i];
      sumlx += w * x[i] * static_cast<float>(l);
      suml2 += w * static_cast<float>(l) * static_cast<float>(l);
    }
    // sumlx^2 / suml2 is the error reduction of the least-squares scale; larger is better.
    if (suml2 > 0 && sumlx * sumlx > best * suml2) {
      for (int i = 0; i < n; ++i) L[i] = static_cast<int8_t>(level(iscale * x[i]) + nmax);
      scale = sumlx / suml2;
      best = scale * sumlx;
    }
  }
  return scale;
}

// Asymmetric levels 0..nmax with a min <= 0 (ggml's make_qkx2_quants): start from the full range, then try
// nstep+1 stretched scales, refitting scale and min by weighted least squares, and keep whichever has the
// smallest weighted error (squared, or absolute when use_mad). Returns the scale; *neg_min = -min.
float make_qkx2_quants(int n, int nmax, const float* x, const float* weights, uint8_t* L, float* neg_min, uint8_t* Laux,
                       float rmin, float rdelta, int nstep, bool use_mad) {
  float min = x[0];
  float max = x[0];
  float sum_w = weights[0];
  float sum_x = sum_w * x[0];
  for (int i = 1; i < n; ++i) {
    min = std::min(min, x[i]);
    max = std::max(max, x[i]);
    sum_w += weights[i];
    sum_x += weights[i] * x[i];
  }
  min = std::min(min, 0.0f);
  if (max == min) {
    std::fill(L, L + n, uint8_t{0});
    *neg_min = -min;
    return 0.0f;
  }
  auto error_of = [use_mad](float diff) { return use_mad ? std::fabs(diff) : diff * diff; };
  float iscale = static_cast<float>(nmax) / (max - min);
  float scale = 1 / iscale;
  float best_error = 0;
  for (int i = 0; i < n; ++i) {
    L[i] = static_cast<uint8_t>(std::clamp(nearest_int(iscale * (x[i] - min)), 0, nmax));
    best_error += weights[i] * error_of(scale * static_cast<float>(L[i]) + min - x[i]);
  }
  for (int is = 0; is <= nstep; ++is) {
    iscale = (rmin + rdelta * static_cast<float>(is) + static_cast<float>(nmax)) / (max - min);
    float sum_l = 0;
    float sum_l2 = 0;
    float sum_xl = 0;
    for (int i = 0; i < n; ++i) {
      const int l = std::clamp(nearest_int(iscale * (x[i] - min)), 0, nmax);
      Laux[i] = static_cast<uint8_t>(l);
      const float w = weights[i];
      const float fl = static_cast<float>(l);
      sum_l += w * fl;
      sum_l2 += w * fl * fl;
      sum_xl += w * fl * x[i];
    }
    const float det = sum_w * sum_l2 - sum_l * sum_l;
    if (det > 0) {
      float this_scale = (sum_w * sum_xl - sum_x * sum_l) / det;
      float this_min = (sum_l2 * sum_x - sum_l * sum_xl) / det;
      if (this_min > 0) {  // the format only subtracts a min; refit the scale alone
        this_min = 0;
        this_scale = sum_xl / sum_l2;
      }
      float cur_error = 0;
      for (int i = 0; i < n; ++i) {
        cur_error += weights[i] * error_of(this_scale * static_cast<float>(Laux[i]) + this_min - x[i]);
      }
      if (cur_error < best_error) {
        std::copy(Laux, Laux + n, L);
        best_error = cur_error;
        scale = this_scale;
        min = this_min;
      }
    }
  }
  *neg_min = -min;
  return scale;
}

// Symmetric levels -nmax..nmax-1 weighted by x^2, refined by coordinate descent: move one level at a time
// when that raises sumlx^2/suml2 (ggml's make_q3_quants with do_rmse). Writes L[i] = level + nmax.
float make_q3_quants(int n, int nmax, const float* x, int8_t* L) {
  const float max = x[argmax_abs(x, n)];
  if (std::fabs(max) < kGroupMaxEps) {
    std::fill(L, L + n, int8_t{0});
    return 0.0f;
  }
  const float iscale = static_cast<float>(-nmax) / max;
  float sumlx = 0;
  float suml2 = 0;
  for (int i = 0; i < n; ++i) {
    const int l = std::clamp(nearest_int(iscale * x[i]), -nmax, nmax - 1);
    L[i] = static_cast<int8_t>(l);
    const float w = x[i] * x[i];
    sumlx += w * x[i] * static_cast<float>(l);
    suml2 += w * static_cast<float>(l) * static_cast<float>(l);
  }
  for (int itry = 0; itry < 5; ++itry) {
    int n_changed = 0;
    for (int i = 0; i < n; ++i) {
      const float w = x[i] * x[i];
      const float li = static_cast<float>(L[i]);
      float slx = sumlx - w * x[i] * li;
      if (slx > 0) {
        float sl2 = suml2 - w * li * li;
        const int new_l = std::clamp(nearest_int(x[i] * sl2 / slx), -nmax, nmax - 1);
        if (new_l != L[i]) {
          const float fl = static_cast<float>(new_l);
          slx += w * x[i] * fl;
          sl2 += w * fl * fl;
          if (sl2 > 0 && slx * slx * suml2 > sumlx * sumlx * sl2) {
            L[i] = static_cast<int8_t>(new_l);
            sumlx = slx;
            suml2 = sl2;
            ++n_changed;
          }
        }
      }
    }
    if (n_changed == 0) break;
  }
  for (int i = 0; i < n; ++i) L[i] = static_cast<int8_t>(L[i] + nmax);
  return sumlx / suml2;
}

// Packs 2-bit levels: byte (e/128)*32 + e%32 holds element e at bit 2*((e%128)/32).
void pack_2bit(const uint8_t* L, uint8_t* qs) {
  for (int j = 0; j < kQKK; j += 128) {
    for (int l = 0; l < 32; ++l) {
      qs[j / 4 + l] =
          static_cast<uint8_t>(L[j + l] | (L[j + l + 32] << 2) | (L[j + l + 64] << 4) | (L[j + l + 96] << 6));
    }
  }
}

// Q4_K/Q5_K super-block scales: fit each 32-element sub-block, then quantize its scale and min to 6 bits
// against the largest of each, and return the final levels requantized with those 6-bit values.
void quantize_k4_scales(const float* x, int nmax, float rmin, int nstep, uint8_t* scales12, uint16_t& d_out,
                        uint16_t& dmin_out, uint8_t* L) {
  float scales[kQKK / 32];
  float mins[kQKK / 32];
  float weights[32];
  uint8_t Laux[32];
  float max_scale = 0;
  float max_min = 0;
  for (int j = 0; j < kQKK / 32; ++j) {
    const float* xs = x + 32 * j;
    float sum_x2 = 0;
    for (int l = 0; l < 32; ++l) sum_x2 += xs[l] * xs[l];
    const float av_x = std::sqrt(sum_x2 / 32);
    for (int l = 0; l < 32; ++l) weights[l] = av_x + std::fabs(xs[l]);
    scales[j] = make_qkx2_quants(32, nmax, xs, weights, L + 32 * j, &mins[j], Laux, rmin, 0.1f, nstep, false);
    max_scale = std::max(max_scale, scales[j]);
    max_min = std::max(max_min, mins[j]);
  }
  const float inv_scale = max_scale > 0 ? 63.f / max_scale : 0.f;
  const float inv_min = max_min > 0 ? 63.f / max_min : 0.f;
  std::memset(scales12, 0, 12);
  for (int j = 0; j < kQKK / 32; ++j) {
    // ggml stores nearest_int into a uint8_t before clamping; keep the same wrap for identical bytes.
    const int ls = std::min(63, static_cast<int>(static_cast<uint8_t>(nearest_int(inv_scale * scales[j]))));
    const int lm = std::min(63, static_cast<int>(static_cast<uint8_t>(nearest_int(inv_min * mins[j]))));
    if (j < 4) {
      scales12[j] = static_cast<uint8_t>(ls);
      scales12[j + 4] = static_cast<uint8_t>(lm);
    } else {
      scales12[j + 4] = static_cast<uint8_t>((ls & 0xf) | ((lm & 0xf) << 4));
      scales12[j - 4] = static_cast<uint8_t>(scales12[j - 4] | ((ls >> 4) << 6));
      scales12[j] = static_cast<uint8_t>(scales12[j] | ((lm >> 4) << 6));
    }
  }
  d_out = fp32_to_fp16(max_scale / 63.f);
  dmin_out = fp32_to_fp16(max_min / 63.f);
  for (int j = 0; j < kQKK / 32; ++j) {
    uint8_t sc;
    uint8_t m;
    get_scale_min_k4(j, scales12, sc, m);
    const float d = fp16_to_fp32(d_out) * static_cast<float>(sc);
    if (d == 0.0f) continue;
    const float dm = fp16_to_fp32(dmin_out) * static_cast<float>(m);
    for (int l = 0; l < 32; ++l) {
      L[32 * j + l] = static_cast<uint8_t>(std::clamp(nearest_int((x[32 * j + l] + dm) / d), 0, nmax));
    }
  }
}

}  // namespace

void quantize_q2_k(const float* x, BlockQ2_K* y, int64_t nb) {
  constexpr float kQ4Scale = 15.f;
  uint8_t L[kQKK];
  uint8_t Laux[16];
  float weights[16];
  float scales[kQKK / 16];
  float mins[kQKK / 16];
  for (int64_t i = 0; i < nb; ++i, x += kQKK) {
    float max_scale = 0;
    float max_min = 0;
    for (int j = 0; j < kQKK / 16; ++j) {
      for (int l = 0; l < 16; ++l) weights[l] = std::fabs(x[16 * j + l]);
      scales[j] = make_qkx2_quants(16, 3, x + 16 * j, weights, L + 16 * j, &mins[j], Laux, -0.5f, 0.1f, 15, true);
      max_scale = std::max(max_scale, scales[j]);
      max_min = std::max(max_min, mins[j]);
    }
    BlockQ2_K& b = y[i];
    std::memset(b.scales, 0, sizeof b.scales);
    b.d = fp32_to_fp16(0.f);
    b.dmin = fp32_to_fp16(0.f);
    if (max_scale > 0) {
      const float iscale = kQ4Scale / max_scale;
      for (int j = 0; j < kQKK / 16; ++j) b.scales[j] = static_cast<uint8_t>(nearest_int(iscale * scales[j]));
      b.d = fp32_to_fp16(max_scale / kQ4Scale);
    }
    if (max_min > 0) {
      const float iscale = kQ4Scale / max_min;
      for (int j = 0; j < kQKK / 16; ++j) {
        b.scales[j] = static_cast<uint8_t>(b.scales[j] | (nearest_int(iscale * mins[j]) << 4));
      }
      b.dmin = fp32_to_fp16(max_min / kQ4Scale);
    }
    for (int j = 0; j < kQKK / 16; ++j) {
      const float d = fp16_to_fp32(b.d) * static_cast<float>(b.scales[j] & 0xf);
      if (d == 0.0f) continue;
      const float dm = fp16_to_fp32(b.dmin) * static_cast<float>(b.scales[j] >> 4);
      for (int l = 0; l < 16; ++l) {
        L[16 * j + l] = static_cast<uint8_t>(std::clamp(nearest_int((x[16 * j + l] + dm) / d), 0, 3));
      }
    }
    pack_2bit(L, b.qs);
  }
}

void quantize_q3_k(const float* x, BlockQ3_K* y, int64_t nb) {
  int8_t L[kQKK];
  float scales[kQKK / 16];
  for (int64_t i = 0; i < nb; ++i, x += kQKK) {
    float max_scale = 0;
    float amax = 0;
    for (int j = 0; j < kQKK / 16; ++j) {
      scales[j] = make_q3_quants(16, 4, x + 16 * j, L + 16 * j);
      if (std::fabs(scales[j]) > amax) {
        amax = std::fabs(scales[j]);
        max_scale = scales[j];
      }
    }
    BlockQ3_K& b = y[i];
    std::memset(b.scales, 0, sizeof b.scales);
    if (max_scale != 0.0f) {
      const float iscale = -32.f / max_scale;
      for (int j = 0; j < kQKK / 16; ++j) {
        // ggml keeps the rounded scale in an int8_t; |iscale * scale| <= 32 so nothing wraps.
        const int l = std::clamp(static_cast<int>(static_cast<int8_t>(nearest_int(iscale * scales[j]))), -32, 31) + 32;
        if (j < 8) {
          b.scales[j] = static_cast<uint8_t>(l & 0xf);
        } else {
          b.scales[j - 8] = static_cast<uint8_t>(b.scales[j - 8] | ((l & 0xf) << 4));
        }
        b.scales[j % 4 + 8] = static_cast<uint8_t>(b.scales[j % 4 + 8] | ((l >> 4) << (2 * (j / 4))));
      }
      b.d = fp32_to_fp16(1 / iscale);
    } else {
      b.d = fp32_to_fp16(0.f);
    }
    for (int j = 0; j < kQKK / 16; ++j) {
      const float d = fp16_to_fp32(b.d) * static_cast<float>(q3k_scale(b.scales, j));
      if (d == 0.0f) continue;
      for (int l = 0; l < 16; ++l) {
        L[16 * j + l] = static_cast<int8_t>(std::clamp(nearest_int(x[16 * j + l] / d), -4, 3) + 4);
      }
    }
    // Levels 0..7: the 2 low bits go to qs, the third bit to hmask (bit e/32 of byte e%32).
    std::memset(b.hmask, 0, sizeof b.hmask);
    uint8_t low[kQKK];
    for (int e = 0; e < kQKK; ++e) {
      if (L[e] > 3) b.hmask[e % 32] = static_cast<uint8_t>(b.hmask[e % 32] | (1 << (e / 32)));
      low[e] = static_cast<uint8_t>(L[e] & 3);
    }
    pack_2bit(low, b.qs);
  }
}

void quantize_q4_k(const float* x, BlockQ4_K* y, int64_t nb) {
  uint8_t L[kQKK];
  for (int64_t i = 0; i < nb; ++i, x += kQKK) {
    BlockQ4_K& b = y[i];
    quantize_k4_scales(x, 15, -1.f, 20, b.scales, b.d, b.dmin, L);
    // Each 64-element chunk fills 32 bytes: first 32 elements in the low nibbles, next 32 in the high.
    for (int j = 0; j < kQKK; j += 64) {
      for (int l = 0; l < 32; ++l) b.qs[j / 2 + l] = static_cast<uint8_t>(L[j + l] | (L[j + l + 32] << 4));
    }
  }
}

void quantize_q5_k(const float* x, BlockQ5_K* y, int64_t nb) {
  uint8_t L[kQKK];
  for (int64_t i = 0; i < nb; ++i, x += kQKK) {
    BlockQ5_K& b = y[i];
    quantize_k4_scales(x, 31, -0.5f, 15, b.scales, b.d, b.dmin, L);
    std::memset(b.qh, 0, sizeof b.qh);
    for (int j = 0; j < kQKK; j += 64) {
      for (int l = 0; l < 32; ++l) {
        const int l1 = L[j + l];
        const int l2 = L[j + l + 32];
        b.qs[j / 2 + l] = static_cast<uint8_t>((l1 & 0xf) | ((l2 & 0xf) << 4));
        // The fifth bit of element e lives in bit e/32 of qh[e%32].
        b.qh[l] = static_cast<uint8_t>(b.qh[l] | ((l1 >> 4) << (j / 32)) | ((l2 >> 4) << (j / 32 + 1)));
      }
    }
  }
}

void quantize_q6_k(const float* x, BlockQ6_K* y, int64_t nb) {
  int8_t L[kQKK];
  float scales[kQKK / 16];
  for (int64_t i = 0; i < nb; ++i, x += kQKK) {
    float max_scale = 0;
    float max_abs_scale = 0;
    for (int j = 0; j < kQKK / 16; ++j) {
      scales[j] = make_qx_quants(16, 32, x + 16 * j, L + 16 * j);
      if (std::fabs(scales[j]) > max_abs_scale) {
        max_abs_scale = std::fabs(scales[j]);
        max_scale = scales[j];
      }
    }
    BlockQ6_K& b = y[i];
    if (max_abs_scale < kGroupMaxEps) {
      std::memset(&b, 0, sizeof b);
      continue;
    }
    const float iscale = -128.f / max_scale;
    b.d = fp32_to_fp16(1 / iscale);
    for (int j = 0; j < kQKK / 16; ++j)
      b.scales[j] = static_cast<int8_t>(std::min(127, nearest_int(iscale * scales[j])));
    for (int j = 0; j < kQKK / 16; ++j) {
      const float d = fp16_to_fp32(b.d) * static_cast<float>(b.scales[j]);
      if (d == 0.0f) continue;
      for (int l = 0; l < 16; ++l) {
        L[16 * j + l] = static_cast<int8_t>(std::clamp(nearest_int(x[16 * j + l] / d), -32, 31) + 32);
      }
    }
    // Per 128 elements: ql holds the low nibbles (elements l and l+64 share ql[l], l+32 and l+96 share
    // ql[l+32]), qh[l] holds the 2 high bits of elements l, l+32, l+64, l+96.
    for (int j = 0; j < kQKK; j += 128) {
      uint8_t* ql = b.ql + j / 2;
      uint8_t* qh = b.qh + j / 4;
      for (int l = 0; l < 32; ++l) {
        const int q1 = L[j + l];
        const int q2 = L[j + l + 32];
        const int q3 = L[j + l + 64];
        const int q4 = L[j + l + 96];
        ql[l] = static_cast<uint8_t>((q1 & 0xf) | ((q3 & 0xf) << 4));
        ql[l + 32] = static_cast<uint8_t>((q2 & 0xf) | ((q4 & 0xf) << 4));
        qh[l] = static_cast<uint8_t>((q1 >> 4) | ((q2 >> 4) << 2) | ((q3 >> 4) << 4) | ((q4 >> 4) << 6));
      }
    }
  }
}

// Q8_K: scale from the signed value of largest magnitude, so it maps to exactly -127 (or 127 after the min).
void quantize_q8_k(const float* x, BlockQ8_K* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, x += kQKK) {
    BlockQ8_K& b = y[i];
    const float max = x[argmax_abs(x, kQKK)];
    if (max == 0.0f) {
      std::memset(&b, 0, sizeof b);
      continue;
    }
    const float iscale = -127.f / max;
    for (int e = 0; e < kQKK; ++e) b.qs[e] = static_cast<int8_t>(std::min(127, nearest_int(iscale * x[e])));
    for (int g = 0; g < kQKK / 16; ++g) {
      int sum = 0;
      for (int e = g * 16; e < g * 16 + 16; ++e) sum += b.qs[e];
      b.bsums[g] = static_cast<int16_t>(sum);
    }
    b.d = 1 / iscale;
  }
}

}  // namespace tessera::quant
