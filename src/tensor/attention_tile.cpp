// The attention tile update (attention_tile.h): a scalar reference, and AVX2 / AVX-512 versions where a vector
// register holds one value of 8 or 16 rows, so the scores, the running max and the output update are all
// lane-wise and the keys and values are broadcast.
#include "tensor/attention_tile.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "tensor/simd_math.h"

namespace tessera {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// Scores of K keys from key p on, one register per key, written to s (masked to -inf where a row does not see
// the key); returns mx raised by them.
template <int K>
TESSERA_AVX512 inline __m512 scores512(const AttnTile& t, const AttnKeys& kv, int64_t p, __m512i pos, float* s,
                                       __m512 mx) {
  __m512 acc[K];
  for (int j = 0; j < K; ++j) acc[j] = _mm512_setzero_ps();
  const float* k = kv.k + p * kv.d;
  for (int64_t i = 0; i < kv.d; ++i) {
    const __m512 q = _mm512_load_ps(t.qt + i * kAttnLanes);
    for (int j = 0; j < K; ++j) acc[j] = _mm512_fmadd_ps(q, _mm512_set1_ps(k[j * kv.d + i]), acc[j]);
  }
  for (int j = 0; j < K; ++j) {
    const __mmask16 sees = _mm512_cmpge_epi32_mask(pos, _mm512_set1_epi32(static_cast<int>(kv.p0 + p + j)));
    const __m512 sj = _mm512_mask_mov_ps(_mm512_set1_ps(kNegInf), sees, acc[j]);
    _mm512_store_ps(s + (p + j) * kAttnLanes, sj);
    mx = _mm512_max_ps(mx, sj);
  }
  return mx;
}

// ot[i0 .. i0 + K) = ot * corr + sum over keys of e * v.
template <int K>
TESSERA_AVX512 inline void output512(const AttnTile& t, const AttnKeys& kv, int64_t n, int64_t i0, const float* e,
                                     __m512 corr) {
  __m512 acc[K];
  for (int j = 0; j < K; ++j) acc[j] = _mm512_mul_ps(_mm512_load_ps(t.ot + (i0 + j) * kAttnLanes), corr);
  for (int64_t p = 0; p < n; ++p) {
    const __m512 ep = _mm512_load_ps(e + p * kAttnLanes);
    const float* v = kv.v + p * kv.dv + i0;
    for (int j = 0; j < K; ++j) acc[j] = _mm512_fmadd_ps(ep, _mm512_set1_ps(v[j]), acc[j]);
  }
  for (int j = 0; j < K; ++j) _mm512_store_ps(t.ot + (i0 + j) * kAttnLanes, acc[j]);
}

// scores512 for one half (8 lanes from lane0) of a tile: K keys at once, so the K accumulations overlap (one key at
// a time waited out the FMA latency on every step).
template <int K>
TESSERA_AVX2 inline __m256 scores256(const AttnTile& t, const AttnKeys& kv, int64_t p, int lane0, __m256i pos, float* s,
                                     __m256 mx) {
  __m256 acc[K];
  for (int j = 0; j < K; ++j) acc[j] = _mm256_setzero_ps();
  const float* k = kv.k + p * kv.d;
  for (int64_t i = 0; i < kv.d; ++i) {
    const __m256 q = _mm256_load_ps(t.qt + i * kAttnLanes + lane0);
    for (int j = 0; j < K; ++j) acc[j] = _mm256_fmadd_ps(q, _mm256_set1_ps(k[j * kv.d + i]), acc[j]);
  }
  for (int j = 0; j < K; ++j) {
    const __m256 sees =
        _mm256_castsi256_ps(_mm256_cmpgt_epi32(pos, _mm256_set1_epi32(static_cast<int>(kv.p0 + p + j - 1))));
    const __m256 sj = _mm256_blendv_ps(_mm256_set1_ps(kNegInf), acc[j], sees);
    _mm256_store_ps(s + (p + j) * kAttnLanes + lane0, sj);
    mx = _mm256_max_ps(mx, sj);
  }
  return mx;
}

template <int K>
TESSERA_AVX2 inline void output256(const AttnTile& t, const AttnKeys& kv, int64_t n, int64_t i0, int lane0,
                                   const float* e, __m256 corr) {
  __m256 acc[K];
  for (int j = 0; j < K; ++j) acc[j] = _mm256_mul_ps(_mm256_load_ps(t.ot + (i0 + j) * kAttnLanes + lane0), corr);
  for (int64_t p = 0; p < n; ++p) {
    const __m256 ep = _mm256_load_ps(e + p * kAttnLanes + lane0);
    const float* v = kv.v + p * kv.dv + i0;
    for (int j = 0; j < K; ++j) acc[j] = _mm256_fmadd_ps(ep, _mm256_set1_ps(v[j]), acc[j]);
  }
  for (int j = 0; j < K; ++j) _mm256_store_ps(t.ot + (i0 + j) * kAttnLanes + lane0, acc[j]);
}

// Keys that no row of the tile sees add exact zeros; the loops stop before them.
int64_t keys_seen(const AttnTile& t, const AttnKeys& kv) {
  const int32_t last = *std::max_element(t.pos, t.pos + kAttnLanes);
  return std::min<int64_t>(kv.n, int64_t{last} - kv.p0 + 1);
}

// One half (8 lanes from lane0) of a tile, for AVX2's 8-float registers.
TESSERA_AVX2 void attend_half_avx2(const AttnTile& t, const AttnKeys& kv, int lane0, int64_t n, float* s) {
  const __m256i pos = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(t.pos + lane0));
  const __m256 neg_inf = _mm256_set1_ps(kNegInf);
  __m256 mx = neg_inf;
  int64_t p = 0;
  for (; p + 8 <= n; p += 8) mx = scores256<8>(t, kv, p, lane0, pos, s, mx);
  for (; p < n; ++p) mx = scores256<1>(t, kv, p, lane0, pos, s, mx);
  const __m256 m_old = _mm256_load_ps(t.m + lane0);
  const __m256 m_new = _mm256_max_ps(m_old, mx);
  // Rows without a key so far (m = -inf) have l = 0 and ot = 0: corr 0 keeps them so, where e^(-inf + inf) would not.
  const __m256 had = _mm256_cmp_ps(m_old, neg_inf, _CMP_NEQ_OQ);
  const __m256 corr = _mm256_and_ps(had, simd::exp256(_mm256_sub_ps(m_old, m_new)));
  _mm256_store_ps(t.m + lane0, m_new);
  __m256 l = _mm256_mul_ps(_mm256_load_ps(t.l + lane0), corr);
  for (p = 0; p < n; ++p) {
    const __m256 sp = _mm256_load_ps(s + p * kAttnLanes + lane0);
    const __m256 sees = _mm256_cmp_ps(sp, neg_inf, _CMP_NEQ_OQ);
    const __m256 e = _mm256_and_ps(sees, simd::exp256(_mm256_sub_ps(sp, m_new)));
    _mm256_store_ps(s + p * kAttnLanes + lane0, e);
    l = _mm256_add_ps(l, e);
  }
  _mm256_store_ps(t.l + lane0, l);
  int64_t i0 = 0;
  for (; i0 + 8 <= kv.dv; i0 += 8) output256<8>(t, kv, n, i0, lane0, s, corr);
  for (; i0 < kv.dv; ++i0) output256<1>(t, kv, n, i0, lane0, s, corr);
}

}  // namespace

void attend_scalar(const AttnTile& t, const AttnKeys& kv) {
  float s[kAttnKeys];
  for (int lane = 0; lane < kAttnLanes; ++lane) {
    const int64_t n = std::min<int64_t>(kv.n, int64_t{t.pos[lane]} - kv.p0 + 1);
    if (n <= 0) continue;
    float mx = kNegInf;
    for (int64_t p = 0; p < n; ++p) {
      float acc = 0.0f;
      for (int64_t i = 0; i < kv.d; ++i) acc += t.qt[i * kAttnLanes + lane] * kv.k[p * kv.d + i];
      s[p] = acc;
      mx = std::fmax(mx, acc);
    }
    const float m_new = std::fmax(t.m[lane], mx);
    const float corr = t.m[lane] == kNegInf ? 0.0f : std::exp(t.m[lane] - m_new);
    t.m[lane] = m_new;
    float l = t.l[lane] * corr;
    for (int64_t i = 0; i < kv.dv; ++i) t.ot[i * kAttnLanes + lane] *= corr;
    for (int64_t p = 0; p < n; ++p) {
      const float e = std::exp(s[p] - m_new);
      l += e;
      for (int64_t i = 0; i < kv.dv; ++i) t.ot[i * kAttnLanes + lane] += e * kv.v[p * kv.dv + i];
    }
    t.l[lane] = l;
  }
}

TESSERA_AVX2 void attend_avx2(const AttnTile& t, const AttnKeys& kv) {
  const int64_t n = keys_seen(t, kv);
  if (n <= 0) return;
  alignas(64) float s[kAttnKeys * kAttnLanes];
  attend_half_avx2(t, kv, 0, n, s);
  attend_half_avx2(t, kv, 8, n, s);
}

TESSERA_AVX512 void attend_avx512(const AttnTile& t, const AttnKeys& kv) {
  const int64_t n = keys_seen(t, kv);
  if (n <= 0) return;
  alignas(64) float s[kAttnKeys * kAttnLanes];  // scores, then their exponentials: [key][lane]
  const __m512i pos = _mm512_loadu_si512(t.pos);
  __m512 mx = _mm512_set1_ps(kNegInf);
  int64_t p = 0;
  for (; p + 8 <= n; p += 8) mx = scores512<8>(t, kv, p, pos, s, mx);
  for (; p < n; ++p) mx = scores512<1>(t, kv, p, pos, s, mx);

  const __m512 m_old = _mm512_load_ps(t.m);
  const __m512 m_new = _mm512_max_ps(m_old, mx);
  // Rows without a key so far (m = -inf) have l = 0 and ot = 0: corr 0 keeps them so, where e^(-inf + inf) would not.
  const __mmask16 had = _mm512_cmp_ps_mask(m_old, _mm512_set1_ps(kNegInf), _CMP_NEQ_OQ);
  const __m512 corr = _mm512_maskz_mov_ps(had, simd::exp512(_mm512_sub_ps(m_old, m_new)));
  _mm512_store_ps(t.m, m_new);
  __m512 l = _mm512_mul_ps(_mm512_load_ps(t.l), corr);
  for (p = 0; p < n; ++p) {
    const __mmask16 sees = _mm512_cmpge_epi32_mask(pos, _mm512_set1_epi32(static_cast<int>(kv.p0 + p)));
    const __m512 e = _mm512_maskz_mov_ps(sees, simd::exp512(_mm512_sub_ps(_mm512_load_ps(s + p * kAttnLanes), m_new)));
    _mm512_store_ps(s + p * kAttnLanes, e);
    l = _mm512_add_ps(l, e);
  }
  _mm512_store_ps(t.l, l);
  int64_t i0 = 0;
  for (; i0 + 8 <= kv.dv; i0 += 8) output512<8>(t, kv, n, i0, s, corr);
  for (; i0 < kv.dv; ++i0) output512<1>(t, kv, n, i0, s, corr);
}

}  // namespace tessera
