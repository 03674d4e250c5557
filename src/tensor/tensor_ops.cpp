// Scalar reference versions; accumulation orders follow ggml's where it changes results measurably.
#include "tensor/tensor_ops.h"

#include <cmath>

namespace tessera {

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

void swiglu(const float* gate, const float* up, int64_t n, float* out) {
  for (int64_t i = 0; i < n; ++i) {
    const float g = gate[i];
    out[i] = g / (1.0f + std::exp(-g)) * up[i];
  }
}

void rope(float* x, int64_t n_heads, int64_t head_dim, int64_t n_rot, int64_t pos, float freq_base,
          float freq_scale, const float* factors, RopeMode mode) {
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
