// AVX2 activation quantizers (byte-identical to quant.h's).
#include <cstring>

#include "tensor/kernels/x86/avx2/common.h"
#include "tensor/quant_blocks.h"

namespace tessera::kernels::avx2 {
namespace {

using quant::BlockQ8_0;
using quant::BlockQ8_1;
using quant::BlockQ8_K;

constexpr int kRne = _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC;

// Rounds to nearest even explicitly (the reference: nearbyint in the default mode, or the 1.5 * 2^23 trick), then
// wraps to int8 like the reference's static_cast. That only matters when a block's amax is so small that
// 127 / amax overflows to inf: the conversion then yields INT_MIN, whose low byte is 0.
inline __m256i round_i32(__m256 v) { return _mm256_cvttps_epi32(_mm256_round_ps(v, kRne)); }
inline __m256i wrap_i8(__m256i q) { return _mm256_srai_epi32(_mm256_slli_epi32(q, 24), 24); }

// Four vectors of 8 int32 in [-128, 127] -> 32 bytes in order.
inline __m256i pack_i8(__m256i a, __m256i b, __m256i c, __m256i d) {
  const __m256i ab = _mm256_packs_epi32(a, b);
  const __m256i cd = _mm256_packs_epi32(c, d);
  return _mm256_permutevar8x32_epi32(_mm256_packs_epi16(ab, cd), _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
}

// Shared by Q8_0 and Q8_1: id = 127/amax and round half to even. Returns amax / 127; *sum = sum of levels.
inline float quantize_block32(const float* x, int8_t* qs, int* sum) {
  __m256 v[4];
  __m256 amax_v = _mm256_setzero_ps();
  for (int j = 0; j < 4; ++j) {
    v[j] = _mm256_loadu_ps(x + 8 * j);
    amax_v = _mm256_max_ps(amax_v, abs_ps(v[j]));
  }
  const float amax = hmax(amax_v);
  const __m256 id = _mm256_set1_ps(amax != 0.0f ? 127.0f / amax : 0.0f);
  __m256i q[4];
  for (int j = 0; j < 4; ++j) q[j] = wrap_i8(round_i32(_mm256_mul_ps(v[j], id)));
  store256(qs, pack_i8(q[0], q[1], q[2], q[3]));
  *sum = hsum_i32(_mm256_add_epi32(_mm256_add_epi32(q[0], q[1]), _mm256_add_epi32(q[2], q[3])));
  return amax / 127.0f;
}

void quantize_q8_0(const float* x, void* vy, int64_t n) {
  auto* y = static_cast<BlockQ8_0*>(vy);
  for (int64_t i = 0; i < n / 32; ++i, x += 32) {
    int sum;
    y[i].d = to_half(quantize_block32(x, y[i].qs, &sum));
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

// Q8_K: the scale comes from the signed value of largest magnitude, the first one on ties; iscale = -127/max,
// levels capped at 127, f32 d = 1/iscale and the 16 group sums.
void quantize_q8_k(const float* x, void* vy, int64_t n) {
  auto* y = static_cast<BlockQ8_K*>(vy);
  for (int64_t i = 0; i < n / 256; ++i, x += 256) {
    __m256 amax_v = _mm256_setzero_ps();
    for (int j = 0; j < 32; ++j) amax_v = _mm256_max_ps(amax_v, abs_ps(_mm256_loadu_ps(x + 8 * j)));
    const float amax = hmax(amax_v);
    if (amax == 0.0f) {
      std::memset(&y[i], 0, sizeof y[i]);
      continue;
    }
    int first = 0;
    for (int j = 0; j < 32; ++j) {
      const int hit =
          _mm256_movemask_ps(_mm256_cmp_ps(abs_ps(_mm256_loadu_ps(x + 8 * j)), _mm256_set1_ps(amax), _CMP_EQ_OQ));
      if (hit != 0) {
        first = 8 * j + __builtin_ctz(static_cast<unsigned>(hit));
        break;
      }
    }
    const float iscale = -127.0f / x[first];
    const __m256 s = _mm256_set1_ps(iscale);
    for (int j = 0; j < 8; ++j) {
      __m256i q[4];
      for (int c = 0; c < 4; ++c) {
        q[c] = wrap_i8(
            _mm256_min_epi32(round_i32(_mm256_mul_ps(_mm256_loadu_ps(x + 32 * j + 8 * c), s)), _mm256_set1_epi32(127)));
      }
      store256(y[i].qs + 32 * j, pack_i8(q[0], q[1], q[2], q[3]));
      y[i].bsums[2 * j] = static_cast<int16_t>(hsum_i32(_mm256_add_epi32(q[0], q[1])));
      y[i].bsums[2 * j + 1] = static_cast<int16_t>(hsum_i32(_mm256_add_epi32(q[2], q[3])));
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

}  // namespace tessera::kernels::avx2
