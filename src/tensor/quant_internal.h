// Per-format scalar codecs behind quant.h's type dispatch (quant.cpp). Internal to src/tensor.
// Block functions take a block count nb; the float-format ones take an element count n.
#pragma once

#include <cstdint>

#include "tensor/quant_blocks.h"

namespace tessera::quant {

// quant_float.cpp
void dequantize_f16(const uint16_t* x, float* y, int64_t n);
void dequantize_bf16(const uint16_t* x, float* y, int64_t n);
void quantize_f16(const float* x, uint16_t* y, int64_t n);
void quantize_bf16(const float* x, uint16_t* y, int64_t n);
double dot_f32(const float* w, const float* x, int64_t n);
double dot_f16(const uint16_t* w, const uint16_t* x, int64_t n);
double dot_bf16(const uint16_t* w, const uint16_t* x, int64_t n);

// quant_legacy.cpp
void dequantize_q4_0(const BlockQ4_0* x, float* y, int64_t nb);
void dequantize_q4_1(const BlockQ4_1* x, float* y, int64_t nb);
void dequantize_q5_0(const BlockQ5_0* x, float* y, int64_t nb);
void dequantize_q5_1(const BlockQ5_1* x, float* y, int64_t nb);
void dequantize_q8_0(const BlockQ8_0* x, float* y, int64_t nb);
void dequantize_q8_1(const BlockQ8_1* x, float* y, int64_t nb);
void quantize_q4_0(const float* x, BlockQ4_0* y, int64_t nb);
void quantize_q4_1(const float* x, BlockQ4_1* y, int64_t nb);
void quantize_q5_0(const float* x, BlockQ5_0* y, int64_t nb);
void quantize_q5_1(const float* x, BlockQ5_1* y, int64_t nb);
void quantize_q8_0(const float* x, BlockQ8_0* y, int64_t nb);
void quantize_q8_1(const float* x, BlockQ8_1* y, int64_t nb);
// The activation variants round half to even with id = 127/amax, as ggml's x86 CPU backend does.
void quantize_q8_0_activation(const float* x, BlockQ8_0* y, int64_t nb);
void quantize_q8_1_activation(const float* x, BlockQ8_1* y, int64_t nb);
double dot_q4_0_q8_0(const BlockQ4_0* w, const BlockQ8_0* x, int64_t nb);
double dot_q4_1_q8_1(const BlockQ4_1* w, const BlockQ8_1* x, int64_t nb);
double dot_q5_0_q8_0(const BlockQ5_0* w, const BlockQ8_0* x, int64_t nb);
double dot_q5_1_q8_1(const BlockQ5_1* w, const BlockQ8_1* x, int64_t nb);
double dot_q8_0_q8_0(const BlockQ8_0* w, const BlockQ8_0* x, int64_t nb);
double dot_q8_1_q8_1(const BlockQ8_1* w, const BlockQ8_1* x, int64_t nb);

// quant_kquants.cpp
void dequantize_q2_k(const BlockQ2_K* x, float* y, int64_t nb);
void dequantize_q3_k(const BlockQ3_K* x, float* y, int64_t nb);
void dequantize_q4_k(const BlockQ4_K* x, float* y, int64_t nb);
void dequantize_q5_k(const BlockQ5_K* x, float* y, int64_t nb);
void dequantize_q6_k(const BlockQ6_K* x, float* y, int64_t nb);
void dequantize_q8_k(const BlockQ8_K* x, float* y, int64_t nb);
double dot_q2_k_q8_k(const BlockQ2_K* w, const BlockQ8_K* x, int64_t nb);
double dot_q3_k_q8_k(const BlockQ3_K* w, const BlockQ8_K* x, int64_t nb);
double dot_q4_k_q8_k(const BlockQ4_K* w, const BlockQ8_K* x, int64_t nb);
double dot_q5_k_q8_k(const BlockQ5_K* w, const BlockQ8_K* x, int64_t nb);
double dot_q6_k_q8_k(const BlockQ6_K* w, const BlockQ8_K* x, int64_t nb);
// Element e's level (0..3) of a Q2_K block.
int q2k_level(const BlockQ2_K& b, int e);
// Element e's level (-4..3) of a Q3_K block: a clear hmask bit means "subtract 4".
int q3k_level(const BlockQ3_K& b, int e);
// Element e's level (-32..31) of a Q6_K block: each 128-element half has 64 ql bytes and 32 qh bytes; elements
// l, l+32, l+64, l+96 share qh[l].
int q6k_level(const BlockQ6_K& b, int e);
void q6k_levels(const BlockQ6_K& b, int8_t* out);  // all 256, in element order
double dot_q8_k_q8_k(const BlockQ8_K* w, const BlockQ8_K* x, int64_t nb);

// quant_kquants_quantize.cpp
void quantize_q2_k(const float* x, BlockQ2_K* y, int64_t nb);
void quantize_q3_k(const float* x, BlockQ3_K* y, int64_t nb);
void quantize_q4_k(const float* x, BlockQ4_K* y, int64_t nb);
void quantize_q5_k(const float* x, BlockQ5_K* y, int64_t nb);
void quantize_q6_k(const float* x, BlockQ6_K* y, int64_t nb);
void quantize_q8_k(const float* x, BlockQ8_K* y, int64_t nb);

// quant_iq.cpp
void dequantize_iq4_nl(const BlockIQ4_NL* x, float* y, int64_t nb);
void dequantize_iq4_xs(const BlockIQ4_XS* x, float* y, int64_t nb);
double dot_iq4_nl_q8_0(const BlockIQ4_NL* w, const BlockQ8_0* x, int64_t nb);
double dot_iq4_xs_q8_k(const BlockIQ4_XS* w, const BlockQ8_K* x, int64_t nb);

// quant_iq_quantize.cpp
void quantize_iq4_nl(const float* x, BlockIQ4_NL* y, int64_t nb);
void quantize_iq4_xs(const float* x, BlockIQ4_XS* y, int64_t nb);

}  // namespace tessera::quant
