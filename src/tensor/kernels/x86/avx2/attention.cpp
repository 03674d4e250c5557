// The block update of attention_tile.h on the AVX2 path. The SIMD versions work along
// the keys: each block's keys transposed once, a row's scores 8 or 16 keys per register with its query element
// broadcast (one FMA per element, in order), its output the value vectors times each key's weight, and up to two
// (AVX2) or four (AVX-512) rows of one token sharing every load. Every vector lane does useful work whatever the
// number of rows: the tiles before it (a lane per row) left half of each vector idle for a decode step of a model
// with 8 queries per KV head and 15 of 16 for one without grouping.
#include <cmath>

#include "tensor/kernels/attend_rows.h"
#include "tensor/kernels/x86/avx2/common.h"
#include "tensor/kernels/x86/avx2/exp.h"

namespace tessera::kernels::avx2 {
namespace {

inline __m256i mask8(int64_t left) {
  const int n = static_cast<int>(left < 0 ? 0 : left > 8 ? 8 : left);
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

// transpose16 for 8-float vectors: keys [j0, j0 + 8), elements [i0, i0 + 8).
inline void transpose8(const AttnKeys& kv, int64_t j0, int64_t i0) {
  const __m256i mi = mask8(kv.d - i0);
  __m256 r[8];
  for (int j = 0; j < 8; ++j) {
    r[j] = j0 + j < kv.n ? _mm256_maskload_ps(kv.k + (j0 + j) * kv.d + i0, mi) : _mm256_setzero_ps();
  }
  __m256 t[8], u[8];
  for (int k = 0; k < 4; ++k) {
    t[2 * k] = _mm256_unpacklo_ps(r[2 * k], r[2 * k + 1]);
    t[2 * k + 1] = _mm256_unpackhi_ps(r[2 * k], r[2 * k + 1]);
  }
  for (int a = 0; a < 2; ++a) {
    u[4 * a] = _mm256_shuffle_ps(t[4 * a], t[4 * a + 2], 0x44);
    u[4 * a + 1] = _mm256_shuffle_ps(t[4 * a], t[4 * a + 2], 0xEE);
    u[4 * a + 2] = _mm256_shuffle_ps(t[4 * a + 1], t[4 * a + 3], 0x44);
    u[4 * a + 3] = _mm256_shuffle_ps(t[4 * a + 1], t[4 * a + 3], 0xEE);
  }
  // u[4a + c], 128-bit lane L: rows 4a .. 4a + 3 of column 4L + c.
  const int64_t cols = kv.d - i0 < 8 ? kv.d - i0 : 8;
  float* out = kv.kt + i0 * kAttnKeys + j0;
  for (int c = 0; c < 4; ++c) {
    if (c < cols) _mm256_store_ps(out + c * kAttnKeys, _mm256_permute2f128_ps(u[c], u[4 + c], 0x20));
    if (4 + c < cols) _mm256_store_ps(out + (4 + c) * kAttnKeys, _mm256_permute2f128_ps(u[c], u[4 + c], 0x31));
  }
}

// scores_t for 8-float vectors, 32 keys at a time.
template <int R>
inline void scores_t8(const AttnRows& t, const AttnKeys& kv, int64_t r0, int64_t n, float* s) {
  const int64_t groups = (n + 7) / 8;
  for (int64_t g0 = 0; g0 < groups; g0 += 4) {
    __m256 acc[R][4];
    for (int r = 0; r < R; ++r) {
      for (int g = 0; g < 4; ++g) acc[r][g] = _mm256_setzero_ps();
    }
    for (int64_t i = 0; i < kv.d; ++i) {
      const float* k = kv.kt + i * kAttnKeys + 8 * g0;
      __m256 kg[4];
      for (int g = 0; g < 4; ++g) kg[g] = g0 + g < groups ? _mm256_load_ps(k + 8 * g) : _mm256_setzero_ps();
      for (int r = 0; r < R; ++r) {
        const __m256 q = _mm256_broadcast_ss(t.q + (r0 + r) * kv.d + i);
        for (int g = 0; g < 4; ++g) {
          if (g0 + g < groups) acc[r][g] = _mm256_fmadd_ps(q, kg[g], acc[r][g]);
        }
      }
    }
    for (int r = 0; r < R; ++r) {
      for (int g = 0; g < 4 && g0 + g < groups; ++g) {
        const int64_t j = 8 * (g0 + g);
        _mm256_store_ps(s + r * kAttnKeys + j,
                        _mm256_blendv_ps(_mm256_set1_ps(kNegInf), acc[r][g], _mm256_castsi256_ps(mask8(n - j))));
      }
    }
  }
}

// output16 for 8-float vectors.
template <int R>
inline void output8(const AttnRows& t, const AttnKeys& kv, int64_t r0, int64_t n, const float* e, const float* corr) {
  for (int64_t i0 = 0; i0 < kv.dv; i0 += 32) {
    __m256i mo[4];
    __m256 acc[R][4];
    for (int c = 0; c < 4; ++c) {
      mo[c] = mask8(kv.dv - i0 - 8 * c);
      for (int r = 0; r < R; ++r) {
        acc[r][c] =
            _mm256_mul_ps(_mm256_maskload_ps(t.o + (r0 + r) * kv.dv + i0 + 8 * c, mo[c]), _mm256_set1_ps(corr[r]));
      }
    }
    for (int64_t j = 0; j < n; ++j) {
      const float* v = kv.v + j * kv.dv + i0;
      __m256 vj[4];
      for (int c = 0; c < 4; ++c) vj[c] = _mm256_maskload_ps(v + 8 * c, mo[c]);
      for (int r = 0; r < R; ++r) {
        const __m256 w = _mm256_broadcast_ss(e + r * kAttnKeys + j);
        for (int c = 0; c < 4; ++c) acc[r][c] = _mm256_fmadd_ps(w, vj[c], acc[r][c]);
      }
    }
    for (int c = 0; c < 4; ++c) {
      for (int r = 0; r < R; ++r) _mm256_maskstore_ps(t.o + (r0 + r) * kv.dv + i0 + 8 * c, mo[c], acc[r][c]);
    }
  }
}

inline float max_lanes8(__m256 x) {
  alignas(32) float a[8];
  _mm256_store_ps(a, x);
  float m = a[0];  // std::max_element's result, in a loop this file inlines
  for (int i = 1; i < 8; ++i) m = m < a[i] ? a[i] : m;
  return m;
}

inline float sum_lanes8(__m256 x) {
  alignas(32) float a[8];
  _mm256_store_ps(a, x);
  float s = 0.0f;
  for (float v : a) s += v;
  return s;
}

}  // namespace

void attend(const AttnRows& t, const AttnKeys& kv) {
  // attend_avx512's order, two rows at a time (sixteen 8-float registers).
  const int64_t seen = keys_seen_by_any(t, kv);
  if (seen <= 0) return;
  for (int64_t j0 = 0; j0 < seen; j0 += 8) {
    for (int64_t i0 = 0; i0 < kv.d; i0 += 8) transpose8(kv, j0, i0);
  }
  constexpr int kMaxRows = 2;
  alignas(32) float e[kMaxRows * kAttnKeys];
  float corr[kMaxRows];
  for (int64_t r0 = 0; r0 < t.n_rows;) {
    const int64_t n = keys_seen(t, kv, r0);
    const int64_t r1 = r0 + 1 < t.n_rows && t.pos[r0 + 1] == t.pos[r0] ? r0 + 2 : r0 + 1;
    if (n <= 0) {
      r0 = r1;
      continue;
    }
    if (r1 - r0 == 2) {
      scores_t8<2>(t, kv, r0, n, e);
    } else {
      scores_t8<1>(t, kv, r0, n, e);
    }
    for (int64_t r = r0; r < r1; ++r) {
      float* s = e + (r - r0) * kAttnKeys;
      __m256 mx = _mm256_set1_ps(kNegInf);
      for (int64_t j0 = 0; j0 < n; j0 += 8) mx = _mm256_max_ps(mx, _mm256_load_ps(s + j0));
      const float m_old = t.m[r];
      const float m_new = std::fmax(m_old, max_lanes8(mx));
      // Rows without a key so far (m = -inf) have l = 0 and o = 0: corr 0 keeps them so, where e^(-inf + inf) would
      // not.
      corr[r - r0] = m_old == kNegInf ? 0.0f : _mm256_cvtss_f32(exp256(_mm256_set1_ps(m_old - m_new)));
      t.m[r] = m_new;
      __m256 lsum = _mm256_setzero_ps();
      for (int64_t j0 = 0; j0 < n; j0 += 8) {
        const __m256 w = _mm256_and_ps(_mm256_castsi256_ps(mask8(n - j0)),
                                       exp256(_mm256_sub_ps(_mm256_load_ps(s + j0), _mm256_set1_ps(m_new))));
        _mm256_store_ps(s + j0, w);
        lsum = _mm256_add_ps(lsum, w);
      }
      t.l[r] = t.l[r] * corr[r - r0] + sum_lanes8(lsum);
    }
    if (r1 - r0 == 2) {
      output8<2>(t, kv, r0, n, e, corr);
    } else {
      output8<1>(t, kv, r0, n, e, corr);
    }
    r0 = r1;
  }
}

}  // namespace tessera::kernels::avx2
