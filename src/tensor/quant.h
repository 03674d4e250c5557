// Scalar reference conversions between f32 and every GGUF weight/activation format.
// These define correctness: the fast kernels (issue "CPU kernels") are tested against them.
#pragma once

#include <cstdint>

#include "tensor/ggml_type.h"

namespace tessera {

// dst[0..n) = values of the n elements encoded at src. n must be a multiple of the block size.
// Throws Error for a type Tessera cannot dequantize. Rows must be 2-byte aligned (4 for F32 and Q8_K).
void dequantize_row(GgmlType type, const void* src, float* dst, int64_t n);

// Encodes n floats into type's blocks (reference quantizer, no importance matrix), bit-compatible
// with ggml's reference quantizers. Throws Error for a type Tessera cannot quantize. src must be finite.
void quantize_row(GgmlType type, const float* src, void* dst, int64_t n);

// True when quantize_row supports the type.
bool can_quantize(GgmlType type);

// The activation format a weight type's integer dot product uses (ggml's vec_dot_type):
// Q4_0/Q5_0/Q8_0/IQ4_NL -> Q8_0, Q4_1/Q5_1 -> Q8_1, K-quants/IQ4_XS -> Q8_K, F16 -> F16, BF16 -> BF16, F32 -> F32.
GgmlType vec_dot_type(GgmlType weight_type);

// Activation quantization exactly as ggml's x86 CPU backend does it (see shared/fixtures/quant/README.md):
// Q8_0/Q8_1 round half to even; Q8_K keeps an f32 scale and 16 group sums.
void quantize_row_activation(GgmlType act_type, const float* src, void* dst, int64_t n);

// Reference dot product of one weight row with one activation row already in vec_dot_type(weight_type).
// Integer arithmetic where ggml's does; the result matches ggml's vec_dot to within float rounding.
// The scaled block sums are accumulated in double, so this is at least as accurate as any fast kernel.
float vec_dot_row(GgmlType weight_type, const void* weight_row, const void* act_row, int64_t n);

}  // namespace tessera
