// Scalar reference codecs and dot products for the plain float formats F32, F16 and BF16.
#include "tensor/fp16.h"
#include "tensor/quant_internal.h"

namespace tessera::quant {

void dequantize_f16(const uint16_t* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = fp16_to_fp32(x[i]);
}

void dequantize_bf16(const uint16_t* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = bf16_to_fp32(x[i]);
}

void quantize_f16(const float* x, uint16_t* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = fp32_to_fp16(x[i]);
}

void quantize_bf16(const float* x, uint16_t* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = fp32_to_bf16(x[i]);
}

// Products of two floats are exact in double, so a double sum is accurate to the final rounding;
// the fast kernels accumulate in f32 and are checked against this with a tolerance.
double dot_f32(const float* w, const float* x, int64_t n) {
  double sum = 0;
  for (int64_t i = 0; i < n; ++i) sum += static_cast<double>(w[i]) * x[i];
  return sum;
}

double dot_f16(const uint16_t* w, const uint16_t* x, int64_t n) {
  double sum = 0;
  for (int64_t i = 0; i < n; ++i) sum += static_cast<double>(fp16_to_fp32(w[i])) * fp16_to_fp32(x[i]);
  return sum;
}

double dot_bf16(const uint16_t* w, const uint16_t* x, int64_t n) {
  double sum = 0;
  for (int64_t i = 0; i < n; ++i) sum += static_cast<double>(bf16_to_fp32(w[i])) * bf16_to_fp32(x[i]);
  return sum;
}

}  // namespace tessera::quant
