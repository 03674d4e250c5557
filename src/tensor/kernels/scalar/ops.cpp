// The scalar row operations of the kernels' table (OpsFns): the references the SIMD paths are tested against.
#include <cmath>

#include "tensor/attention_tile.h"
#include "tensor/fp16.h"
#include "tensor/kernels/registry.h"

namespace tessera::kernels {
namespace {

void f16_to_f32_scalar(const uint16_t* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = fp16_to_fp32(x[i]);
}

void f32_to_f16_scalar(const float* x, uint16_t* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = fp32_to_fp16(x[i]);
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

void softcap_scalar(float* x, int64_t n, float cap) {
  const float inv = 1.0f / cap;
  for (int64_t i = 0; i < n; ++i) x[i] = std::tanh(x[i] * inv) * cap;
}

void geglu_table_scalar(const float* gate, const float* up, int64_t n, float* out, const uint16_t* table) {
  for (int64_t i = 0; i < n; ++i) {
    const float x = gate[i];
    const float g = x <= -10.0f ? 0.0f : x >= 10.0f ? x : fp16_to_fp32(table[fp32_to_fp16(x)]);
    out[i] = g * up[i];
  }
}

}  // namespace

const OpsFns& scalar_ops() {
  static constexpr OpsFns k{&f16_to_f32_scalar, &f32_to_f16_scalar, &softmax_scalar,    &swiglu_scalar,
                            &attend_scalar,     &softcap_scalar,    &geglu_table_scalar};
  return k;
}

}  // namespace tessera::kernels
