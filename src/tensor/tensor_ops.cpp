// Row operations: scalar reference versions (accumulation orders follow ggml's where it changes results
// measurably), and AVX2 / AVX-512 versions of softmax and SwiGLU, whose libm exp calls dominated attention in prefill
// (and SwiGLU took 2.6% of an AVX2 prefill).
#include "tensor/tensor_ops.h"

#include <cmath>
#include <vector>

#include "tensor/kernels.h"
#include "tensor/simd_math.h"

namespace tessera {
namespace {

using simd::exp512;

TESSERA_AVX512 inline __mmask16 tail_mask(int64_t left) {
  return static_cast<__mmask16>(left >= 16 ? 0xffff : (1u << left) - 1);
}

TESSERA_AVX512 void softmax_avx512(float* x, int64_t n) {
  __m512 mx = _mm512_set1_ps(-INFINITY);
  for (int64_t i = 0; i < n; i += 16) {
    mx = _mm512_max_ps(mx, _mm512_mask_loadu_ps(_mm512_set1_ps(-INFINITY), tail_mask(n - i), x + i));
  }
  const __m512 max = _mm512_set1_ps(_mm512_reduce_max_ps(mx));
  __m512 sum = _mm512_setzero_ps();
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 m = tail_mask(n - i);
    const __m512 e = _mm512_maskz_mov_ps(m, exp512(_mm512_sub_ps(_mm512_maskz_loadu_ps(m, x + i), max)));
    _mm512_mask_storeu_ps(x + i, m, e);
    sum = _mm512_add_ps(sum, e);
  }
  alignas(64) float lanes[16];
  _mm512_store_ps(lanes, sum);
  double total = 0.0;
  for (float v : lanes) total += v;
  const __m512 inv = _mm512_set1_ps(static_cast<float>(1.0 / total));
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 m = tail_mask(n - i);
    _mm512_mask_storeu_ps(x + i, m, _mm512_mul_ps(_mm512_maskz_loadu_ps(m, x + i), inv));
  }
}

TESSERA_AVX512 void swiglu_avx512(const float* gate, const float* up, int64_t n, float* out) {
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 m = tail_mask(n - i);
    const __m512 g = _mm512_maskz_loadu_ps(m, gate + i);
    const __m512 silu =
        _mm512_div_ps(g, _mm512_add_ps(_mm512_set1_ps(1.0f), exp512(_mm512_sub_ps(_mm512_setzero_ps(), g))));
    _mm512_mask_storeu_ps(out + i, m, _mm512_mul_ps(silu, _mm512_maskz_loadu_ps(m, up + i)));
  }
}

TESSERA_AVX2 inline __m256i tail_mask8(int64_t left) {
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(left < 8 ? left : 8)),
                            _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

// exp256 stops at 2^-126 below e^-87; these results are 0 there, as libm's (the largest missed value is 1e-38).
TESSERA_AVX2 inline __m256 exp_or_zero256(__m256 x) {
  return _mm256_and_ps(_mm256_cmp_ps(x, _mm256_set1_ps(-87.0f), _CMP_GE_OQ), simd::exp256(x));
}

TESSERA_AVX2 void softmax_avx2(float* x, int64_t n) {
  const __m256 neg_inf = _mm256_set1_ps(-INFINITY);
  __m256 mx = neg_inf;
  for (int64_t i = 0; i < n; i += 8) {
    const __m256i m = tail_mask8(n - i);
    mx = _mm256_max_ps(mx, _mm256_blendv_ps(neg_inf, _mm256_maskload_ps(x + i, m), _mm256_castsi256_ps(m)));
  }
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, mx);
  float top = lanes[0];
  for (float v : lanes) top = std::fmax(top, v);
  const __m256 max = _mm256_set1_ps(top);
  __m256 sum = _mm256_setzero_ps();
  for (int64_t i = 0; i < n; i += 8) {
    const __m256i m = tail_mask8(n - i);
    const __m256 e =
        _mm256_and_ps(_mm256_castsi256_ps(m), exp_or_zero256(_mm256_sub_ps(_mm256_maskload_ps(x + i, m), max)));
    _mm256_maskstore_ps(x + i, m, e);
    sum = _mm256_add_ps(sum, e);
  }
  _mm256_store_ps(lanes, sum);
  double total = 0.0;
  for (float v : lanes) total += v;
  const __m256 inv = _mm256_set1_ps(static_cast<float>(1.0 / total));
  for (int64_t i = 0; i < n; i += 8) {
    const __m256i m = tail_mask8(n - i);
    _mm256_maskstore_ps(x + i, m, _mm256_mul_ps(_mm256_maskload_ps(x + i, m), inv));
  }
}

TESSERA_AVX2 void swiglu_avx2(const float* gate, const float* up, int64_t n, float* out) {
  for (int64_t i = 0; i < n; i += 8) {
    const __m256i m = tail_mask8(n - i);
    const __m256 g = _mm256_maskload_ps(gate + i, m);
    // Below -87 silu(g) is within 1e-35 of 0, where exp256's clamp would leave g / e^88.
    const __m256 silu = _mm256_and_ps(
        _mm256_cmp_ps(g, _mm256_set1_ps(-87.0f), _CMP_GE_OQ),
        _mm256_div_ps(g, _mm256_add_ps(_mm256_set1_ps(1.0f), simd::exp256(_mm256_sub_ps(_mm256_setzero_ps(), g)))));
    _mm256_maskstore_ps(out + i, m, _mm256_mul_ps(silu, _mm256_maskload_ps(up + i, m)));
  }
}

void softmax_scalar(float* x, int64_t n) {
  float max = x[0];
  for (int64_t i = 1; i < n; ++i) max = std::fmax(max, x[i]);
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i) {
    x[i] = std::exp(x[i] - max);
    sum += x[i];
  }
  const float inv = static_cast<float>(1.0 / sum);
  for (int64_t i = 0; i < n; ++i) x[i] *= inv;
}

void swiglu_scalar(const float* gate, const float* up, int64_t n, float* out) {
  for (int64_t i = 0; i < n; ++i) {
    const float g = gate[i];
    out[i] = g / (1.0f + std::exp(-g)) * up[i];
  }
}

// The path is chosen once per process, like the kernels (TESSERA_ISA or the CPU's best).
Isa path() {
  static const Isa isa = select_isa();
  return isa;
}

}  // namespace

void rms_norm(const float* x, const float* w, int64_t n, float eps, float* out) {
  // ggml sums squares in double (ggml_float) before the mean. Eight partial sums: one chain of dependent double
  // adds took ~2.7 us per 2048-element row, twice per layer of every decode step.
  // A layer's norm weights are cold (its matmuls stream megabytes between two visits): every line asked for at once
  // while the squares are summed, instead of one miss at a time in the scaling loop.
  if (w != nullptr) {
    for (int64_t j = 0; j < n; j += 16) __builtin_prefetch(w + j);
  }
  double part[8] = {};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    for (int j = 0; j < 8; ++j) part[j] += static_cast<double>(x[i + j]) * x[i + j];
  }
  for (; i < n; ++i) part[0] += static_cast<double>(x[i]) * x[i];
  const double sum = ((part[0] + part[1]) + (part[2] + part[3])) + ((part[4] + part[5]) + (part[6] + part[7]));
  const float mean = static_cast<float>(sum / static_cast<double>(n));
  const float scale = 1.0f / std::sqrt(mean + eps);
  if (w != nullptr) {
    for (i = 0; i < n; ++i) out[i] = x[i] * scale * w[i];
  } else {
    for (i = 0; i < n; ++i) out[i] = x[i] * scale;
  }
}

void softmax_on(Isa isa, float* x, int64_t n) {
  if (n <= 0) return;
  if (isa == Isa::Avx512) return softmax_avx512(x, n);
  if (isa == Isa::Avx2) return softmax_avx2(x, n);
  softmax_scalar(x, n);
}

void swiglu_on(Isa isa, const float* gate, const float* up, int64_t n, float* out) {
  if (isa == Isa::Avx512) return swiglu_avx512(gate, up, n, out);
  if (isa == Isa::Avx2) return swiglu_avx2(gate, up, n, out);
  swiglu_scalar(gate, up, n, out);
}

void softmax(float* x, int64_t n) { softmax_on(path(), x, n); }

void swiglu(const float* gate, const float* up, int64_t n, float* out) { swiglu_on(path(), gate, up, n, out); }

void rope_angles(int64_t pos, int64_t n_rot, float freq_base, float freq_scale, const float* factors, float* cs) {
  const float theta_scale = std::pow(freq_base, -2.0f / static_cast<float>(n_rot));
  float theta_base = static_cast<float>(pos);
  for (int64_t i = 0; i < n_rot / 2; ++i) {
    const float factor = factors != nullptr ? factors[i] : 1.0f;
    const float theta = freq_scale * (theta_base / factor);
    cs[2 * i] = std::cos(theta);
    cs[2 * i + 1] = std::sin(theta);
    theta_base *= theta_scale;
  }
}

void rope_rotate(float* x, int64_t n_heads, int64_t head_dim, int64_t n_rot, const float* cs, RopeMode mode) {
  // Head by head, each head's pairs in order: the loops vectorize and the rows are read front to back.
  const int64_t half = n_rot / 2;
  for (int64_t h = 0; h < n_heads; ++h) {
    float* v = x + h * head_dim;
    if (mode == RopeMode::Norm) {
      for (int64_t i = 0; i < half; ++i) {
        const float x0 = v[2 * i];
        const float x1 = v[2 * i + 1];
        v[2 * i] = x0 * cs[2 * i] - x1 * cs[2 * i + 1];
        v[2 * i + 1] = x0 * cs[2 * i + 1] + x1 * cs[2 * i];
      }
    } else {
      for (int64_t i = 0; i < half; ++i) {
        const float x0 = v[i];
        const float x1 = v[i + half];
        v[i] = x0 * cs[2 * i] - x1 * cs[2 * i + 1];
        v[i + half] = x0 * cs[2 * i + 1] + x1 * cs[2 * i];
      }
    }
  }
}

void rope(float* x, int64_t n_heads, int64_t head_dim, int64_t n_rot, int64_t pos, float freq_base, float freq_scale,
          const float* factors, RopeMode mode) {
  std::vector<float> cs(static_cast<size_t>(n_rot / 2 * 2));
  rope_angles(pos, n_rot, freq_base, freq_scale, factors, cs.data());
  rope_rotate(x, n_heads, head_dim, n_rot, cs.data(), mode);
}

}  // namespace tessera
