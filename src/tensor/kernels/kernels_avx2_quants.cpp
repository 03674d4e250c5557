// AVX2 path, part 2: dots of the quantized formats with their Q8 activations. vpmaddubsw pairs unsigned weight
// levels (or |level| with the sign moved onto the activation, for the wide signed formats) with the activations
// in 16 bits; vpmaddwd then widens, applying the integer group scales of the K-quants on the way.
#include "tensor/kernels/avx2_common.h"
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

// ---- 32-element formats ----

struct ActQ8_0 {
  static constexpr int kBytes = 34, kQs = 2;
};
struct ActQ8_1 {
  static constexpr int kBytes = 36, kQs = 4;
};

// kBytes per block; kOffset (unsigned formats): signed level = u8 level - kOffset; kSigned: levels() returns
// signed bytes that use the sign trick (|level| * sign-adjusted activation) because they span more than 7 bits; kMin:
// fp16 m at byte 2, applied as m * s with the Q8_1 activation's s.
struct Q4_0W {
  using Act = ActQ8_0;
  static constexpr int kBytes = 18, kOffset = 8;
  static constexpr bool kSigned = false, kMin = false;
  static __m256i levels(const uint8_t* b) { return nibbles32(b + 2); }
};
struct Q4_1W {
  using Act = ActQ8_1;
  static constexpr int kBytes = 20, kOffset = 0;
  static constexpr bool kSigned = false, kMin = true;
  static __m256i levels(const uint8_t* b) { return nibbles32(b + 4); }
};
struct Q5_0W {
  using Act = ActQ8_0;
  static constexpr int kBytes = 22, kOffset = 16;
  static constexpr bool kSigned = false, kMin = false;
  static __m256i levels(const uint8_t* b) { return q5_levels<2, 6>(b); }
};
struct Q5_1W {
  using Act = ActQ8_1;
  static constexpr int kBytes = 24, kOffset = 0;
  static constexpr bool kSigned = false, kMin = true;
  static __m256i levels(const uint8_t* b) { return q5_levels<4, 8>(b); }
};
struct Q8_0W {
  using Act = ActQ8_0;
  static constexpr int kBytes = 34;
  static constexpr bool kSigned = true, kMin = false;
  static __m256i levels(const uint8_t* b) { return load256(b + 2); }
};
struct IQ4NLW {
  using Act = ActQ8_0;
  static constexpr int kBytes = 18;
  static constexpr bool kSigned = true, kMin = false;
  static __m256i levels(const uint8_t* b) { return _mm256_shuffle_epi8(iq4nl_table(), nibbles32(b + 2)); }
};

// Exact int32 partial sums (8 lanes) of one block's level * activation products.
template <class W>
__m256i block_sums(const uint8_t* w, const uint8_t* x) {
  const __m256i xq = load256(x + W::Act::kQs);
  const __m256i lv = W::levels(w);
  __m256i p;
  if constexpr (W::kSigned) {
    p = _mm256_maddubs_epi16(_mm256_sign_epi8(lv, lv), _mm256_sign_epi8(xq, lv));
  } else {
    p = _mm256_maddubs_epi16(lv, xq);
    if constexpr (W::kOffset != 0) {
      p = _mm256_sub_epi16(p, _mm256_maddubs_epi16(_mm256_set1_epi8(W::kOffset), xq));
    }
  }
  return _mm256_madd_epi16(p, _mm256_set1_epi16(1));
}

// The fp16 values at p + i * S for i < 4, as f32: word inserts straight from memory, then one conversion.
template <int S>
__m128 half4(const uint8_t* p) {
  __m128i h = _mm_cvtsi32_si128(load_u16(p));
  h = _mm_insert_epi16(h, load_u16(p + S), 1);
  h = _mm_insert_epi16(h, load_u16(p + 2 * S), 2);
  h = _mm_insert_epi16(h, load_u16(p + 3 * S), 3);
  return _mm_cvtph_ps(h);
}

// Four blocks per step: their scales are converted together and reach the FMAs as broadcasts from memory.
template <class W>
float dot_legacy(const void* vw, const void* vx, int64_t n) {
  using A = typename W::Act;
  const auto* w = static_cast<const uint8_t*>(vw);
  const auto* x = static_cast<const uint8_t*>(vx);
  const int64_t nb = n / 32;
  __m256 acc[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};
  __m128 acc_min = _mm_setzero_ps();
  alignas(16) float d[4];
  int64_t i = 0;
  for (; i + 4 <= nb; i += 4, w += 4 * W::kBytes, x += 4 * A::kBytes) {
    prefetch_ahead<4 * W::kBytes>(w);
    _mm_store_ps(d, _mm_mul_ps(half4<W::kBytes>(w), half4<A::kBytes>(x)));
    for (int j = 0; j < 4; ++j) {
      const __m256i s = block_sums<W>(w + j * W::kBytes, x + j * A::kBytes);
      acc[j] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s), _mm256_broadcast_ss(&d[j]), acc[j]);
    }
    if constexpr (W::kMin) acc_min = _mm_fmadd_ps(half4<W::kBytes>(w + 2), half4<A::kBytes>(x + 2), acc_min);
  }
  float tail = 0;
  for (; i < nb; ++i, w += W::kBytes, x += A::kBytes) {
    acc[0] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(block_sums<W>(w, x)), _mm256_set1_ps(half_at(w) * half_at(x)), acc[0]);
    if constexpr (W::kMin) tail += half_at(w + 2) * half_at(x + 2);
  }
  const __m128 m = _mm_add_ps(acc_min, _mm_movehl_ps(acc_min, acc_min));
  return hsum(_mm256_add_ps(_mm256_add_ps(acc[0], acc[1]), _mm256_add_ps(acc[2], acc[3]))) + tail +
         _mm_cvtss_f32(_mm_add_ss(m, _mm_movehdup_ps(m)));
}

// ---- 256-element formats (Q8_K activations) ----

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

VecDotFn quant_vec_dot(GgmlType weight) {
  switch (weight) {
    case GgmlType::Q4_0:
      return &dot_legacy<Q4_0W>;
    case GgmlType::Q4_1:
      return &dot_legacy<Q4_1W>;
    case GgmlType::Q5_0:
      return &dot_legacy<Q5_0W>;
    case GgmlType::Q5_1:
      return &dot_legacy<Q5_1W>;
    case GgmlType::Q8_0:
      return &dot_legacy<Q8_0W>;
    case GgmlType::IQ4_NL:
      return &dot_legacy<IQ4NLW>;
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
