// AVX-512 path: dots of the 32-element formats (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, IQ4_NL) with Q8_0/Q8_1
// activations. VNNI multiplies unsigned by signed bytes, so each weight format is read as u8 levels plus a
// constant offset, taken back with a second VNNI pass over the activations.
#include "tensor/kernels/x86/avx512/common.h"

namespace tessera::kernels::avx512 {
namespace {

// Activation block layouts: bytes per block and where qs starts (Q8_1 has its fp16 s at byte 2).
struct ActQ8_0 {
  static constexpr int kBytes = 34;
  static constexpr int kQs = 2;
};
struct ActQ8_1 {
  static constexpr int kBytes = 36;
  static constexpr int kQs = 4;
};

// Weight formats: kBytes per block; signed level = u8 level - kOffset; kMin: an fp16 m at byte 2 adds m * s
// per block (s is the Q8_1 activation's d * sum(q)). levels1 reads one block.
struct Q4_0W {
  using Act = ActQ8_0;
  static constexpr int kBytes = 18, kOffset = 8;
  static constexpr bool kMin = false;
  static __m256i levels1(const uint8_t* b) { return nibbles32(b + 2); }
};
struct Q4_1W {
  using Act = ActQ8_1;
  static constexpr int kBytes = 20, kOffset = 0;
  static constexpr bool kMin = true;
  static __m256i levels1(const uint8_t* b) { return nibbles32(b + 4); }
};
struct Q5_0W {
  using Act = ActQ8_0;
  static constexpr int kBytes = 22, kOffset = 16;
  static constexpr bool kMin = false;
  static __m256i levels1(const uint8_t* b) { return q5_levels1<2, 6>(b); }
};
struct Q5_1W {
  using Act = ActQ8_1;
  static constexpr int kBytes = 24, kOffset = 0;
  static constexpr bool kMin = true;
  static __m256i levels1(const uint8_t* b) { return q5_levels1<4, 8>(b); }
};
// Q8_0 weights are signed: flipping the top bit adds 128.
struct Q8_0W {
  using Act = ActQ8_0;
  static constexpr int kBytes = 34, kOffset = 128;
  static constexpr bool kMin = false;
  static __m256i levels1(const uint8_t* b) { return _mm256_xor_si256(load256(b + 2), _mm256_set1_epi8(-128)); }
};
struct IQ4NLW {
  using Act = ActQ8_0;
  static constexpr int kBytes = 18, kOffset = 128;
  static constexpr bool kMin = false;
  static __m256i levels1(const uint8_t* b) {
    return _mm256_shuffle_epi8(_mm512_castsi512_si256(iq4nl_table_u8()), nibbles32(b + 2));
  }
};

// The fp16 values at p + i * S for i < 4, as f32: word inserts straight from memory, then one conversion.
template <int S>
__m128 half4(const uint8_t* p) {
  __m128i h = _mm_cvtsi32_si128(load_u16(p));
  h = _mm_insert_epi16(h, load_u16(p + S), 1);
  h = _mm_insert_epi16(h, load_u16(p + 2 * S), 2);
  h = _mm_insert_epi16(h, load_u16(p + 3 * S), 3);
  return _mm_cvtph_ps(h);
}

// 256-bit on purpose: one block per register needs no cross-lane merges or per-lane scale vectors, and code
// without 512-bit operations may use the third vector port. Measured faster than two blocks per 512-bit register
// (which needs a shuffle to pair the blocks and another to spread their two scales). Four blocks share one
// scale conversion; the products reach the FMAs as broadcasts from memory.
template <class W>
float dot_legacy(const void* vw, const void* vx, int64_t n) {
  using A = typename W::Act;
  const auto* w = static_cast<const uint8_t*>(vw);
  const auto* x = static_cast<const uint8_t*>(vx);
  const int64_t nb = n / 32;
  const __m256i zero = _mm256_setzero_si256();
  const __m256i offset = _mm256_set1_epi8(static_cast<char>(W::kOffset));
  auto block_sums = [&](const uint8_t* wb, const uint8_t* xb) {
    const __m256i xq = load256(xb + A::kQs);
    __m256i s = _mm256_dpbusd_epi32(zero, W::levels1(wb), xq);
    if constexpr (W::kOffset != 0) s = _mm256_sub_epi32(s, _mm256_dpbusd_epi32(zero, offset, xq));
    return s;
  };
  __m256 acc[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};
  __m128 acc_min = _mm_setzero_ps();
  alignas(16) float d[4];
  int64_t i = 0;
  for (; i + 4 <= nb; i += 4, w += 4 * W::kBytes, x += 4 * A::kBytes) {
    prefetch_stream<4 * W::kBytes>(w);
    _mm_store_ps(d, _mm_mul_ps(half4<W::kBytes>(w), half4<A::kBytes>(x)));
    for (int j = 0; j < 4; ++j) {
      const __m256i s = block_sums(w + j * W::kBytes, x + j * A::kBytes);
      acc[j] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s), _mm256_broadcast_ss(&d[j]), acc[j]);
    }
    if constexpr (W::kMin) acc_min = _mm_fmadd_ps(half4<W::kBytes>(w + 2), half4<A::kBytes>(x + 2), acc_min);
  }
  float tail = 0;
  for (; i < nb; ++i, w += W::kBytes, x += A::kBytes) {
    acc[0] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(block_sums(w, x)), _mm256_set1_ps(half_at(w) * half_at(x)), acc[0]);
    if constexpr (W::kMin) tail += half_at(w + 2) * half_at(x + 2);
  }
  return hsum(_mm256_add_ps(_mm256_add_ps(acc[0], acc[1]), _mm256_add_ps(acc[2], acc[3]))) + hsum(acc_min) + tail;
}

// Several rows against one activation row (decode): the activation-side work (the offset sums, the scale
// conversions, the loads) is done once and shared by R rows at a time, which makes the per-row work about 2/3
// of a vec_dot's.
template <class W, int R>
void gemv_rows(const uint8_t* w, size_t ws, const uint8_t* x, int64_t nb, const float* dx, const int32_t* off,
               const float* sx, float* y) {
  using A = typename W::Act;
  __m256 acc[R];
  __m128 acc_min[R];
  for (int r = 0; r < R; ++r) {
    acc[r] = _mm256_setzero_ps();
    acc_min[r] = _mm_setzero_ps();
  }
  alignas(16) float d[R][4];
  int64_t b = 0;
  for (; b + 4 <= nb; b += 4) {
    const __m128 dx4 = _mm_loadu_ps(dx + b);
    for (int r = 0; r < R; ++r) {
      const uint8_t* wr = w + r * ws + b * W::kBytes;
      prefetch_stream<4 * W::kBytes>(wr);
      _mm_store_ps(d[r], _mm_mul_ps(half4<W::kBytes>(wr), dx4));
      if constexpr (W::kMin) acc_min[r] = _mm_fmadd_ps(half4<W::kBytes>(wr + 2), _mm_loadu_ps(sx + b), acc_min[r]);
    }
    for (int j = 0; j < 4; ++j) {
      const __m256i xq = load256(x + (b + j) * A::kBytes + A::kQs);
      // The offset correction sits in one lane: the lanes are summed after scaling anyway.
      const __m256i init = _mm256_zextsi128_si256(_mm_cvtsi32_si128(W::kOffset != 0 ? off[b + j] : 0));
      for (int r = 0; r < R; ++r) {
        const __m256i s = _mm256_dpbusd_epi32(init, W::levels1(w + r * ws + (b + j) * W::kBytes), xq);
        acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s), _mm256_broadcast_ss(&d[r][j]), acc[r]);
      }
    }
  }
  for (; b < nb; ++b) {
    const __m256i xq = load256(x + b * A::kBytes + A::kQs);
    const __m256i init = _mm256_zextsi128_si256(_mm_cvtsi32_si128(W::kOffset != 0 ? off[b] : 0));
    for (int r = 0; r < R; ++r) {
      const uint8_t* wr = w + r * ws + b * W::kBytes;
      const __m256i s = _mm256_dpbusd_epi32(init, W::levels1(wr), xq);
      acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s), _mm256_set1_ps(half_at(wr) * dx[b]), acc[r]);
      if constexpr (W::kMin) acc_min[r] = _mm_add_ss(acc_min[r], _mm_set_ss(half_at(wr + 2) * sx[b]));
    }
  }
  for (int r = 0; r < R; ++r) y[r] = hsum(acc[r]) + (W::kMin ? hsum(acc_min[r]) : 0.0f);
}

template <class W>
void gemv_legacy(const uint8_t* w, size_t ws, int64_t n_rows, const uint8_t* x, int64_t k, float* y) {
  using A = typename W::Act;
  const int64_t nb = k / 32;
  // Per activation block: dx, -offset * sum(q) and the Q8_1 s (whichever the format needs).
  Scratch scratch(static_cast<size_t>(nb) * 12 + 64);
  auto* dx = reinterpret_cast<float*>(scratch.get());
  auto* off = reinterpret_cast<int32_t*>(dx + nb);
  auto* sx = reinterpret_cast<float*>(off + nb);
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* xb = x + b * A::kBytes;
    dx[b] = half_at(xb);
    if constexpr (W::kOffset != 0) {
      const __m256i sum = _mm256_dpbusd_epi32(_mm256_setzero_si256(), _mm256_set1_epi8(1), load256(xb + A::kQs));
      off[b] = -W::kOffset * hsum_i32(sum);
    }
    if constexpr (W::kMin) sx[b] = half_at(xb + 2);
  }
  int64_t r = 0;
  for (; r + 4 <= n_rows; r += 4) gemv_rows<W, 4>(w + r * ws, ws, x, nb, dx, off, sx, y + r);
  for (; r < n_rows; ++r) gemv_rows<W, 1>(w + r * ws, ws, x, nb, dx, off, sx, y + r);
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

GemvFn legacy_gemv(GgmlType weight) {
  switch (weight) {
    case GgmlType::Q4_0:
      return &gemv_legacy<Q4_0W>;
    case GgmlType::Q4_1:
      return &gemv_legacy<Q4_1W>;
    case GgmlType::Q5_0:
      return &gemv_legacy<Q5_0W>;
    case GgmlType::Q5_1:
      return &gemv_legacy<Q5_1W>;
    case GgmlType::Q8_0:
      return &gemv_legacy<Q8_0W>;
    case GgmlType::IQ4_NL:
      return &gemv_legacy<IQ4NLW>;
    default:
      return nullptr;
  }
}

}  // namespace tessera::kernels::avx512
