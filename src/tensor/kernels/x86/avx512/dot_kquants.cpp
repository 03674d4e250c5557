// AVX-512 path: dots of the 256-element formats (Q2_K ... Q6_K, IQ4_XS) with Q8_K activations. Levels
// are small and unsigned, so vpmaddubsw pairs them with the activations without saturating and vpdpwssd applies
// the integer group scales: one exact int32 sum per super-block, scaled once in float.
#include "tensor/kernels/x86/avx512/common.h"
#include "tensor/quant_blocks.h"

namespace tessera::kernels::avx512 {
namespace {

using quant::BlockIQ4_XS;
using quant::BlockQ2_K;
using quant::BlockQ3_K;
using quant::BlockQ4_K;
using quant::BlockQ5_K;
using quant::BlockQ6_K;
using quant::BlockQ8_K;

// vpshufb indices picking word a in the low 256 bits and word b in the high 256 bits (from a register holding
// the same 8 words in every 128-bit lane).
inline __m512i word_pick2(int a, int b) {
  const __m256i lo = _mm256_set1_epi16(static_cast<int16_t>(0x0100 + 0x0202 * a));
  const __m256i hi = _mm256_set1_epi16(static_cast<int16_t>(0x0100 + 0x0202 * b));
  return _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);
}

// vpshufb indices picking word first + L in 128-bit lane L: the scales of four 16-element groups, one per lane.
inline __m512i word_pick4(int first) {
  const __m128i w[4] = {_mm_set1_epi16(static_cast<int16_t>(0x0100 + 0x0202 * first)),
                        _mm_set1_epi16(static_cast<int16_t>(0x0100 + 0x0202 * (first + 1))),
                        _mm_set1_epi16(static_cast<int16_t>(0x0100 + 0x0202 * (first + 2))),
                        _mm_set1_epi16(static_cast<int16_t>(0x0100 + 0x0202 * (first + 3)))};
  const __m256i lo = _mm256_inserti128_si256(_mm256_castsi128_si256(w[0]), w[1], 1);
  const __m256i hi = _mm256_inserti128_si256(_mm256_castsi128_si256(w[2]), w[3], 1);
  return _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);
}

inline __m512i bcast256(const void* p) { return _mm512_broadcast_i64x4(load256(p)); }

// Rotate each qword of the low and high 256-bit halves by different counts: used to bring one bit plane of a
// broadcast qh/hmask into place (rotation keeps each wanted bit inside its byte; the rest is masked off).
inline __m512i rotl2(__m512i v, int lo, int hi) {
  return _mm512_rolv_epi64(v, _mm512_set_epi64(hi, hi, hi, hi, lo, lo, lo, lo));
}
inline __m512i shr2(__m512i v, int lo, int hi) {
  return _mm512_srlv_epi64(v, _mm512_set_epi64(hi, hi, hi, hi, lo, lo, lo, lo));
}

// The eight 6-bit scales and mins of a Q4_K/Q5_K block as bytes (see quant_blocks.h, get_scale_min_k4).
inline void k4_scales(const uint8_t* s, uint64_t* sc, uint64_t* mn) {
  const uint32_t a = load_u32(s), b = load_u32(s + 4), c = load_u32(s + 8);
  const uint32_t sc_hi = (c & 0x0f0f0f0fu) | ((a >> 2) & 0x30303030u);
  const uint32_t mn_hi = ((c >> 4) & 0x0f0f0f0fu) | ((b >> 2) & 0x30303030u);
  *sc = (a & 0x3f3f3f3fu) | static_cast<uint64_t>(sc_hi) << 32;
  *mn = (b & 0x3f3f3f3fu) | static_cast<uint64_t>(mn_hi) << 32;
}

// The activation side of one Q8_K block as the Q4_K/Q5_K sums read it: the levels as the register pairs
// [g0|g2], [g1|g3], [g4|g6], [g5|g7] (the order of the weights' nibbles), the eight 32-element group sums (for the
// mins) and d. A gemv builds these once per call and shares them by every row.
struct K4Act {
  __m512i xs[4];
  __m128i gsum;  // int16
  __m128 xd;     // d in every lane
};

inline K4Act k4_act(const BlockQ8_K& x) {
  const int8_t* q = x.qs;
  return {{load2x256(q, q + 64), load2x256(q + 32, q + 96), load2x256(q + 128, q + 192), load2x256(q + 160, q + 224)},
          _mm_hadd_epi16(load128(x.bsums), load128(x.bsums + 8)),
          _mm_set1_ps(x.d)};
}

// Shared tail of Q4_K/Q5_K: levels (u8, < 32) of the four register pairs, against prepared activations. The scale
// words reach their products through vpshufb on the scales repeated in every 128-bit lane. Adds d * x.d * sum to
// acc and dmin * x.d * (sum of min_g * group sum_g) to acc_min.
template <class B>
inline void k4_accumulate(const B& w, const __m512i (&lv)[4], const K4Act& a, __m512& acc, __m128& acc_min) {
  uint64_t sc, mn;
  k4_scales(w.scales, &sc, &mn);
  const __m512i scw = _mm512_broadcast_i32x4(_mm_cvtepu8_epi16(_mm_cvtsi64_si128(static_cast<int64_t>(sc))));
  constexpr int kPairs[4][2] = {{0, 2}, {1, 3}, {4, 6}, {5, 7}};
  __m512i s = _mm512_setzero_si512();
  for (int c = 0; c < 4; ++c) {
    const __m512i sc_words = _mm512_shuffle_epi8(scw, word_pick2(kPairs[c][0], kPairs[c][1]));
    s = _mm512_dpwssd_epi32(s, _mm512_maddubs_epi16(lv[c], a.xs[c]), sc_words);
  }
  // x.d * fp16 d and x.d * fp16 dmin (adjacent), converted together.
  const __m128 dd = _mm_mul_ps(_mm_cvtph_ps(_mm_cvtsi32_si128(static_cast<int>(load_u32(&w.d)))), a.xd);
  acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s), _mm512_broadcastss_ps(dd), acc);
  const __m128i m = _mm_madd_epi16(_mm_cvtepu8_epi16(_mm_cvtsi64_si128(static_cast<int64_t>(mn))), a.gsum);
  acc_min = _mm_fmadd_ps(_mm_cvtepi32_ps(m), _mm_shuffle_ps(dd, dd, 0x55), acc_min);
}

inline void k4_levels(const BlockQ4_K& w, __m512i (&lv)[4]) {
  const __m512i m4 = _mm512_set1_epi8(0x0f);
  const __m512i q0 = load512(w.qs);
  const __m512i q1 = load512(w.qs + 64);
  lv[0] = _mm512_and_si512(q0, m4);
  lv[1] = _mm512_and_si512(_mm512_srli_epi16(q0, 4), m4);
  lv[2] = _mm512_and_si512(q1, m4);
  lv[3] = _mm512_and_si512(_mm512_srli_epi16(q1, 4), m4);
}

// Group g's fifth bit is bit g of qh[e % 32]; rotate it to bit 4.
inline void k4_levels(const BlockQ5_K& w, __m512i (&lv)[4]) {
  const __m512i m4 = _mm512_set1_epi8(0x0f);
  const __m512i b4 = _mm512_set1_epi8(0x10);
  const __m512i q0 = load512(w.qs);
  const __m512i q1 = load512(w.qs + 64);
  const __m512i qh = bcast256(w.qh);
  lv[0] = or_and(_mm512_and_si512(q0, m4), rotl2(qh, 4, 2), b4);
  lv[1] = or_and(_mm512_and_si512(_mm512_srli_epi16(q0, 4), m4), rotl2(qh, 3, 1), b4);
  lv[2] = or_and(_mm512_and_si512(q1, m4), rotl2(qh, 0, 62), b4);
  lv[3] = or_and(_mm512_and_si512(_mm512_srli_epi16(q1, 4), m4), rotl2(qh, 63, 61), b4);
}

template <class B>
float dot_k4(const void* vw, const void* vx, int64_t n) {
  const auto* w = static_cast<const B*>(vw);
  const auto* x = static_cast<const BlockQ8_K*>(vx);
  __m512 acc = _mm512_setzero_ps();
  __m128 acc_min = _mm_setzero_ps();
  for (int64_t i = 0; i < n / 256; ++i) {
    prefetch_stream<sizeof *w>(w + i);
    __m512i lv[4];
    k4_levels(w[i], lv);
    k4_accumulate(w[i], lv, k4_act(x[i]), acc, acc_min);
  }
  return hsum(acc) - hsum(acc_min);
}

// R rows at once against activations prepared by k4_act: R independent chains keep the multiply ports busy, and
// the activation side is paid once per call instead of once per row.
template <class B, int R>
void k4_rows(const uint8_t* w, size_t ws, const K4Act* act, int64_t nb, float* y) {
  __m512 acc[R];
  __m128 acc_min[R];
  for (int r = 0; r < R; ++r) {
    acc[r] = _mm512_setzero_ps();
    acc_min[r] = _mm_setzero_ps();
  }
  for (int64_t b = 0; b < nb; ++b) {
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) {
      const B& blk = reinterpret_cast<const B*>(w + r * ws)[b];
      prefetch_stream<sizeof(B)>(&blk);
      __m512i lv[4];
      k4_levels(blk, lv);
      k4_accumulate(blk, lv, act[b], acc[r], acc_min[r]);
    }
  }
  for (int r = 0; r < R; ++r) y[r] = hsum(acc[r]) - hsum(acc_min[r]);
}

template <class B>
void gemv_k4(const uint8_t* w, size_t ws, int64_t n_rows, const uint8_t* vx, int64_t k, float* y) {
  const auto* x = reinterpret_cast<const BlockQ8_K*>(vx);
  const int64_t nb = k / 256;
  Scratch scratch(sizeof(K4Act) * static_cast<size_t>(nb) + 64);
  auto* act = reinterpret_cast<K4Act*>(scratch.get());
  for (int64_t b = 0; b < nb; ++b) act[b] = k4_act(x[b]);
  int64_t r = 0;
  for (; r + 4 <= n_rows; r += 4) k4_rows<B, 4>(w + r * ws, ws, act, nb, y + r);
  for (; r < n_rows; ++r) k4_rows<B, 1>(w + r * ws, ws, act, nb, y + r);
}

// 16 groups of 16: levels lv[c] cover elements 64c..64c+63 (groups 4c..4c+3, one per 128-bit lane); sc16 holds
// the 16 signed scales as words. Each half of the scales is repeated in every lane for the word-picking vpshufb.
inline __m512i k16_block_sum(const __m512i (&lv)[4], __m256i sc16, const int8_t* xq) {
  const __m512i half[2] = {_mm512_broadcast_i32x4(_mm256_castsi256_si128(sc16)),
                           _mm512_broadcast_i32x4(_mm256_extracti128_si256(sc16, 1))};
  __m512i s = _mm512_setzero_si512();
  for (int c = 0; c < 4; ++c) {
    const __m512i sc_words = _mm512_shuffle_epi8(half[c / 2], word_pick4(4 * (c % 2)));
    s = _mm512_dpwssd_epi32(s, _mm512_maddubs_epi16(lv[c], load512(xq + 64 * c)), sc_words);
  }
  return s;
}

// Q3_K/Q6_K store level + offset: take offset * sum_g(scale_g * bsum_g) back (shift = log2 offset).
inline __m512i minus_offset(__m512i s, __m256i sc16, const BlockQ8_K& x, int shift) {
  const __m256i t = _mm256_slli_epi32(_mm256_madd_epi16(sc16, load256(x.bsums)), shift);
  return _mm512_sub_epi32(s, _mm512_zextsi256_si512(t));
}

float dot_q6_k(const void* vw, const void* vx, int64_t n) {
  const auto* w = static_cast<const BlockQ6_K*>(vw);
  const auto* x = static_cast<const BlockQ8_K*>(vx);
  const __m512i m4 = _mm512_set1_epi8(0x0f);
  const __m512i b45 = _mm512_set1_epi8(0x30);
  __m512 acc = _mm512_setzero_ps();
  for (int64_t i = 0; i < n / 256; ++i) {
    prefetch_stream<sizeof *w>(w + i);
    __m512i lv[4];
    for (int h = 0; h < 2; ++h) {
      // ql[64h + l] holds elements l (low nibble) and l + 64 (high); ql[64h + 32 + l] elements l + 32 and l + 96.
      const __m512i ql = load512(w[i].ql + 64 * h);
      const __m512i qh = bcast256(w[i].qh + 32 * h);
      lv[2 * h] = or_and(_mm512_and_si512(ql, m4), rotl2(qh, 4, 2), b45);
      lv[2 * h + 1] = or_and(_mm512_and_si512(_mm512_srli_epi16(ql, 4), m4), rotl2(qh, 0, 62), b45);
    }
    const __m256i sc16 = _mm256_cvtepi8_epi16(load128(w[i].scales));
    const __m512i s = minus_offset(k16_block_sum(lv, sc16, x[i].qs), sc16, x[i], 5);
    acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s), _mm512_set1_ps(x[i].d * half_at(&w[i].d)), acc);
  }
  return hsum(acc);
}

// The 16 signed 6-bit scales of a Q3_K block as words (see quant_blocks.h, q3k_scale).
inline __m256i q3k_scales(const uint8_t* s) {
  const uint32_t a = load_u32(s), b = load_u32(s + 4), c = load_u32(s + 8);
  const uint32_t s0 = (a & 0x0f0f0f0fu) | ((c << 4) & 0x30303030u);
  const uint32_t s1 = (b & 0x0f0f0f0fu) | ((c << 2) & 0x30303030u);
  const uint32_t s2 = ((a >> 4) & 0x0f0f0f0fu) | (c & 0x30303030u);
  const uint32_t s3 = ((b >> 4) & 0x0f0f0f0fu) | ((c >> 2) & 0x30303030u);
  const __m128i v =
      _mm_setr_epi32(static_cast<int>(s0), static_cast<int>(s1), static_cast<int>(s2), static_cast<int>(s3));
  return _mm256_cvtepi8_epi16(_mm_sub_epi8(v, _mm_set1_epi8(32)));
}

float dot_q3_k(const void* vw, const void* vx, int64_t n) {
  const auto* w = static_cast<const BlockQ3_K*>(vw);
  const auto* x = static_cast<const BlockQ8_K*>(vx);
  const __m512i m2 = _mm512_set1_epi8(3);
  const __m512i b2 = _mm512_set1_epi8(4);
  __m512 acc = _mm512_setzero_ps();
  for (int64_t i = 0; i < n / 256; ++i) {
    prefetch_stream<sizeof *w>(w + i);
    // Each 32-byte qs half serves 128 elements at shifts 0, 2, 4, 6; the hmask bit plane e / 32 goes to bit 2.
    const __m512i q0 = bcast256(w[i].qs);
    const __m512i q1 = bcast256(w[i].qs + 32);
    const __m512i hm = bcast256(w[i].hmask);
    const __m512i lv[4] = {or_and(_mm512_and_si512(shr2(q0, 0, 2), m2), rotl2(hm, 2, 1), b2),
                           or_and(_mm512_and_si512(shr2(q0, 4, 6), m2), rotl2(hm, 0, 63), b2),
                           or_and(_mm512_and_si512(shr2(q1, 0, 2), m2), rotl2(hm, 62, 61), b2),
                           or_and(_mm512_and_si512(shr2(q1, 4, 6), m2), rotl2(hm, 60, 59), b2)};
    const __m256i sc16 = q3k_scales(w[i].scales);
    const __m512i s = minus_offset(k16_block_sum(lv, sc16, x[i].qs), sc16, x[i], 2);
    acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s), _mm512_set1_ps(x[i].d * half_at(&w[i].d)), acc);
  }
  return hsum(acc);
}

float dot_q2_k(const void* vw, const void* vx, int64_t n) {
  const auto* w = static_cast<const BlockQ2_K*>(vw);
  const auto* x = static_cast<const BlockQ8_K*>(vx);
  const __m512i m2 = _mm512_set1_epi8(3);
  __m512 acc = _mm512_setzero_ps();
  __m256 acc_min = _mm256_setzero_ps();
  for (int64_t i = 0; i < n / 256; ++i) {
    prefetch_stream<sizeof *w>(w + i);
    const __m512i q0 = bcast256(w[i].qs);
    const __m512i q1 = bcast256(w[i].qs + 32);
    const __m512i lv[4] = {_mm512_and_si512(shr2(q0, 0, 2), m2), _mm512_and_si512(shr2(q0, 4, 6), m2),
                           _mm512_and_si512(shr2(q1, 0, 2), m2), _mm512_and_si512(shr2(q1, 4, 6), m2)};
    const __m128i s8 = load128(w[i].scales);
    const __m256i sc16 = _mm256_cvtepu8_epi16(_mm_and_si128(s8, _mm_set1_epi8(0x0f)));
    const __m256i mn16 = _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(s8, 4), _mm_set1_epi8(0x0f)));
    const __m512i s = k16_block_sum(lv, sc16, x[i].qs);
    acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s), _mm512_set1_ps(x[i].d * half_at(&w[i].d)), acc);
    acc_min = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_madd_epi16(mn16, load256(x[i].bsums))),
                              _mm256_set1_ps(x[i].d * half_at(&w[i].dmin)), acc_min);
  }
  return hsum(acc) - hsum(acc_min);
}

// IQ4_XS levels are signed and reach 127, too wide for an unsigned maddubs operand with an offset: use |level|
// and move the sign onto the activation instead.
float dot_iq4_xs(const void* vw, const void* vx, int64_t n) {
  const auto* w = static_cast<const BlockIQ4_XS*>(vw);
  const auto* x = static_cast<const BlockQ8_K*>(vx);
  const __m512i table = iq4nl_table_s8();
  __m512 acc = _mm512_setzero_ps();
  for (int64_t i = 0; i < n / 256; ++i) {
    prefetch_stream<sizeof *w>(w + i);
    // Scale ib: nibble ib % 2 of scales_l[ib / 2], plus bits 2ib..2ib+1 of scales_h at bit 4; offset 32.
    const uint32_t sl = load_u32(w[i].scales_l);
    const __m128i lo = _mm_unpacklo_epi8(_mm_cvtsi32_si128(static_cast<int>(sl & 0x0f0f0f0fu)),
                                         _mm_cvtsi32_si128(static_cast<int>((sl >> 4) & 0x0f0f0f0fu)));
    const __m128i hi = _mm_and_si128(
        _mm_srlv_epi16(_mm_set1_epi16(static_cast<int16_t>(w[i].scales_h)), _mm_setr_epi16(0, 2, 4, 6, 8, 10, 12, 14)),
        _mm_set1_epi16(3));
    const __m128i ls = _mm_sub_epi16(_mm_or_si128(_mm_cvtepu8_epi16(lo), _mm_slli_epi16(hi, 4)), _mm_set1_epi16(32));
    const __m512i lsw = _mm512_broadcast_i32x4(ls);
    __m512i s = _mm512_setzero_si512();
    for (int p = 0; p < 4; ++p) {
      const __m512i lv = _mm512_shuffle_epi8(table, nibbles64(w[i].qs + 32 * p, w[i].qs + 32 * p + 16));
      const __m512i xq = load512(x[i].qs + 64 * p);
      const __m512i xs = _mm512_mask_sub_epi8(xq, _mm512_movepi8_mask(lv), _mm512_setzero_si512(), xq);
      s = _mm512_dpwssd_epi32(s, _mm512_maddubs_epi16(_mm512_abs_epi8(lv), xs),
                              _mm512_shuffle_epi8(lsw, word_pick2(2 * p, 2 * p + 1)));
    }
    acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s), _mm512_set1_ps(x[i].d * half_at(&w[i].d)), acc);
  }
  return hsum(acc);
}

// ---- a few tokens at once (batched decode) ----
// Each weight super-block is unpacked once (levels, scale words, d) and then dotted against every token of a
// chunk of up to kBatchChunk tokens; a row's blocks stay in L1 between chunks, so weights stream from memory once.
// Per token this is the same exact int32 block sum as the vec_dot, so results match it bit for bit in the ints.
constexpr int kBatchChunk = 8;  // 2 accumulators per token must stay in registers next to the unpacked block

template <class B, int T>
void k4_row_tokens(const B* w, const K4Act* act, int64_t nb, float* y, int64_t ldy) {
  __m512 acc[T];
  __m128 acc_min[T];
#pragma GCC unroll 8
  for (int t = 0; t < T; ++t) {
    acc[t] = _mm512_setzero_ps();
    acc_min[t] = _mm_setzero_ps();
  }
  constexpr int kPairs[4][2] = {{0, 2}, {1, 3}, {4, 6}, {5, 7}};
  for (int64_t b = 0; b < nb; ++b) {
    prefetch_stream<sizeof(B)>(w + b);
    __m512i lv[4];
    k4_levels(w[b], lv);
    uint64_t sc, mn;
    k4_scales(w[b].scales, &sc, &mn);
    const __m512i scw = _mm512_broadcast_i32x4(_mm_cvtepu8_epi16(_mm_cvtsi64_si128(static_cast<int64_t>(sc))));
    __m512i sc_words[4];
    for (int c = 0; c < 4; ++c) sc_words[c] = _mm512_shuffle_epi8(scw, word_pick2(kPairs[c][0], kPairs[c][1]));
    const __m128i mn16 = _mm_cvtepu8_epi16(_mm_cvtsi64_si128(static_cast<int64_t>(mn)));
    const __m128 wd = _mm_cvtph_ps(_mm_cvtsi32_si128(static_cast<int>(load_u32(&w[b].d))));  // d, dmin
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) {
      const K4Act& a = act[t * nb + b];
      __m512i s = _mm512_setzero_si512();
      for (int c = 0; c < 4; ++c) s = _mm512_dpwssd_epi32(s, _mm512_maddubs_epi16(lv[c], a.xs[c]), sc_words[c]);
      const __m128 dd = _mm_mul_ps(wd, a.xd);
      acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s), _mm512_broadcastss_ps(dd), acc[t]);
      const __m128i m = _mm_madd_epi16(mn16, a.gsum);
      acc_min[t] = _mm_fmadd_ps(_mm_cvtepi32_ps(m), _mm_shuffle_ps(dd, dd, 0x55), acc_min[t]);
    }
  }
#pragma GCC unroll 8
  for (int t = 0; t < T; ++t) y[t * ldy] = hsum(acc[t]) - hsum(acc_min[t]);
}

template <class B, int N>
void k4_row_tokens_n(int n, const B* w, const K4Act* act, int64_t nb, float* y, int64_t ldy) {
  if constexpr (N > 0) {
    if (n == N) return k4_row_tokens<B, N>(w, act, nb, y, ldy);
    k4_row_tokens_n<B, N - 1>(n, w, act, nb, y, ldy);
  }
}

template <class B>
void gemm_k4_batch(const uint8_t* w, size_t ws, int64_t n_rows, const uint8_t* x, size_t xs, int64_t n_tok, int64_t k,
                   float* y, int64_t ldy) {
  const int64_t nb = k / 256;
  Scratch scratch(sizeof(K4Act) * static_cast<size_t>(nb * n_tok) + 64);
  auto* act = reinterpret_cast<K4Act*>(scratch.get());  // [token][block]
  for (int64_t t = 0; t < n_tok; ++t) {
    const auto* xt = reinterpret_cast<const BlockQ8_K*>(x + t * xs);
    for (int64_t b = 0; b < nb; ++b) act[t * nb + b] = k4_act(xt[b]);
  }
  for (int64_t r = 0; r < n_rows; ++r) {
    const auto* wr = reinterpret_cast<const B*>(w + r * ws);
    for (int64_t t0 = 0; t0 < n_tok; t0 += kBatchChunk) {
      const int n = static_cast<int>(n_tok - t0 < kBatchChunk ? n_tok - t0 : kBatchChunk);
      k4_row_tokens_n<B, kBatchChunk>(n, wr, act + t0 * nb, nb, y + t0 * ldy + r, ldy);
    }
  }
}

template <int T>
void q6_row_tokens(const BlockQ6_K* w, const uint8_t* x, size_t xs, int64_t nb, float* y, int64_t ldy) {
  const __m512i m4 = _mm512_set1_epi8(0x0f);
  const __m512i b45 = _mm512_set1_epi8(0x30);
  __m512 acc[T];
#pragma GCC unroll 8
  for (int t = 0; t < T; ++t) acc[t] = _mm512_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    prefetch_stream<sizeof(BlockQ6_K)>(w + b);
    __m512i lv[4];
    for (int h = 0; h < 2; ++h) {  // as dot_q6_k
      const __m512i ql = load512(w[b].ql + 64 * h);
      const __m512i qh = bcast256(w[b].qh + 32 * h);
      lv[2 * h] = or_and(_mm512_and_si512(ql, m4), rotl2(qh, 4, 2), b45);
      lv[2 * h + 1] = or_and(_mm512_and_si512(_mm512_srli_epi16(ql, 4), m4), rotl2(qh, 0, 62), b45);
    }
    const __m256i sc16 = _mm256_cvtepi8_epi16(load128(w[b].scales));
    const __m512i half[2] = {_mm512_broadcast_i32x4(_mm256_castsi256_si128(sc16)),
                             _mm512_broadcast_i32x4(_mm256_extracti128_si256(sc16, 1))};
    __m512i sc_words[4];
    for (int c = 0; c < 4; ++c) sc_words[c] = _mm512_shuffle_epi8(half[c / 2], word_pick4(4 * (c % 2)));
    const float wd = half_at(&w[b].d);
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) {
      const BlockQ8_K& a = reinterpret_cast<const BlockQ8_K*>(x + t * xs)[b];
      __m512i s = _mm512_setzero_si512();
      for (int c = 0; c < 4; ++c) {
        s = _mm512_dpwssd_epi32(s, _mm512_maddubs_epi16(lv[c], load512(a.qs + 64 * c)), sc_words[c]);
      }
      s = minus_offset(s, sc16, a, 5);
      acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s), _mm512_set1_ps(a.d * wd), acc[t]);
    }
  }
#pragma GCC unroll 8
  for (int t = 0; t < T; ++t) y[t * ldy] = hsum(acc[t]);
}

template <int N>
void q6_row_tokens_n(int n, const BlockQ6_K* w, const uint8_t* x, size_t xs, int64_t nb, float* y, int64_t ldy) {
  if constexpr (N > 0) {
    if (n == N) return q6_row_tokens<N>(w, x, xs, nb, y, ldy);
    q6_row_tokens_n<N - 1>(n, w, x, xs, nb, y, ldy);
  }
}

void gemm_q6_k_batch(const uint8_t* w, size_t ws, int64_t n_rows, const uint8_t* x, size_t xs, int64_t n_tok, int64_t k,
                     float* y, int64_t ldy) {
  const int64_t nb = k / 256;
  for (int64_t r = 0; r < n_rows; ++r) {
    const auto* wr = reinterpret_cast<const BlockQ6_K*>(w + r * ws);
    for (int64_t t0 = 0; t0 < n_tok; t0 += kBatchChunk) {
      const int n = static_cast<int>(n_tok - t0 < kBatchChunk ? n_tok - t0 : kBatchChunk);
      q6_row_tokens_n<kBatchChunk>(n, wr, x + t0 * xs, xs, nb, y + t0 * ldy + r, ldy);
    }
  }
}

}  // namespace

GemvFn kquant_gemv(GgmlType weight) {
  switch (weight) {
    case GgmlType::Q4_K:
      return &gemv_k4<BlockQ4_K>;
    case GgmlType::Q5_K:
      return &gemv_k4<BlockQ5_K>;
    default:
      return nullptr;
  }
}

GemmFn kquant_gemm_batch(GgmlType weight) {
  switch (weight) {
    case GgmlType::Q4_K:
      return &gemm_k4_batch<BlockQ4_K>;
    case GgmlType::Q5_K:
      return &gemm_k4_batch<BlockQ5_K>;
    case GgmlType::Q6_K:
      return &gemm_q6_k_batch;
    default:
      return nullptr;
  }
}

VecDotFn kquant_vec_dot(GgmlType weight) {
  switch (weight) {
    case GgmlType::Q2_K:
      return &dot_q2_k;
    case GgmlType::Q3_K:
      return &dot_q3_k;
    case GgmlType::Q4_K:
      return &dot_k4<BlockQ4_K>;
    case GgmlType::Q5_K:
      return &dot_k4<BlockQ5_K>;
    case GgmlType::Q6_K:
      return &dot_q6_k;
    case GgmlType::IQ4_XS:
      return &dot_iq4_xs;
    default:
      return nullptr;
  }
}

}  // namespace tessera::kernels::avx512
