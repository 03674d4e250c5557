// AVX2 dots of the 32-element formats (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, IQ4_NL) with their Q8 activations. vpmaddubsw
// pairs unsigned weight levels (or |level| with the sign moved onto the activation, for the wide signed formats) with
// the activations in 16 bits; vpmaddwd then widens.
#include "tensor/kernels/x86/avx2/common.h"
#include "tensor/quant_blocks.h"

namespace tessera::kernels::avx2 {
namespace {

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

}  // namespace

VecDotFn legacy_vec_dot(GgmlType weight) {
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
    default:
      return nullptr;
  }
}

}  // namespace tessera::kernels::avx2
