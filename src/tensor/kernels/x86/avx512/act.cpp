// AVX-512 activation quantizers (byte-identical to quant.h's).
#include <cstring>

#include "tensor/kernels/x86/avx512/common.h"
#include "tensor/quant_blocks.h"

namespace tessera::kernels::avx512 {
namespace {

using quant::BlockQ8_0;
using quant::BlockQ8_1;
using quant::BlockQ8_K;

// Explicit round-to-nearest-even: the reference uses nearbyint in the default rounding mode.
constexpr int kRne = _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC;

// Wraps to int8 like the reference's static_cast (vpmovdb truncates too, but the sums must see the same values).
// That only matters when a block's amax is so small that 127 / amax overflows to inf: conversion gives INT_MIN.
inline __m512i wrap_i8(__m512i q) { return _mm512_srai_epi32(_mm512_slli_epi32(q, 24), 24); }

// Shared by Q8_0 and Q8_1: id = 127/amax and round half to even. Returns amax / 127 and sets *sum to the sum of
// the quantized values.
inline float quantize_block32(const float* x, int8_t* qs, int* sum) {
  const __m512 v0 = _mm512_loadu_ps(x);
  const __m512 v1 = _mm512_loadu_ps(x + 16);
  const float amax = _mm512_reduce_max_ps(_mm512_max_ps(_mm512_abs_ps(v0), _mm512_abs_ps(v1)));
  const __m512 id = _mm512_set1_ps(amax != 0.0f ? 127.0f / amax : 0.0f);
  const __m512i q0 = wrap_i8(_mm512_cvt_roundps_epi32(_mm512_mul_ps(v0, id), kRne));
  const __m512i q1 = wrap_i8(_mm512_cvt_roundps_epi32(_mm512_mul_ps(v1, id), kRne));
  _mm_storeu_si128(reinterpret_cast<__m128i*>(qs), _mm512_cvtepi32_epi8(q0));
  _mm_storeu_si128(reinterpret_cast<__m128i*>(qs + 16), _mm512_cvtepi32_epi8(q1));
  *sum = _mm512_reduce_add_epi32(_mm512_add_epi32(q0, q1));
  return amax / 127.0f;
}

void quantize_q8_0(const float* x, void* vy, int64_t n) {
  auto* y = static_cast<BlockQ8_0*>(vy);
  for (int64_t i = 0; i < n / 32; ++i, x += 32) {
    int sum;
    const float d = quantize_block32(x, y[i].qs, &sum);
    y[i].d = to_half(d);
  }
}

void quantize_q8_1(const float* x, void* vy, int64_t n) {
  auto* y = static_cast<BlockQ8_1*>(vy);
  for (int64_t i = 0; i < n / 32; ++i, x += 32) {
    int sum;
    const float d = quantize_block32(x, y[i].qs, &sum);
    y[i].d = to_half(d);
    y[i].s = to_half(d * static_cast<float>(sum));
  }
}

// Q8_K: the scale comes from the signed value of largest magnitude, the first one on ties (its sign decides
// which end gets -127), iscale = -127/max, levels capped at 127, f32 d = 1/iscale and 16 group sums.
void quantize_q8_k(const float* x, void* vy, int64_t n) {
  auto* y = static_cast<BlockQ8_K*>(vy);
  for (int64_t i = 0; i < n / 256; ++i, x += 256) {
    __m512 v[16];
    __m512 amax_v = _mm512_setzero_ps();
    for (int j = 0; j < 16; ++j) {
      v[j] = _mm512_loadu_ps(x + 16 * j);
      amax_v = _mm512_max_ps(amax_v, _mm512_abs_ps(v[j]));
    }
    const float amax = _mm512_reduce_max_ps(amax_v);
    if (amax == 0.0f) {
      std::memset(&y[i], 0, sizeof y[i]);
      continue;
    }
    int first = 0;
    for (int j = 0; j < 16; ++j) {
      const __mmask16 hit = _mm512_cmp_ps_mask(_mm512_abs_ps(v[j]), _mm512_set1_ps(amax), _CMP_EQ_OQ);
      if (hit != 0) {
        first = 16 * j + __builtin_ctz(hit);
        break;
      }
    }
    const float iscale = -127.0f / x[first];
    const __m512 s = _mm512_set1_ps(iscale);
    for (int j = 0; j < 16; ++j) {
      const __m512i q =
          wrap_i8(_mm512_min_epi32(_mm512_cvt_roundps_epi32(_mm512_mul_ps(v[j], s), kRne), _mm512_set1_epi32(127)));
      _mm_storeu_si128(reinterpret_cast<__m128i*>(y[i].qs + 16 * j), _mm512_cvtepi32_epi8(q));
      y[i].bsums[j] = static_cast<int16_t>(_mm512_reduce_add_epi32(q));
    }
    y[i].d = 1 / iscale;
  }
}

void copy_f32(const float* x, void* y, int64_t n) {
  if (n > 0) std::memcpy(y, x, static_cast<size_t>(n) * sizeof(float));
}

}  // namespace

ActQuantFn quantize_act(GgmlType act) {
  switch (act) {
    case GgmlType::F32:
      return &copy_f32;
    case GgmlType::Q8_0:
      return &quantize_q8_0;
    case GgmlType::Q8_1:
      return &quantize_q8_1;
    case GgmlType::Q8_K:
      return &quantize_q8_k;
    default:
      return nullptr;
  }
}

}  // namespace tessera::kernels::avx512
