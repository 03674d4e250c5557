// Helpers shared by the AVX-512 kernel files (only those include it: everything here is compiled with the
// AVX-512 target flags, and the namespace keeps these inline functions apart from the other paths' copies).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <new>

#include "tensor/kernels.h"
#include "tensor/kernels/scratch_buffer.h"
#include "tensor/kernels/x86/simd_intrinsics.h"
#include "tensor/kernels/x86/stream_prefetch.h"

namespace tessera::kernels::avx512 {

// Rows [0, n_rows) of a weight matrix against one activation row: y[r] = dot(row r, x).
using GemvFn = void (*)(const uint8_t* w, size_t w_stride, int64_t n_rows, const uint8_t* x, int64_t k, float* y);

// The families each file provides; nullptr for types it does not handle. register.cpp combines them.
extern const OpsFns kOps;                                 // ops.cpp
void attend(const AttnRows& rows, const AttnKeys& keys);  // attention.cpp
extern const StreamProbeFns kStreamProbe;                 // stream_probe.cpp
ActQuantFn quantize_act(GgmlType act);                    // act.cpp
VecDotFn float_vec_dot(GgmlType weight);                  // float.cpp: F32, F16, BF16
GemmFn float_gemm(GgmlType weight);                       // float.cpp
VecDotFn legacy_vec_dot(GgmlType weight);
GemvFn legacy_gemv(GgmlType weight);
VecDotFn kquant_vec_dot(GgmlType weight);
GemvFn kquant_gemv(GgmlType weight);
// A few tokens at once without repacking (gemm_quant uses it up to kBatchMaxTokens); nullptr if none.
GemmFn kquant_gemm_batch(GgmlType weight);
GemmFn quant_gemm(GgmlType weight);
const PackedGemm* quant_packed(GgmlType weight);
// The panels' shape (x86/avx512/panels_q4k.cpp, x86/avx512/panels_legacy.cpp): 16 rows, one per 32-bit lane.
constexpr int kPanelRowCount = 16;
// Tokens per pass over a panel: 8 unpacked level registers + 2 or 3 per token stay in the 32 registers. Against 4,
// 8 shares each unpack among twice the tokens and gives the multipliers twice the independent chains.
constexpr int kPanelTokenChunk = 8;
// Weights as 16-row panels written at load in place of the rows (x86/avx512/panels_q4k.cpp); nullptr if none.
const PackedGemm* kquant_panels(GgmlType weight);
const PackedGemm* legacy_panels(GgmlType weight);  // x86/avx512/panels_legacy.cpp
const PackedGemm* k16_panels(GgmlType weight);     // Q3_K, Q6_K: x86/avx512/panels_k16.cpp

// Keeps v in a register: the compiler would otherwise fold its load into each instruction that uses it, reading
// the same 64 bytes from L1 once per use.
[[gnu::always_inline]] inline void in_register(__m512i& v) { asm("" : "+v"(v)); }

// acc += u8 lanes of w times the 4 signed bytes at x broadcast to every lane, with the broadcast folded into the
// instruction's memory operand ({1to16}): GCC emits a separate vpbroadcastd for _mm512_set1_epi32, an extra uop per
// dot product in kernels whose loads and uops, not their multiplies, set the pace.
[[gnu::always_inline]] inline __m512i dpbusd_bcast(__m512i acc, __m512i w, const int8_t* x) {
  asm("vpdpbusd %2%{1to16%}, %1, %0" : "+v"(acc) : "v"(w), "m"(*reinterpret_cast<const int32_t*>(x)));
  return acc;
}

// a | (b & c), one vpternlogd.
[[gnu::always_inline]] inline __m512i or_and(__m512i a, __m512i b, __m512i c) {
  return _mm512_ternarylogic_epi32(a, b, c, 0xF8);
}

// Bit kBit of each byte of a plane of fifth bits (the Q5 formats' panels: bit c for the element of chunk c's low
// nibble, bit 4 + c for its high nibble's) moved to bit 4, where a 0x10 mask keeps it. The 16-bit shifts carry
// bits across bytes only into positions that mask drops.
template <int kBit>
[[gnu::always_inline]] inline __m512i fifth_bits_at_4(__m512i plane) {
  if constexpr (kBit < 4) return _mm512_slli_epi16(plane, 4 - kBit);
  if constexpr (kBit > 4) return _mm512_srli_epi16(plane, kBit - 4);
  return plane;
}

// The chunks' low-nibble levels lo[c] and high-nibble levels hi[c] (both 0-31) of a Q5 panel with its plane.
[[gnu::always_inline]] inline void merge_fifth_bits(__m512i plane, __m512i* lo, __m512i* hi) {
  const __m512i b4 = _mm512_set1_epi8(0x10);
  lo[0] = or_and(lo[0], fifth_bits_at_4<0>(plane), b4);
  lo[1] = or_and(lo[1], fifth_bits_at_4<1>(plane), b4);
  lo[2] = or_and(lo[2], fifth_bits_at_4<2>(plane), b4);
  lo[3] = or_and(lo[3], fifth_bits_at_4<3>(plane), b4);
  hi[0] = or_and(hi[0], fifth_bits_at_4<4>(plane), b4);
  hi[1] = or_and(hi[1], fifth_bits_at_4<5>(plane), b4);
  hi[2] = or_and(hi[2], fifth_bits_at_4<6>(plane), b4);
  hi[3] = or_and(hi[3], fifth_bits_at_4<7>(plane), b4);
}

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

inline uint64_t load_u64(const void* p) {
  uint64_t v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

inline float load_f32(const void* p) {
  float v;
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
inline __m512i load512(const void* p) { return _mm512_loadu_si512(p); }

// [a | b] from two 32-byte loads.
inline __m512i load2x256(const void* a, const void* b) {
  return _mm512_inserti64x4(_mm512_castsi256_si512(load256(a)), load256(b), 1);
}

// The 32 nibbles of a 16-byte run as bytes, low nibbles first (the legacy/IQ4 element order).
inline __m256i nibbles32(const void* p) {
  const __m256i v = _mm256_broadcastsi128_si256(load128(p));
  return _mm256_and_si256(_mm256_srlv_epi64(v, _mm256_set_epi64x(4, 4, 0, 0)), _mm256_set1_epi8(0x0f));
}

// nibbles32(p0) and nibbles32(p1) in one register. The merge is a masked broadcast from memory, which needs no
// shuffle port (port 5 is the busy one in these kernels).
inline __m512i nibbles64(const void* p0, const void* p1) {
  const __m512i v = _mm512_mask_broadcast_i32x4(_mm512_broadcast_i32x4(load128(p0)), 0xFF00, load128(p1));
  return _mm512_and_si512(_mm512_srlv_epi64(v, _mm512_set_epi64(4, 4, 0, 0, 4, 4, 0, 0)), _mm512_set1_epi8(0x0f));
}

// Q5: the qh bits are exactly a byte mask over the block's 32 levels.
template <int kQh, int kQs>
__m256i q5_levels1(const uint8_t* b) {
  const __m256i q = nibbles32(b + kQs);
  return _mm256_mask_add_epi8(q, _cvtu32_mask32(load_u32(b + kQh)), q, _mm256_set1_epi8(16));
}

inline float hsum(__m512 v) { return _mm512_reduce_add_ps(v); }

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

inline float hsum(__m128 v) {
  const __m128 t = _mm_add_ps(v, _mm_movehl_ps(v, v));
  return _mm_cvtss_f32(_mm_add_ss(t, _mm_movehdup_ps(t)));
}

// The signed IQ4_NL levels (quant_blocks.h's kIQ4NLValues) in every 128-bit lane, for vpshufb.
inline __m512i iq4nl_table_s8() {
  return _mm512_broadcast_i32x4(
      _mm_setr_epi8(-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113));
}
// The same levels plus 128, so they are unsigned.
inline __m512i iq4nl_table_u8() { return _mm512_xor_si512(iq4nl_table_s8(), _mm512_set1_epi8(-128)); }

// This path's width traits, for the code written once for every vector width (x86/k16_unpack.h): the vector types
// and the operations those templates need, always inlined.
struct Width {
  static constexpr int kBytes = 64;
  using Int = __m512i;
  using Float = __m512;
  [[gnu::always_inline]] static Int and_(Int a, Int b) { return _mm512_and_si512(a, b); }
  template <int n>
  [[gnu::always_inline]] static Int srli16(Int a) {
    return _mm512_srli_epi16(a, n);
  }
  [[gnu::always_inline]] static Int set1_8(char b) { return _mm512_set1_epi8(b); }
  [[gnu::always_inline]] static Int or_and(Int a, Int b, Int mask) { return avx512::or_and(a, b, mask); }
};

}  // namespace tessera::kernels::avx512
