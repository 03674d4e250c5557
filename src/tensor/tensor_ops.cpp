// Row operations: scalar reference versions (accumulation orders follow ggml's where it changes results
// measurably), and AVX-512 versions of softmax and SwiGLU, whose libm exp calls dominated attention in prefill.
#include "tensor/tensor_ops.h"

#include <cmath>

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
bool use_avx512() {
  static const bool avx512 = select_isa() == Isa::Avx512;
  return avx512;
}

}  // namespace

void rms_norm(const float* x, const float* w, int64_t n, float eps, float* out) {
  // ggml sums squares in double (ggml_float) before the mean.
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i) sum += static_cast<double>(x[i]) * x[i];
  const float mean = static_cast<float>(sum / static_cast<double>(n));
  const float scale = 1.0f / std::sqrt(mean + eps);
  if (w != nullptr) {
    for (int64_t i = 0; i < n; ++i) out[i] = x[i] * scale * w[i];
  } else {
    for (int64_t i = 0; i < n; ++i) out[i] = x[i] * scale;
  }
}

void softmax(float* x, int64_t n) {
  if (n <= 0) return;
  if (use_avx512()) return softmax_avx512(x, n);
  softmax_scalar(x, n);
}

void swiglu(const float* gate, const float* up, int64_t n, float* out) {
  if (use_avx512()) return swiglu_avx512(gate, up, n, out);
  swiglu_scalar(gate, up, n, out);
}

void rope(float* x, int64_t n_heads, int64_t head_dim, int64_t n_rot, int64_t pos, float freq_base, float freq_scale,
          const float* factors, RopeMode mode) {
  const float theta_scale = std::pow(freq_base, -2.0f / static_cast<float>(n_rot));
  const int64_t half = n_rot / 2;
  float theta_base = static_cast<float>(pos);
  for (int64_t i = 0; i < half; ++i) {
    const float factor = factors != nullptr ? factors[i] : 1.0f;
    const float theta = freq_scale * (theta_base / factor);
    const float c = std::cos(theta);
    const float s = std::sin(theta);
    for (int64_t h = 0; h < n_heads; ++h) {
      float* v = x + h * head_dim;
      const int64_t a = mode == RopeMode::Norm ? 2 * i : i;
      const int64_t b = mode == RopeMode::Norm ? 2 * i + 1 : i + half;
      const float x0 = v[a];
      const float x1 = v[b];
      v[a] = x0 * c - x1 * s;
      v[b] = x0 * s + x1 * c;
    }
    theta_base *= theta_scale;
  }
}

}  // namespace tessera
