// Element-wise and row-wise operations of the transformer forward pass (f32).
#pragma once

#include <cstdint>
#include <vector>

#include "tensor/kernels.h"

namespace tessera {

// out = x / sqrt(mean(x^2) + eps) * w (w may be null: no scaling).
void rms_norm(const float* x, const float* w, int64_t n, float eps, float* out);

// In-place softmax over n values.
void softmax(float* x, int64_t n);

// out[i] = silu(gate[i]) * up[i]
void swiglu(const float* gate, const float* up, int64_t n, float* out);

// The same on a given path (which the CPU must support), so tests cover every path the CPU has; the two above run
// the process's path (TESSERA_ISA or the CPU's best, as the kernels).
void softmax_on(Isa isa, float* x, int64_t n);
void swiglu_on(Isa isa, const float* gate, const float* up, int64_t n, float* out);

// Gemma's logit soft-capping in place: x = cap tanh(x / cap), within ~1e-7 cap of libm's tanh on the SIMD paths.
void softcap(float* x, int64_t n, float cap);
void softcap_on(Isa isa, float* x, int64_t n, float cap);

// Gemma's GELU, the tanh form 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))), evaluated in f32.
float gelu_tanh(float x);

// llama.cpp's CPU GELU: the tanh form looked up by the input's fp16 value (an fp16 table of 65536 entries), x for
// x >= 10 and 0 for x <= -10. Gemma's reference logits were computed with it; it differs from the exact form by up
// to ~2.4e-4 relative.
class GeluTable {
 public:
  GeluTable();
  float operator()(float x) const;
  const uint16_t* data() const { return table_.data(); }  // 65536 entries by fp16 bits, then one of padding

 private:
  std::vector<uint16_t> table_;
};

// out[i] = gelu(gate[i]) * up[i], through the table, or exactly when table is null.
void geglu(const float* gate, const float* up, int64_t n, float* out, const GeluTable* table);
void geglu_on(Isa isa, const float* gate, const float* up, int64_t n, float* out, const GeluTable& table);

enum class RopeMode { Norm, Neox };

// Rotates the first n_rot dims of each of n_heads vectors of head_dim floats at position pos. theta for pair i is
// pos * freq_scale * base^(-2i/n_rot) / factors[i] (factors may be null), computed as ggml does.
void rope(float* x, int64_t n_heads, int64_t head_dim, int64_t n_rot, int64_t pos, float freq_base, float freq_scale,
          const float* factors, RopeMode mode);

// rope in two steps, so the angles of a position are computed once for every layer: cs[2i], cs[2i + 1] = cos, sin
// of theta for pair i (n_rot / 2 pairs), then the rotation with them.
void rope_angles(int64_t pos, int64_t n_rot, float freq_base, float freq_scale, const float* factors, float* cs);
void rope_rotate(float* x, int64_t n_heads, int64_t head_dim, int64_t n_rot, const float* cs, RopeMode mode);

}  // namespace tessera
