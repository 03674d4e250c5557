// Row operations (accumulation orders follow ggml's where it changes results measurably). softmax and SwiGLU run
// the path's version from the kernels' table (OpsFns): vectorised exp in place of libm's, which dominated prefill's
// attention (docs/perf-log/attention.md).
#include "tensor/tensor_ops.h"

#include <cmath>
#include <vector>

#include "tensor/fp16.h"
#include "tensor/kernels.h"

namespace tessera {
namespace {

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
  Kernels::get(isa).ops().softmax(x, n);
}

void swiglu_on(Isa isa, const float* gate, const float* up, int64_t n, float* out) {
  Kernels::get(isa).ops().swiglu(gate, up, n, out);
}

void softcap_on(Isa isa, float* x, int64_t n, float cap) {
  if (n > 0) Kernels::get(isa).ops().softcap(x, n, cap);
}

void softmax(float* x, int64_t n) { softmax_on(path(), x, n); }

void softcap(float* x, int64_t n, float cap) { softcap_on(path(), x, n, cap); }

void swiglu(const float* gate, const float* up, int64_t n, float* out) { swiglu_on(path(), gate, up, n, out); }

float gelu_tanh(float x) {
  constexpr float kSqrt2OverPi = 0.79788456080286535587989211986876f;
  constexpr float kCoef = 0.044715f;
  return 0.5f * x * (1.0f + std::tanh(kSqrt2OverPi * x * (1.0f + kCoef * x * x)));
}

// The padding entry lets a vector path read each entry as 4 bytes (a gather of 32-bit words).
GeluTable::GeluTable() : table_((size_t{1} << 16) + 1) {
  for (size_t h = 0; h < (size_t{1} << 16); ++h) {
    table_[h] = fp32_to_fp16(gelu_tanh(fp16_to_fp32(static_cast<uint16_t>(h))));
  }
}

float GeluTable::operator()(float x) const {
  if (x <= -10.0f) return 0.0f;
  if (x >= 10.0f) return x;
  return fp16_to_fp32(table_[fp32_to_fp16(x)]);
}

void geglu(const float* gate, const float* up, int64_t n, float* out, const GeluTable* table) {
  if (table != nullptr) {
    geglu_on(path(), gate, up, n, out, *table);
  } else {
    for (int64_t i = 0; i < n; ++i) out[i] = gelu_tanh(gate[i]) * up[i];
  }
}

void geglu_on(Isa isa, const float* gate, const float* up, int64_t n, float* out, const GeluTable& table) {
  if (n > 0) Kernels::get(isa).ops().geglu_table(gate, up, n, out, table.data());
}

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
