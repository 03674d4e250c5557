// AVX2 dots and gemm of the float formats (F32, F16, BF16) with f32 activations.
#include <cstring>

#include "tensor/kernels/x86/avx2/common.h"
#include "tensor/kernels/x86/float_gemm.h"

namespace tessera::kernels::avx2 {
namespace {

inline const float* as_f32(const uint8_t* p) { return static_cast<const float*>(static_cast<const void*>(p)); }

// Weight loaders for the float formats: 8 weights from element i as f32; one() converts a single element.
struct F32W {
  static constexpr int kBytes = 4;
  static __m256 load(const uint8_t* p, int64_t i) { return _mm256_loadu_ps(as_f32(p) + i); }
  static float one(const uint8_t* p, int64_t i) {
    float v;
    std::memcpy(&v, p + i * 4, 4);
    return v;
  }
};
struct F16W {
  static constexpr int kBytes = 2;
  static __m256 load(const uint8_t* p, int64_t i) { return _mm256_cvtph_ps(load128(p + i * 2)); }
  static float one(const uint8_t* p, int64_t i) { return half_at(p + i * 2); }
};
// bf16 is the high half of an f32: widening is a shift.
struct BF16W {
  static constexpr int kBytes = 2;
  static __m256 load(const uint8_t* p, int64_t i) {
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(load128(p + i * 2)), 16));
  }
  static float one(const uint8_t* p, int64_t i) {
    const uint32_t bits = static_cast<uint32_t>(load_u16(p + i * 2)) << 16;
    float v;
    std::memcpy(&v, &bits, 4);
    return v;
  }
};

template <class W>
float dot_float(const void* vw, const void* vx, int64_t n) {
  const auto* w = static_cast<const uint8_t*>(vw);
  const auto* x = static_cast<const float*>(vx);
  __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    prefetch_ahead<32 * W::kBytes>(w + i * W::kBytes);
    a0 = _mm256_fmadd_ps(W::load(w, i), _mm256_loadu_ps(x + i), a0);
    a1 = _mm256_fmadd_ps(W::load(w, i + 8), _mm256_loadu_ps(x + i + 8), a1);
    a2 = _mm256_fmadd_ps(W::load(w, i + 16), _mm256_loadu_ps(x + i + 16), a2);
    a3 = _mm256_fmadd_ps(W::load(w, i + 24), _mm256_loadu_ps(x + i + 24), a3);
  }
  for (; i + 8 <= n; i += 8) a0 = _mm256_fmadd_ps(W::load(w, i), _mm256_loadu_ps(x + i), a0);
  float tail = 0;
  for (; i < n; ++i) tail += W::one(w, i) * x[i];
  return hsum(_mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3))) + tail;
}

// R weight rows x T tokens over the multiple-of-8 part of k; the caller adds the scalar tail.
template <class W, int R, int T>
void float_tile(const uint8_t* w, size_t ws, const uint8_t* xb, size_t xs, int64_t k, float* y, int64_t ldy,
                bool first) {
  __m256 acc[R][T];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) acc[r][t] = _mm256_setzero_ps();
  }
  const int64_t k8 = k / 8 * 8;
  for (int64_t i = 0; i < k8; i += 8) {
    __m256 xv[T];
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) xv[t] = _mm256_loadu_ps(as_f32(xb + t * xs) + i);
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      const __m256 wv = W::load(w + r * ws, i);
#pragma GCC unroll 8
      for (int t = 0; t < T; ++t) acc[r][t] = _mm256_fmadd_ps(wv, xv[t], acc[r][t]);
    }
  }
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) {
      float tail = 0;
      for (int64_t i = k8; i < k; ++i) tail += W::one(w + r * ws, i) * as_f32(xb + t * xs)[i];
      y[t * ldy + r] = hsum(acc[r][t]) + tail + (first ? 0.0f : y[t * ldy + r]);
    }
  }
}

// The tiles of x86/float_gemm.h's loop: kRows rows x kTokens tokens.
struct FloatTiles {
  static constexpr int kRows = 4;
  static constexpr int kTokens = 3;
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

}  // namespace tessera::kernels::avx2
