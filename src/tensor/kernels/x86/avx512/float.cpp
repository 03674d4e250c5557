// AVX-512 dots and gemm of the float formats (F32, F16, BF16) with f32 activations.
#include <cstring>

#include "tensor/kernels/x86/avx512/common.h"
#include "tensor/kernels/x86/float_gemm.h"

namespace tessera::kernels::avx512 {
namespace {

// Weight loaders for the float formats: 16 weights from element i of a row as f32, or the first `m` of them.
struct F32W {
  static constexpr int kBytes = 4;
  static __m512 load(const uint8_t* p, int64_t i) { return _mm512_loadu_ps(p + i * 4); }
  static __m512 load(const uint8_t* p, int64_t i, __mmask16 m) { return _mm512_maskz_loadu_ps(m, p + i * 4); }
};
struct F16W {
  static constexpr int kBytes = 2;
  static __m512 load(const uint8_t* p, int64_t i) { return _mm512_cvtph_ps(load256(p + i * 2)); }
  static __m512 load(const uint8_t* p, int64_t i, __mmask16 m) {
    return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, p + i * 2));
  }
};
// bf16 is the high half of an f32: widening is a shift.
struct BF16W {
  static constexpr int kBytes = 2;
  static __m512 widen(__m256i h) { return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16)); }
  static __m512 load(const uint8_t* p, int64_t i) { return widen(load256(p + i * 2)); }
  static __m512 load(const uint8_t* p, int64_t i, __mmask16 m) { return widen(_mm256_maskz_loadu_epi16(m, p + i * 2)); }
};

inline const float* as_f32(const uint8_t* p) { return static_cast<const float*>(static_cast<const void*>(p)); }

template <class W>
float dot_float(const void* vw, const void* vx, int64_t n) {
  const auto* w = static_cast<const uint8_t*>(vw);
  const auto* x = static_cast<const float*>(vx);
  __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
  int64_t i = 0;
  for (; i + 64 <= n; i += 64) {
    prefetch_stream<64 * W::kBytes>(w + i * W::kBytes);
    a0 = _mm512_fmadd_ps(W::load(w, i), _mm512_loadu_ps(x + i), a0);
    a1 = _mm512_fmadd_ps(W::load(w, i + 16), _mm512_loadu_ps(x + i + 16), a1);
    a2 = _mm512_fmadd_ps(W::load(w, i + 32), _mm512_loadu_ps(x + i + 32), a2);
    a3 = _mm512_fmadd_ps(W::load(w, i + 48), _mm512_loadu_ps(x + i + 48), a3);
  }
  for (; i + 16 <= n; i += 16) a0 = _mm512_fmadd_ps(W::load(w, i), _mm512_loadu_ps(x + i), a0);
  if (i < n) {
    const auto m = static_cast<__mmask16>((1u << (n - i)) - 1);
    a1 = _mm512_fmadd_ps(W::load(w, i, m), _mm512_maskz_loadu_ps(m, x + i), a1);
  }
  return hsum(_mm512_add_ps(_mm512_add_ps(a0, a1), _mm512_add_ps(a2, a3)));
}

// R weight rows x T tokens: each converted weight vector meets T tokens, each token vector R rows.
template <class W, int R, int T>
void float_tile(const uint8_t* w, size_t ws, const uint8_t* xb, size_t xs, int64_t k, float* y, int64_t ldy,
                bool first) {
  __m512 acc[R][T];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) acc[r][t] = _mm512_setzero_ps();
  }
  auto step = [&](int64_t i, __mmask16 m) {
    __m512 xv[T];
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) {
      const float* xt = as_f32(xb + t * xs) + i;
      xv[t] = m == 0xffff ? _mm512_loadu_ps(xt) : _mm512_maskz_loadu_ps(m, xt);
    }
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      const __m512 wv = m == 0xffff ? W::load(w + r * ws, i) : W::load(w + r * ws, i, m);
#pragma GCC unroll 8
      for (int t = 0; t < T; ++t) acc[r][t] = _mm512_fmadd_ps(wv, xv[t], acc[r][t]);
    }
  };
  int64_t i = 0;
  for (; i + 16 <= k; i += 16) step(i, 0xffff);
  if (i < k) step(i, static_cast<__mmask16>((1u << (k - i)) - 1));
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) y[t * ldy + r] = hsum(acc[r][t]) + (first ? 0.0f : y[t * ldy + r]);
  }
}

// The tiles of x86/float_gemm.h's loop: kRows rows x kTokens tokens.
struct FloatTiles {
  static constexpr int kRows = 4;
  static constexpr int kTokens = 4;
  template <class W, int R, int T>
  [[gnu::always_inline]] static void run(const uint8_t* w, size_t ws, const uint8_t* xb, size_t xs, int64_t k, float* y,
                                         int64_t ldy, bool first) {
    float_tile<W, R, T>(w, ws, xb, xs, k, y, ldy, first);
  }
};

template <class W>
constexpr GemmFn gemm_float = &x86::gemm_float<FloatTiles, W>;

}  // namespace

VecDotFn float_vec_dot(GgmlType weight) {
  switch (weight) {
    case GgmlType::F32:
      return &dot_float<F32W>;
    case GgmlType::F16:
      return &dot_float<F16W>;
    case GgmlType::BF16:
      return &dot_float<BF16W>;
    default:
      return nullptr;
  }
}

GemmFn float_gemm(GgmlType weight) {
  switch (weight) {
    case GgmlType::F32:
      return gemm_float<F32W>;
    case GgmlType::F16:
      return gemm_float<F16W>;
    case GgmlType::BF16:
      return gemm_float<BF16W>;
    default:
      return nullptr;
  }
}

}  // namespace tessera::kernels::avx512
