// AVX2 dots of the 256-element formats (Q2_K ... Q6_K, IQ4_XS) with Q8_K activations: vpmaddubsw pairs the levels
// with the activations in 16 bits; vpmaddwd then widens, applying the integer group scales on the way.
#include "tensor/kernels/x86/avx2/common.h"
#include "tensor/quant_blocks.h"

namespace tessera::kernels::avx2 {
namespace {

using quant::BlockIQ4_XS;
using quant::BlockQ2_K;
using quant::BlockQ3_K;
using quant::BlockQ4_K;
using quant::BlockQ5_K;
using quant::BlockQ6_K;
using quant::BlockQ8_K;

// Words w repeated over 8-word runs: for the pshufb that spreads one scale word over a group's products.
inline __m256i word_index(int lo, int hi) {
  const __m128i a = _mm_set1_epi16(static_cast<int16_t>(0x0100 + 0x0202 * lo));
  const __m128i b = _mm_set1_epi16(static_cast<int16_t>(0x0100 + 0x0202 * hi));
  return _mm256_inserti128_si256(_mm256_castsi128_si256(a), b, 1);
}

// sum_g scale_g * (levels . activations over group g) for 32 levels against 32 activations, where the
// products of 16 elements share the scale word chosen by idx from the duplicated scale vector sc.
inline __m256i scaled(__m256i lv, const int8_t* xq, __m256i sc, __m256i idx) {
  return _mm256_madd_epi16(_mm256_maddubs_epi16(lv, load256(xq)), _mm256_shuffle_epi8(sc, idx));
}

inline void k4_scales(const uint8_t* s, uint64_t* sc, uint64_t* mn) {
  const uint32_t a = load_u32(s), b = load_u32(s + 4), c = load_u32(s + 8);
  const uint32_t sc_hi = (c & 0x0f0f0f0fu) | ((a >> 2) & 0x30303030u);
  const uint32_t mn_hi = ((c >> 4) & 0x0f0f0f0fu) | ((b >> 2) & 0x30303030u);
  *sc = (a & 0x3f3f3f3fu) | static_cast<uint64_t>(sc_hi) << 32;
  *mn = (b & 0x3f3f3f3fu) | static_cast<uint64_t>(mn_hi) << 32;
}

inline __m256i k4_min_sums(uint64_t mn, const BlockQ8_K& x) {
  const __m128i m8 = _mm_cvtsi64_si128(static_cast<int64_t>(mn));
  return _mm256_madd_epi16(_mm256_cvtepu8_epi16(_mm_unpacklo_epi8(m8, m8)), load256(x.bsums));
}

// Bit `bit` of each byte of v, moved to bit `to`.
inline __m256i bit_plane(__m256i v, int bit, int to) {
  return _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(v, bit), _mm256_set1_epi8(1)), to);
}

template <bool kFive, class B>
float dot_q45_k(const B* w, const BlockQ8_K* x, int64_t nb) {
  const __m256i m4 = _mm256_set1_epi8(0x0f);
  __m256 acc = _mm256_setzero_ps();
  __m256 acc_min = _mm256_setzero_ps();
  for (int64_t i = 0; i < nb; ++i) {
    prefetch_ahead<sizeof *w>(w + i);
    uint64_t sc, mn;
    k4_scales(w[i].scales, &sc, &mn);
    const __m256i sc16 = _mm256_broadcastsi128_si256(_mm_cvtepu8_epi16(_mm_cvtsi64_si128(static_cast<int64_t>(sc))));
    __m256i s = _mm256_setzero_si256();
    for (int c = 0; c < 4; ++c) {
      const __m256i q = load256(w[i].qs + 32 * c);
      __m256i lo = _mm256_and_si256(q, m4);
      __m256i hi = _mm256_and_si256(_mm256_srli_epi16(q, 4), m4);
      if constexpr (kFive) {
        const __m256i qh = load256(w[i].qh);
        lo = _mm256_or_si256(lo, bit_plane(qh, 2 * c, 4));
        hi = _mm256_or_si256(hi, bit_plane(qh, 2 * c + 1, 4));
      }
      s = _mm256_add_epi32(s, scaled(lo, x[i].qs + 64 * c, sc16, word_index(2 * c, 2 * c)));
      s = _mm256_add_epi32(s, scaled(hi, x[i].qs + 64 * c + 32, sc16, word_index(2 * c + 1, 2 * c + 1)));
    }
    acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s), _mm256_set1_ps(x[i].d * half_at(&w[i].d)), acc);
    acc_min = _mm256_fmadd_ps(_mm256_cvtepi32_ps(k4_min_sums(mn, x[i])), _mm256_set1_ps(x[i].d * half_at(&w[i].dmin)),
                              acc_min);
  }
  return hsum(acc) - hsum(acc_min);
}

float dot_q4_k(const void* w, const void* x, int64_t n) {
  return dot_q45_k<false>(static_cast<const BlockQ4_K*>(w), static_cast<const BlockQ8_K*>(x), n / 256);
}
float dot_q5_k(const void* w, const void* x, int64_t n) {
  return dot_q45_k<true>(static_cast<const BlockQ5_K*>(w), static_cast<const BlockQ8_K*>(x), n / 256);
}

// 16 groups of 16: lv[s] holds elements 32s..32s+31 (groups 2s, 2s+1); sc16 the 16 scales as words.
inline __m256i k16_sum(const __m256i (&lv)[8], __m256i sc16, const int8_t* xq) {
  __m256i s = _mm256_setzero_si256();
  for (int h = 0; h < 2; ++h) {
    // Both 128-bit lanes get the 8 scales of this half; the pshufb then picks group 2s (lane 0), 2s+1 (lane 1).
    const __m256i sc =
        h == 0 ? _mm256_permute2x128_si256(sc16, sc16, 0x00) : _mm256_permute2x128_si256(sc16, sc16, 0x11);
    for (int j = 0; j < 4; ++j)
      s = _mm256_add_epi32(s, scaled(lv[4 * h + j], xq + 128 * h + 32 * j, sc, word_index(2 * j, 2 * j + 1)));
  }
  return s;
}

// Q3_K/Q6_K store level + offset: take offset * sum_g(scale_g * bsum_g) back.
inline __m256i minus_offset(__m256i s, __m256i sc16, const BlockQ8_K& x, int shift) {
  return _mm256_sub_epi32(s, _mm256_slli_epi32(_mm256_madd_epi16(sc16, load256(x.bsums)), shift));
}

float dot_q6_k(const void* vw, const void* vx, int64_t n) {
  const auto* w = static_cast<const BlockQ6_K*>(vw);
  const auto* x = static_cast<const BlockQ8_K*>(vx);
  const __m256i m4 = _mm256_set1_epi8(0x0f);
  const __m256i m45 = _mm256_set1_epi8(0x30);
  __m256 acc = _mm256_setzero_ps();
  for (int64_t i = 0; i < n / 256; ++i) {
    prefetch_ahead<sizeof *w>(w + i);
    __m256i lv[8];
    for (int h = 0; h < 2; ++h) {
      const __m256i a = load256(w[i].ql + 64 * h);
      const __m256i c = load256(w[i].ql + 64 * h + 32);
      const __m256i q = load256(w[i].qh + 32 * h);
      lv[4 * h] = _mm256_or_si256(_mm256_and_si256(a, m4), _mm256_and_si256(_mm256_slli_epi16(q, 4), m45));
      lv[4 * h + 1] = _mm256_or_si256(_mm256_and_si256(c, m4), _mm256_and_si256(_mm256_slli_epi16(q, 2), m45));
      lv[4 * h + 2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(a, 4), m4), _mm256_and_si256(q, m45));
      lv[4 * h + 3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(c, 4), m4),
                                      _mm256_and_si256(_mm256_srli_epi16(q, 2), m45));
    }
    const __m256i sc16 = _mm256_cvtepi8_epi16(load128(w[i].scales));
    const __m256i s = minus_offset(k16_sum(lv, sc16, x[i].qs), sc16, x[i], 5);
    acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s), _mm256_set1_ps(x[i].d * half_at(&w[i].d)), acc);
  }
  return hsum(acc);
}

float dot_q3_k(const void* vw, const void* vx, int64_t n) {
  const auto* w = static_cast<const BlockQ3_K*>(vw);
  const auto* x = static_cast<const BlockQ8_K*>(vx);
  const __m256i m2 = _mm256_set1_epi8(3);
  __m256 acc = _mm256_setzero_ps();
  for (int64_t i = 0; i < n / 256; ++i) {
    prefetch_ahead<sizeof *w>(w + i);
    const __m256i hm = load256(w[i].hmask);
    __m256i lv[8];
    for (int h = 0; h < 2; ++h) {
      const __m256i q = load256(w[i].qs + 32 * h);
      for (int s = 0; s < 4; ++s) {
        lv[4 * h + s] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(q, 2 * s), m2), bit_plane(hm, 4 * h + s, 2));
      }
    }
    const uint32_t a = load_u32(w[i].scales), b = load_u32(w[i].scales + 4), c = load_u32(w[i].scales + 8);
    const __m128i raw = _mm_setr_epi32(static_cast<int>((a & 0x0f0f0f0fu) | ((c << 4) & 0x30303030u)),
                                       static_cast<int>((b & 0x0f0f0f0fu) | ((c << 2) & 0x30303030u)),
                                       static_cast<int>(((a >> 4) & 0x0f0f0f0fu) | (c & 0x30303030u)),
                                       static_cast<int>(((b >> 4) & 0x0f0f0f0fu) | ((c >> 2) & 0x30303030u)));
    const __m256i sc16 = _mm256_cvtepi8_epi16(_mm_sub_epi8(raw, _mm_set1_epi8(32)));
    const __m256i s = minus_offset(k16_sum(lv, sc16, x[i].qs), sc16, x[i], 2);
    acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s), _mm256_set1_ps(x[i].d * half_at(&w[i].d)), acc);
  }
  return hsum(acc);
}

float dot_q2_k(const void* vw, const void* vx, int64_t n) {
  const auto* w = static_cast<const BlockQ2_K*>(vw);
  const auto* x = static_cast<const BlockQ8_K*>(vx);
  const __m256i m2 = _mm256_set1_epi8(3);
  __m256 acc = _mm256_setzero_ps();
  __m256 acc_min = _mm256_setzero_ps();
  for (int64_t i = 0; i < n / 256; ++i) {
    prefetch_ahead<sizeof *w>(w + i);
    __m256i lv[8];
    for (int h = 0; h < 2; ++h) {
      const __m256i q = load256(w[i].qs + 32 * h);
      for (int s = 0; s < 4; ++s) lv[4 * h + s] = _mm256_and_si256(_mm256_srli_epi16(q, 2 * s), m2);
    }
    const __m128i s8 = load128(w[i].scales);
    const __m256i sc16 = _mm256_cvtepu8_epi16(_mm_and_si128(s8, _mm_set1_epi8(0x0f)));
    const __m256i mn16 = _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(s8, 4), _mm_set1_epi8(0x0f)));
    acc =
        _mm256_fmadd_ps(_mm256_cvtepi32_ps(k16_sum(lv, sc16, x[i].qs)), _mm256_set1_ps(x[i].d * half_at(&w[i].d)), acc);
    acc_min = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_madd_epi16(mn16, load256(x[i].bsums))),
                              _mm256_set1_ps(x[i].d * half_at(&w[i].dmin)), acc_min);
  }
  return hsum(acc) - hsum(acc_min);
}

float dot_iq4_xs(const void* vw, const void* vx, int64_t n) {
  const auto* w = static_cast<const BlockIQ4_XS*>(vw);
  const auto* x = static_cast<const BlockQ8_K*>(vx);
  const __m256i table = iq4nl_table();
  __m256 acc = _mm256_setzero_ps();
  for (int64_t i = 0; i < n / 256; ++i) {
    prefetch_ahead<sizeof *w>(w + i);
    __m256i s = _mm256_setzero_si256();
    for (int ib = 0; ib < 8; ++ib) {
      const int low = (w[i].scales_l[ib / 2] >> (4 * (ib % 2))) & 0xf;
      const int high = (w[i].scales_h >> (2 * ib)) & 3;
      const __m256i lv = _mm256_shuffle_epi8(table, nibbles32(w[i].qs + 16 * ib));
      const __m256i xq = load256(x[i].qs + 32 * ib);
      const __m256i p = _mm256_maddubs_epi16(_mm256_sign_epi8(lv, lv), _mm256_sign_epi8(xq, lv));
      s = _mm256_add_epi32(s, _mm256_madd_epi16(p, _mm256_set1_epi16(static_cast<int16_t>((low | (high << 4)) - 32))));
    }
    acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s), _mm256_set1_ps(x[i].d * half_at(&w[i].d)), acc);
  }
  return hsum(acc);
}

}  // namespace

VecDotFn kquant_vec_dot(GgmlType weight) {
  switch (weight) {
    case GgmlType::Q2_K:
      return &dot_q2_k;
    case GgmlType::Q3_K:
      return &dot_q3_k;
    case GgmlType::Q4_K:
      return &dot_q4_k;
    case GgmlType::Q5_K:
      return &dot_q5_k;
    case GgmlType::Q6_K:
      return &dot_q6_k;
    case GgmlType::IQ4_XS:
      return &dot_iq4_xs;
    default:
      return nullptr;
  }
}

}  // namespace tessera::kernels::avx2
