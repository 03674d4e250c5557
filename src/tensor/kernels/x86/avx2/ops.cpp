// The AVX2 row operations of the kernels' table (OpsFns): f16 rows to f32 and back (vec_ops.h), softmax
// and SwiGLU (tensor_ops.h) with the vectorised exp, and the path's attention update (attention.cpp).
#include <cmath>

#include "tensor/fp16.h"
#include "tensor/kernels/x86/avx2/common.h"
#include "tensor/kernels/x86/avx2/exp.h"

namespace tessera::kernels::avx2 {
namespace {

void f32_to_f16(const float* x, uint16_t* y, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    _mm_storeu_si128(reinterpret_cast<__m128i*>(y + i),
                     _mm256_cvtps_ph(_mm256_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT));
  }
  for (; i < n; ++i) y[i] = fp32_to_fp16(x[i]);
}

void f16_to_f32(const uint16_t* x, float* y, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    _mm256_storeu_ps(y + i, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(x + i))));
  }
  for (; i < n; ++i) y[i] = fp16_to_fp32(x[i]);
}

inline __m256i tail_mask8(int64_t left) {
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(left < 8 ? left : 8)),
                            _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

// exp256 stops at 2^-126 below e^-87; these results are 0 there, as libm's (the largest missed value is 1e-38).
inline __m256 exp_or_zero256(__m256 x) {
  return _mm256_and_ps(_mm256_cmp_ps(x, _mm256_set1_ps(-87.0f), _CMP_GE_OQ), exp256(x));
}

void softmax(float* x, int64_t n) {
  const __m256 neg_inf = _mm256_set1_ps(-INFINITY);
  __m256 mx = neg_inf;
  for (int64_t i = 0; i < n; i += 8) {
    const __m256i m = tail_mask8(n - i);
    mx = _mm256_max_ps(mx, _mm256_blendv_ps(neg_inf, _mm256_maskload_ps(x + i, m), _mm256_castsi256_ps(m)));
  }
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, mx);
  float top = lanes[0];
  for (float v : lanes) top = std::fmax(top, v);
  const __m256 max = _mm256_set1_ps(top);
  __m256 sum = _mm256_setzero_ps();
  for (int64_t i = 0; i < n; i += 8) {
    const __m256i m = tail_mask8(n - i);
    const __m256 e =
        _mm256_and_ps(_mm256_castsi256_ps(m), exp_or_zero256(_mm256_sub_ps(_mm256_maskload_ps(x + i, m), max)));
    _mm256_maskstore_ps(x + i, m, e);
    sum = _mm256_add_ps(sum, e);
  }
  _mm256_store_ps(lanes, sum);
  double total = 0.0;
  for (float v : lanes) total += v;
  const __m256 inv = _mm256_set1_ps(static_cast<float>(1.0 / total));
  for (int64_t i = 0; i < n; i += 8) {
    const __m256i m = tail_mask8(n - i);
    _mm256_maskstore_ps(x + i, m, _mm256_mul_ps(_mm256_maskload_ps(x + i, m), inv));
  }
}

void swiglu(const float* gate, const float* up, int64_t n, float* out) {
  for (int64_t i = 0; i < n; i += 8) {
    const __m256i m = tail_mask8(n - i);
    const __m256 g = _mm256_maskload_ps(gate + i, m);
    // Below -87 silu(g) is within 1e-35 of 0, where exp256's clamp would leave g / e^88.
    const __m256 silu = _mm256_and_ps(
        _mm256_cmp_ps(g, _mm256_set1_ps(-87.0f), _CMP_GE_OQ),
        _mm256_div_ps(g, _mm256_add_ps(_mm256_set1_ps(1.0f), exp256(_mm256_sub_ps(_mm256_setzero_ps(), g)))));
    _mm256_maskstore_ps(out + i, m, _mm256_mul_ps(silu, _mm256_maskload_ps(up + i, m)));
  }
}

// tanh(y) = 1 - 2 / (e^2|y| + 1) with y's sign, as avx512/ops.cpp's: exp256's clamp at 88 gives exactly 1 there.
void softcap(float* x, int64_t n, float cap) {
  const __m256 inv2 = _mm256_set1_ps(2.0f / cap);
  const __m256 c = _mm256_set1_ps(cap);
  const __m256 one = _mm256_set1_ps(1.0f);
  const __m256 two = _mm256_set1_ps(2.0f);
  const __m256 sign_bit = _mm256_set1_ps(-0.0f);
  for (int64_t i = 0; i < n; i += 8) {
    const __m256i m = tail_mask8(n - i);
    const __m256 v = _mm256_maskload_ps(x + i, m);
    const __m256 e = exp256(_mm256_mul_ps(_mm256_andnot_ps(sign_bit, v), inv2));
    const __m256 t = _mm256_sub_ps(one, _mm256_div_ps(two, _mm256_add_ps(e, one)));
    // NaN stays NaN, as libm's tanh leaves it.
    const __m256 capped = _mm256_or_ps(_mm256_mul_ps(t, c), _mm256_and_ps(v, sign_bit));
    _mm256_maskstore_ps(x + i, m, _mm256_blendv_ps(capped, v, _mm256_cmp_ps(v, v, _CMP_UNORD_Q)));
  }
}

// As avx512/ops.cpp's: a gather of 8 table entries, bit-identical to the scalar loop.
void geglu_table(const float* gate, const float* up, int64_t n, float* out, const uint16_t* table) {
  const __m256 lo = _mm256_set1_ps(-10.0f);
  const __m256 hi = _mm256_set1_ps(10.0f);
  const __m256i low16 = _mm256_set1_epi32(0xFFFF);
  const auto* base = reinterpret_cast<const int*>(table);
  for (int64_t i = 0; i < n; i += 8) {
    const __m256i m = tail_mask8(n - i);
    const __m256 x = _mm256_maskload_ps(gate + i, m);  // 0 in the lanes past the row: index 0, a valid entry
    const __m256i idx = _mm256_cvtepu16_epi32(_mm256_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT));
    const __m256i h = _mm256_and_si256(_mm256_i32gather_epi32(base, idx, 2), low16);
    // Entries fit 16 bits: unsigned saturation keeps them.
    const __m128i h16 = _mm_packus_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1));
    __m256 g = _mm256_cvtph_ps(h16);
    g = _mm256_blendv_ps(g, x, _mm256_cmp_ps(x, hi, _CMP_GE_OQ));
    g = _mm256_and_ps(g, _mm256_cmp_ps(x, lo, _CMP_GT_OQ));
    _mm256_maskstore_ps(out + i, m, _mm256_mul_ps(g, _mm256_maskload_ps(up + i, m)));
  }
}

}  // namespace

constexpr OpsFns kOps{&f16_to_f32, &f32_to_f16, &softmax, &swiglu, &attend, &softcap, &geglu_table};

}  // namespace tessera::kernels::avx2
