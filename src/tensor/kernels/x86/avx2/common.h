// Helpers shared by the AVX2 kernel files (only those include it: everything here is compiled with the AVX2
// target flags, and the namespace keeps these inline functions apart from the other paths' copies).
#pragma once

#include <immintrin.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <new>

#include "tensor/kernels.h"
#include "tensor/kernels/scratch_buffer.h"
#include "tensor/kernels/x86/stream_prefetch.h"

namespace tessera::kernels::avx2 {

// The families each file provides; nullptr for types it does not handle. register.cpp combines them.
extern const OpsFns kOps;                                 // ops.cpp
void attend(const AttnRows& rows, const AttnKeys& keys);  // attention.cpp
extern const StreamProbeFns kStreamProbe;                 // stream_probe.cpp
ActQuantFn quantize_act(GgmlType act);                    // act.cpp
VecDotFn float_vec_dot(GgmlType weight);                  // float.cpp: F32, F16, BF16
GemmFn float_gemm(GgmlType weight);                       // float.cpp
VecDotFn legacy_vec_dot(GgmlType weight);                 // dot_legacy.cpp: the 32-element formats
VecDotFn kquant_vec_dot(GgmlType weight);                 // dot_kquants.cpp: Q2_K..Q6_K, IQ4_XS
VecDotFn quant_vec_dot(GgmlType weight);                  // register.cpp: the two above
GemmFn quant_gemm(GgmlType weight);                       // gemm.cpp: the 32-element formats, IQ4_XS, then kquant_gemm
GemmFn kquant_gemm(GgmlType weight);                      // gemm_kquants.cpp: Q2_K..Q6_K
const PackedGemm* q4k_panels(GgmlType weight);            // panels_q4k.cpp: Q4_K, Q5_K, IQ4_XS
const PackedGemm* k16_panels(GgmlType weight);            // panels_k16.cpp: Q2_K, Q3_K, Q6_K
const PackedGemm* legacy_panels(GgmlType weight);         // panels_legacy.cpp: Q4_0, Q4_1, Q5_0, Q5_1, IQ4_NL

inline uint16_t load_u16(const void* p) {
  uint16_t v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

inline uint32_t load_u32(const void* p) {
  uint32_t v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

// fp16 at p as f32 (F16C is exact for every half, subnormals included).
inline float half_at(const void* p) { return _cvtsh_ss(load_u16(p)); }

// f32 -> fp16 bits, round to nearest even (not _cvtss_sh: clang implements it with a C99 compound literal).
inline uint16_t to_half(float f) {
  return static_cast<uint16_t>(_mm_cvtsi128_si32(_mm_cvtps_ph(_mm_set_ss(f), _MM_FROUND_TO_NEAREST_INT)));
}

inline __m128i load128(const void* p) { return _mm_loadu_si128(static_cast<const __m128i*>(p)); }
inline __m256i load256(const void* p) { return _mm256_loadu_si256(static_cast<const __m256i*>(p)); }
inline void store256(void* p, __m256i v) { _mm256_storeu_si256(static_cast<__m256i*>(p), v); }

// The 32 nibbles of a 16-byte run as bytes, low nibbles first (the legacy/IQ4 element order).
inline __m256i nibbles32(const void* p) {
  const __m256i v = _mm256_broadcastsi128_si256(load128(p));
  return _mm256_and_si256(_mm256_srlv_epi64(v, _mm256_set_epi64x(4, 4, 0, 0)), _mm256_set1_epi8(0x0f));
}

// Byte j = 0xff where bit j of `bits` is set (the Q5 fifth bits).
inline __m256i bit_mask32(uint32_t bits) {
  const __m256i spread = _mm256_shuffle_epi8(
      _mm256_set1_epi32(static_cast<int>(bits)),
      _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3));
  const __m256i bit = _mm256_set1_epi64x(static_cast<int64_t>(0x8040201008040201ull));
  return _mm256_cmpeq_epi8(_mm256_and_si256(spread, bit), bit);
}

// Q5_0/Q5_1 levels 0..31 of one block (qh at byte kQh, qs at kQs).
template <int kQh, int kQs>
__m256i q5_levels(const uint8_t* b) {
  return _mm256_or_si256(nibbles32(b + kQs), _mm256_and_si256(bit_mask32(load_u32(b + kQh)), _mm256_set1_epi8(16)));
}

// The signed IQ4_NL levels (quant_blocks.h's kIQ4NLValues) in both 128-bit lanes, for vpshufb.
inline __m256i iq4nl_table() {
  return _mm256_broadcastsi128_si256(
      _mm_setr_epi8(-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113));
}

// Software prefetch for the weight stream of a dot product: decode reads every weight once, and the hardware
// prefetcher alone left much of the memory bandwidth unused (docs/perf-log/decode-prefetch.md).
// Prefetches the lines of [p + 4 KB, p + 4 KB + kStep] for a loop that consumes kStep bytes per iteration.
template <int kStep>
inline void prefetch_ahead(const void* p) {
  const char* c = static_cast<const char*>(p) + 4096;
  for (int o = 0; o <= kStep; o += 64) _mm_prefetch(c + o, _MM_HINT_T0);
}

// 8 rows x 32 bytes (row r at src + r * stride) -> out[j], lane r = bytes 4j..4j+3 of row r.
inline void transpose_8x32(const void* src, size_t stride, __m256i (&out)[8]) {
  __m256i r[8];
  for (int i = 0; i < 8; ++i) r[i] = load256(static_cast<const uint8_t*>(src) + i * stride);
  const __m256i t0 = _mm256_unpacklo_epi32(r[0], r[1]), t1 = _mm256_unpackhi_epi32(r[0], r[1]);
  const __m256i t2 = _mm256_unpacklo_epi32(r[2], r[3]), t3 = _mm256_unpackhi_epi32(r[2], r[3]);
  const __m256i t4 = _mm256_unpacklo_epi32(r[4], r[5]), t5 = _mm256_unpackhi_epi32(r[4], r[5]);
  const __m256i t6 = _mm256_unpacklo_epi32(r[6], r[7]), t7 = _mm256_unpackhi_epi32(r[6], r[7]);
  const __m256i u[4] = {_mm256_unpacklo_epi64(t0, t2), _mm256_unpackhi_epi64(t0, t2), _mm256_unpacklo_epi64(t1, t3),
                        _mm256_unpackhi_epi64(t1, t3)};
  const __m256i v[4] = {_mm256_unpacklo_epi64(t4, t6), _mm256_unpackhi_epi64(t4, t6), _mm256_unpacklo_epi64(t5, t7),
                        _mm256_unpackhi_epi64(t5, t7)};
  // u[c]: rows 0-3 of dword c (low lane) and c + 4 (high lane); v[c]: rows 4-7.
  for (int c = 0; c < 4; ++c) {
    out[c] = _mm256_permute2x128_si256(u[c], v[c], 0x20);
    out[c + 4] = _mm256_permute2x128_si256(u[c], v[c], 0x31);
  }
}

// The 4 bytes at p in every 32-bit lane (the gemms' activation steps); load_q: one aligned 32-byte quad record.
inline __m256i bcast4(const void* p) { return _mm256_set1_epi32(static_cast<int>(load_u32(p))); }
inline __m256i or_and(__m256i a, __m256i b, __m256i mask) { return _mm256_or_si256(a, _mm256_and_si256(b, mask)); }
inline __m256i load_q(const void* p) { return _mm256_load_si256(static_cast<const __m256i*>(p)); }

// The panels' 32-element groups of 8 rows (x86/avx2/panels_q4k.cpp, x86/avx2/panels_legacy.cpp): 4 vectors at
// qs whose byte 4r + i holds element 4c + i of row r in its low nibble, 16 + 4c + i in its high one.
// group_products: their products with activations xq, pairs summed in 16 bits. The levels are 0..15, so a pair is
// at most 2 * 15 * 128 = 3840 in size and a group's 8 of them sum exactly.
inline __m256i group_products(const uint8_t* qs, const int8_t* xq, __m256i m4) {
  __m256i s = _mm256_setzero_si256();
  for (int c = 0; c < 4; ++c) {
    const __m256i v = load256(qs + 32 * c);
    s = _mm256_add_epi16(s, _mm256_maddubs_epi16(_mm256_and_si256(v, m4), bcast4(xq + 4 * c)));
    s = _mm256_add_epi16(s,
                         _mm256_maddubs_epi16(_mm256_and_si256(_mm256_srli_epi16(v, 4), m4), bcast4(xq + 16 + 4 * c)));
  }
  return s;
}

// The same group of IQ4 nibbles looked up in `table` (signed values up to 127 in size): vpmaddubsw takes the
// values' magnitudes and the activations with the values' signs, so a product pair stays below 2 * 127 * 127 and
// each is widened (times sc: the rows' scale in both words of their lane, or ones) before the next.
inline __m256i table_group_dot(const uint8_t* qs, const int8_t* xq, __m256i table, __m256i m4, __m256i sc) {
  __m256i s = _mm256_setzero_si256();
  for (int c = 0; c < 4; ++c) {
    const __m256i v = load256(qs + 32 * c);
    const __m256i lo = _mm256_shuffle_epi8(table, _mm256_and_si256(v, m4));
    const __m256i hi = _mm256_shuffle_epi8(table, _mm256_and_si256(_mm256_srli_epi16(v, 4), m4));
    const __m256i p_lo = _mm256_maddubs_epi16(_mm256_abs_epi8(lo), _mm256_sign_epi8(bcast4(xq + 4 * c), lo));
    const __m256i p_hi = _mm256_maddubs_epi16(_mm256_abs_epi8(hi), _mm256_sign_epi8(bcast4(xq + 16 + 4 * c), hi));
    s = _mm256_add_epi32(s, _mm256_add_epi32(_mm256_madd_epi16(p_lo, sc), _mm256_madd_epi16(p_hi, sc)));
  }
  return s;
}

// The same group with a fifth bit per level from the 32 bytes at high (byte 4r + i: bit c for element 4c + i, bit
// 4 + c for 16 + 4c + i), levels 0..31, whose 8 product pairs would overflow 16 bits: the low nibbles' 4 and the
// high ones' 4 are summed apart and each widened with sc (the rows' scale in both words of their lane, or ones).
inline __m256i five_bit_group_dot(const uint8_t* qs, const uint8_t* high, const int8_t* xq, __m256i m4, __m256i sc) {
  const __m256i plane = load256(high);
  const __m256i b4 = _mm256_set1_epi8(0x10);
  __m256i lo = _mm256_setzero_si256(), hi = _mm256_setzero_si256();
  for (int c = 0; c < 4; ++c) {
    const __m256i v = load256(qs + 32 * c);
    // Bit c and bit 4 + c to bit 4; what the 16-bit shifts carry across bytes lands outside the mask.
    const __m256i l = or_and(_mm256_and_si256(v, m4), _mm256_slli_epi16(plane, 4 - c), b4);
    const __m256i h = or_and(_mm256_and_si256(_mm256_srli_epi16(v, 4), m4), _mm256_srli_epi16(plane, c), b4);
    lo = _mm256_add_epi16(lo, _mm256_maddubs_epi16(l, bcast4(xq + 4 * c)));
    hi = _mm256_add_epi16(hi, _mm256_maddubs_epi16(h, bcast4(xq + 16 + 4 * c)));
  }
  return _mm256_add_epi32(_mm256_madd_epi16(lo, sc), _mm256_madd_epi16(hi, sc));
}

inline float hsum(__m256 v) {
  const __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  const __m128 t = _mm_add_ps(s, _mm_movehl_ps(s, s));
  return _mm_cvtss_f32(_mm_add_ss(t, _mm_movehdup_ps(t)));
}

inline int hsum_i32(__m256i v) {
  const __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  const __m128i t = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4e));
  return _mm_cvtsi128_si32(_mm_add_epi32(t, _mm_shuffle_epi32(t, 0xb1)));
}

inline float hmax(__m256 v) {
  const __m128 s = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  const __m128 t = _mm_max_ps(s, _mm_movehl_ps(s, s));
  return _mm_cvtss_f32(_mm_max_ss(t, _mm_movehdup_ps(t)));
}

inline __m256 abs_ps(__m256 v) { return _mm256_andnot_ps(_mm256_set1_ps(-0.0f), v); }

// This path's width traits, for the code written once for every vector width (x86/k16_unpack.h): the vector types
// and the operations those templates need, always inlined.
struct Width {
  static constexpr int kBytes = 32;
  using Int = __m256i;
  using Float = __m256;
  [[gnu::always_inline]] static Int and_(Int a, Int b) { return _mm256_and_si256(a, b); }
  template <int n>
  [[gnu::always_inline]] static Int srli16(Int a) {
    return _mm256_srli_epi16(a, n);
  }
  [[gnu::always_inline]] static Int set1_8(char b) { return _mm256_set1_epi8(b); }
  [[gnu::always_inline]] static Int or_and(Int a, Int b, Int mask) { return avx2::or_and(a, b, mask); }
};

}  // namespace tessera::kernels::avx2
