// The block update of attention_tile.h on the AVX-512 path. The SIMD versions work along
// the keys: each block's keys transposed once, a row's scores 8 or 16 keys per register with its query element
// broadcast (one FMA per element, in order), its output the value vectors times each key's weight, and up to two
// (AVX2) or four (AVX-512) rows of one token sharing every load. Every vector lane does useful work whatever the
// number of rows: the tiles before it (a lane per row) left half of each vector idle for a decode step of a model
// with 8 queries per KV head and 15 of 16 for one without grouping.
#include <cmath>

#include "tensor/kernels/attend_rows.h"
#include "tensor/kernels/x86/avx512/common.h"
#include "tensor/kernels/x86/avx512/exp.h"

namespace tessera::kernels::avx512 {
namespace {

inline __mmask16 mask16(int64_t left) {
  if (left <= 0) return 0;
  return left >= 16 ? static_cast<__mmask16>(0xFFFF) : static_cast<__mmask16>((1u << left) - 1);
}

// Keys [j0, j0 + 16) (zeros past n), elements [i0, i0 + 16) of each (past d not written), transposed into kt:
// kt[i * kAttnKeys + j] = k[j][i]. The usual 16 x 16 transpose: pairs of rows interleaved, then pairs of pairs,
// then 128-bit lanes twice.
inline void transpose16(const AttnKeys& kv, int64_t j0, int64_t i0) {
  const __mmask16 mi = mask16(kv.d - i0);
  __m512 r[16];
  for (int j = 0; j < 16; ++j) {
    r[j] = j0 + j < kv.n ? _mm512_maskz_loadu_ps(mi, kv.k + (j0 + j) * kv.d + i0) : _mm512_setzero_ps();
  }
  __m512 t[16], u[16];
  for (int k = 0; k < 8; ++k) {
    t[2 * k] = _mm512_unpacklo_ps(r[2 * k], r[2 * k + 1]);
    t[2 * k + 1] = _mm512_unpackhi_ps(r[2 * k], r[2 * k + 1]);
  }
  for (int a = 0; a < 4; ++a) {
    u[4 * a] = _mm512_shuffle_ps(t[4 * a], t[4 * a + 2], 0x44);
    u[4 * a + 1] = _mm512_shuffle_ps(t[4 * a], t[4 * a + 2], 0xEE);
    u[4 * a + 2] = _mm512_shuffle_ps(t[4 * a + 1], t[4 * a + 3], 0x44);
    u[4 * a + 3] = _mm512_shuffle_ps(t[4 * a + 1], t[4 * a + 3], 0xEE);
  }
  // u[4a + c], 128-bit lane L: rows 4a .. 4a + 3 of column 4L + c.
  const int64_t cols = kv.d - i0 < 16 ? kv.d - i0 : 16;
  float* out = kv.kt + i0 * kAttnKeys + j0;
  for (int c = 0; c < 4; ++c) {
    const __m512 va = _mm512_shuffle_f32x4(u[c], u[4 + c], 0x88), vb = _mm512_shuffle_f32x4(u[c], u[4 + c], 0xDD);
    const __m512 vc = _mm512_shuffle_f32x4(u[8 + c], u[12 + c], 0x88);
    const __m512 vd = _mm512_shuffle_f32x4(u[8 + c], u[12 + c], 0xDD);
    const __m512 col[4] = {_mm512_shuffle_f32x4(va, vc, 0x88), _mm512_shuffle_f32x4(vb, vd, 0x88),
                           _mm512_shuffle_f32x4(va, vc, 0xDD), _mm512_shuffle_f32x4(vb, vd, 0xDD)};
    for (int L = 0; L < 4; ++L) {
      if (4 * L + c < cols) _mm512_store_ps(out + (4 * L + c) * kAttnKeys, col[L]);
    }
  }
}

// Rows [r0, r0 + R) (the same n keys seen) against the transposed keys: s[r][j] for j < 16 * groups, -inf from n.
// Each score is its row's query times its key element by element in order, one FMA per element.
template <int R>
inline void scores_t(const AttnRows& t, const AttnKeys& kv, int64_t r0, int64_t n, float* s) {
  const int64_t groups = (n + 15) / 16;
  __m512 acc[R][4];
  for (int r = 0; r < R; ++r) {
    for (int g = 0; g < 4; ++g) acc[r][g] = _mm512_setzero_ps();
  }
  for (int64_t i = 0; i < kv.d; ++i) {
    const float* k = kv.kt + i * kAttnKeys;
    __m512 kg[4];
    for (int g = 0; g < 4; ++g) kg[g] = g < groups ? _mm512_load_ps(k + 16 * g) : _mm512_setzero_ps();
    for (int r = 0; r < R; ++r) {
      const __m512 q = _mm512_set1_ps(t.q[(r0 + r) * kv.d + i]);
      for (int g = 0; g < 4; ++g) {
        if (g < groups) acc[r][g] = _mm512_fmadd_ps(q, kg[g], acc[r][g]);
      }
    }
  }
  for (int r = 0; r < R; ++r) {
    for (int g = 0; g < groups; ++g) {
      _mm512_store_ps(s + r * kAttnKeys + 16 * g,
                      _mm512_mask_mov_ps(_mm512_set1_ps(kNegInf), mask16(n - 16 * g), acc[r][g]));
    }
  }
}

// Rows [r0, r0 + R) see the same keys (n of them, e their weights: [R][kAttnKeys]): o = o * corr + sum of e v,
// each value vector loaded once for the R rows.
template <int R>
inline void output16(const AttnRows& t, const AttnKeys& kv, int64_t r0, int64_t n, const float* e, const float* corr) {
  for (int64_t i0 = 0; i0 < kv.dv; i0 += 64) {
    __mmask16 mo[4];
    __m512 acc[R][4];
    for (int c = 0; c < 4; ++c) {
      mo[c] = mask16(kv.dv - i0 - 16 * c);
      for (int r = 0; r < R; ++r) {
        acc[r][c] =
            _mm512_mul_ps(_mm512_maskz_loadu_ps(mo[c], t.o + (r0 + r) * kv.dv + i0 + 16 * c), _mm512_set1_ps(corr[r]));
      }
    }
    for (int64_t j = 0; j < n; ++j) {
      const float* v = kv.v + j * kv.dv + i0;
      __m512 vj[4];
      for (int c = 0; c < 4; ++c) vj[c] = _mm512_maskz_loadu_ps(mo[c], v + 16 * c);
      for (int r = 0; r < R; ++r) {
        const __m512 w = _mm512_set1_ps(e[r * kAttnKeys + j]);
        for (int c = 0; c < 4; ++c) acc[r][c] = _mm512_fmadd_ps(w, vj[c], acc[r][c]);
      }
    }
    for (int c = 0; c < 4; ++c) {
      for (int r = 0; r < R; ++r) _mm512_mask_storeu_ps(t.o + (r0 + r) * kv.dv + i0 + 16 * c, mo[c], acc[r][c]);
    }
  }
}

}  // namespace

void attend(const AttnRows& t, const AttnKeys& kv) {
  // The keys transposed once for all the rows; then up to four rows that see the same keys (the heads of one token)
  // at a time, so that each transposed key vector and each value vector is loaded once for all of them.
  const int64_t seen = keys_seen_by_any(t, kv);
  if (seen <= 0) return;
  for (int64_t j0 = 0; j0 < seen; j0 += 16) {
    for (int64_t i0 = 0; i0 < kv.d; i0 += 16) transpose16(kv, j0, i0);
  }
  constexpr int kMaxRows = 4;
  alignas(64) float e[kMaxRows * kAttnKeys];  // each row's scores, then their exponentials
  float corr[kMaxRows];
  for (int64_t r0 = 0; r0 < t.n_rows;) {
    const int64_t n = keys_seen(t, kv, r0);
    int64_t r1 = r0 + 1;
    while (r1 < t.n_rows && r1 - r0 < kMaxRows && t.pos[r1] == t.pos[r0]) ++r1;
    if (n <= 0) {
      r0 = r1;
      continue;
    }
    switch (r1 - r0) {
      case 4:
        scores_t<4>(t, kv, r0, n, e);
        break;
      case 3:
        scores_t<3>(t, kv, r0, n, e);
        break;
      case 2:
        scores_t<2>(t, kv, r0, n, e);
        break;
      default:
        scores_t<1>(t, kv, r0, n, e);
        break;
    }
    for (int64_t r = r0; r < r1; ++r) {
      float* s = e + (r - r0) * kAttnKeys;
      __m512 mx = _mm512_set1_ps(kNegInf);
      for (int64_t j0 = 0; j0 < n; j0 += 16) mx = _mm512_max_ps(mx, _mm512_load_ps(s + j0));
      const float m_old = t.m[r];
      const float m_new = std::fmax(m_old, _mm512_reduce_max_ps(mx));
      // Rows without a key so far (m = -inf) have l = 0 and o = 0: corr 0 keeps them so, where e^(-inf + inf) would
      // not.
      corr[r - r0] = m_old == kNegInf ? 0.0f : _mm512_cvtss_f32(exp512(_mm512_set1_ps(m_old - m_new)));
      t.m[r] = m_new;
      __m512 lsum = _mm512_setzero_ps();
      for (int64_t j0 = 0; j0 < n; j0 += 16) {
        const __m512 w =
            _mm512_maskz_mov_ps(mask16(n - j0), exp512(_mm512_sub_ps(_mm512_load_ps(s + j0), _mm512_set1_ps(m_new))));
        _mm512_store_ps(s + j0, w);
        lsum = _mm512_add_ps(lsum, w);
      }
      t.l[r] = t.l[r] * corr[r - r0] + _mm512_reduce_add_ps(lsum);
    }
    switch (r1 - r0) {
      case 4:
        output16<4>(t, kv, r0, n, e, corr);
        break;
      case 3:
        output16<3>(t, kv, r0, n, e, corr);
        break;
      case 2:
        output16<2>(t, kv, r0, n, e, corr);
        break;
      default:
        output16<1>(t, kv, r0, n, e, corr);
        break;
    }
    r0 = r1;
  }
}

}  // namespace tessera::kernels::avx512
