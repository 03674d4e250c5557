// The AVX-512 row operations of the kernels' table (OpsFns): f16 rows to f32 and back (vec_ops.h), softmax
// and SwiGLU (tensor_ops.h) with the vectorised exp, and the path's attention update (attention.cpp).
#include <cmath>

#include "tensor/fp16.h"
#include "tensor/kernels/x86/avx512/common.h"
#include "tensor/kernels/x86/avx512/exp.h"

namespace tessera::kernels::avx512 {
namespace {

void f32_to_f16(const float* x, uint16_t* y, int64_t n) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(y + i),
                        _mm512_cvtps_ph(_mm512_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT));
  }
  for (; i < n; ++i) y[i] = fp32_to_fp16(x[i]);
}

void f16_to_f32(const uint16_t* x, float* y, int64_t n) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    // The zero-masked form: GCC 12 warns inside the plain intrinsic (its header reads an undefined vector).
    _mm512_storeu_ps(y + i, _mm512_maskz_cvtph_ps(0xFFFF, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x + i))));
  }
  for (; i < n; ++i) y[i] = fp16_to_fp32(x[i]);
}

inline __mmask16 tail_mask(int64_t left) { return static_cast<__mmask16>(left >= 16 ? 0xffff : (1u << left) - 1); }

void softmax(float* x, int64_t n) {
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

void swiglu(const float* gate, const float* up, int64_t n, float* out) {
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 m = tail_mask(n - i);
    const __m512 g = _mm512_maskz_loadu_ps(m, gate + i);
    const __m512 silu =
        _mm512_div_ps(g, _mm512_add_ps(_mm512_set1_ps(1.0f), exp512(_mm512_sub_ps(_mm512_setzero_ps(), g))));
    _mm512_mask_storeu_ps(out + i, m, _mm512_mul_ps(silu, _mm512_maskz_loadu_ps(m, up + i)));
  }
}

// tanh(y) = 1 - 2 / (e^2|y| + 1) with y's sign: within ~1e-7 of tanh absolutely (the soft-cap scales that by
// cap), where libm's tanhf per vocabulary entry was a visible share of a small model's decode step.
void softcap(float* x, int64_t n, float cap) {
  const __m512 inv2 = _mm512_set1_ps(2.0f / cap);
  const __m512 c = _mm512_set1_ps(cap);
  const __m512 one = _mm512_set1_ps(1.0f);
  const __m512 two = _mm512_set1_ps(2.0f);
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 m = tail_mask(n - i);
    const __m512 v = _mm512_maskz_loadu_ps(m, x + i);
    const __m512 e = exp512(_mm512_mul_ps(_mm512_abs_ps(v), inv2));
    const __m512 t = _mm512_sub_ps(one, _mm512_div_ps(two, _mm512_add_ps(e, one)));
    // The sign bit of v on |tanh| times cap.
    const __m512 sign = _mm512_and_ps(v, _mm512_set1_ps(-0.0f));
    // NaN stays NaN, as libm's tanh leaves it (the sampler reads it as -inf; a capped value could win).
    const __m512 capped = _mm512_or_ps(_mm512_mul_ps(t, c), sign);
    _mm512_mask_storeu_ps(x + i, m, _mm512_mask_mov_ps(capped, _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q), v));
  }
}

// The table lookup as a gather of 16 entries (4-byte reads at 2-byte steps: the table has one entry of padding),
// bit-identical to the scalar loop; serial per-token work beside the experts' matrix passes.
void geglu_table(const float* gate, const float* up, int64_t n, float* out, const uint16_t* table) {
  const __m512 lo = _mm512_set1_ps(-10.0f);
  const __m512 hi = _mm512_set1_ps(10.0f);
  const __m512i low16 = _mm512_set1_epi32(0xFFFF);
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 m = tail_mask(n - i);
    const __m512 x = _mm512_maskz_loadu_ps(m, gate + i);
    const __m512i idx = _mm512_cvtepu16_epi32(_mm512_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT));
    const __m512i h = _mm512_and_si512(_mm512_mask_i32gather_epi32(_mm512_setzero_si512(), m, idx, table, 2), low16);
    __m512 g = _mm512_maskz_cvtph_ps(0xFFFF, _mm512_cvtepi32_epi16(h));
    g = _mm512_mask_mov_ps(g, _mm512_cmp_ps_mask(x, hi, _CMP_GE_OQ), x);
    g = _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(x, lo, _CMP_GT_OQ), g);
    _mm512_mask_storeu_ps(out + i, m, _mm512_mul_ps(g, _mm512_maskz_loadu_ps(m, up + i)));
  }
}

}  // namespace

constexpr OpsFns kOps{&f16_to_f32, &f32_to_f16, &softmax, &swiglu, &attend, &softcap, &geglu_table};

}  // namespace tessera::kernels::avx512
