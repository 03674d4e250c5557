// AVX-512 path, part 1: activation quantizers (byte-identical to quant.h's), F32/F16/BF16 dots and gemm with
// f32 activations, and this path's lookups. Quantized dots and gemm live in the kernels_avx512_*.cpp files.
#include <cstring>

#include "tensor/kernels/avx512_common.h"
#include "tensor/kernels/kernels_internal.h"
#include "tensor/quant_blocks.h"

namespace tessera::kernels {
namespace avx512 {
namespace {

using quant::BlockQ8_0;
using quant::BlockQ8_1;
using quant::BlockQ8_K;

// Explicit round-to-nearest-even: the reference uses nearbyint in the default rounding mode.
constexpr int kRne = _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC;

// Wraps to int8 like the reference's static_cast (vpmovdb truncates too, but the sums must see the same values).
// That only matters when a block's amax is so small that 127 / amax overflows to inf: conversion gives INT_MIN.
inline __m512i wrap_i8(__m512i q) { return _mm512_srai_epi32(_mm512_slli_epi32(q, 24), 24); }

// Shared by Q8_0 and Q8_1: id = 127/amax and round half to even. Returns amax / 127 and sets *sum to the sum of
// the quantized values.
inline float quantize_block32(const float* x, int8_t* qs, int* sum) {
  const __m512 v0 = _mm512_loadu_ps(x);
  const __m512 v1 = _mm512_loadu_ps(x + 16);
  const float amax = _mm512_reduce_max_ps(_mm512_max_ps(_mm512_abs_ps(v0), _mm512_abs_ps(v1)));
  const __m512 id = _mm512_set1_ps(amax != 0.0f ? 127.0f / amax : 0.0f);
  const __m512i q0 = wrap_i8(_mm512_cvt_roundps_epi32(_mm512_mul_ps(v0, id), kRne));
  const __m512i q1 = wrap_i8(_mm512_cvt_roundps_epi32(_mm512_mul_ps(v1, id), kRne));
  _mm_storeu_si128(reinterpret_cast<__m128i*>(qs), _mm512_cvtepi32_epi8(q0));
  _mm_storeu_si128(reinterpret_cast<__m128i*>(qs + 16), _mm512_cvtepi32_epi8(q1));
  *sum = _mm512_reduce_add_epi32(_mm512_add_epi32(q0, q1));
  return amax / 127.0f;
}

void quantize_q8_0(const float* x, void* vy, int64_t n) {
  auto* y = static_cast<BlockQ8_0*>(vy);
  for (int64_t i = 0; i < n / 32; ++i, x += 32) {
    int sum;
    const float d = quantize_block32(x, y[i].qs, &sum);
    y[i].d = to_half(d);
  }
}

void quantize_q8_1(const float* x, void* vy, int64_t n) {
  auto* y = static_cast<BlockQ8_1*>(vy);
  for (int64_t i = 0; i < n / 32; ++i, x += 32) {
    int sum;
    const float d = quantize_block32(x, y[i].qs, &sum);
    y[i].d = to_half(d);
    y[i].s = to_half(d * static_cast<float>(sum));
  }
}

// Q8_K: the scale comes from the signed value of largest magnitude, the first one on ties (its sign decides
// which end gets -127), iscale = -127/max, levels capped at 127, f32 d = 1/iscale and 16 group sums.
void quantize_q8_k(const float* x, void* vy, int64_t n) {
  auto* y = static_cast<BlockQ8_K*>(vy);
  for (int64_t i = 0; i < n / 256; ++i, x += 256) {
    __m512 v[16];
    __m512 amax_v = _mm512_setzero_ps();
    for (int j = 0; j < 16; ++j) {
      v[j] = _mm512_loadu_ps(x + 16 * j);
      amax_v = _mm512_max_ps(amax_v, _mm512_abs_ps(v[j]));
    }
    const float amax = _mm512_reduce_max_ps(amax_v);
    if (amax == 0.0f) {
      std::memset(&y[i], 0, sizeof y[i]);
      continue;
    }
    int first = 0;
    for (int j = 0; j < 16; ++j) {
      const __mmask16 hit = _mm512_cmp_ps_mask(_mm512_abs_ps(v[j]), _mm512_set1_ps(amax), _CMP_EQ_OQ);
      if (hit != 0) {
        first = 16 * j + __builtin_ctz(hit);
        break;
      }
    }
    const float iscale = -127.0f / x[first];
    const __m512 s = _mm512_set1_ps(iscale);
    for (int j = 0; j < 16; ++j) {
      const __m512i q =
          wrap_i8(_mm512_min_epi32(_mm512_cvt_roundps_epi32(_mm512_mul_ps(v[j], s), kRne), _mm512_set1_epi32(127)));
      _mm_storeu_si128(reinterpret_cast<__m128i*>(y[i].qs + 16 * j), _mm512_cvtepi32_epi8(q));
      y[i].bsums[j] = static_cast<int16_t>(_mm512_reduce_add_epi32(q));
    }
    y[i].d = 1 / iscale;
  }
}

void copy_f32(const float* x, void* y, int64_t n) {
  if (n > 0) std::memcpy(y, x, static_cast<size_t>(n) * sizeof(float));
}

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

// Tiles of kR rows x kT tokens. k is cut into chunks and rows into blocks of kBlockRows so that a chunk of a row
// block (weights) and of a token tile (activations) both stay in L1 while every token tile meets every row tile
// of the block: without this the tiles re-read their operands from L2 and L3 and run at a quarter of the speed.
template <class W>
void gemm_float(const uint8_t* w, size_t ws, int64_t n_rows, const uint8_t* x, size_t xs, int64_t n_tok, int64_t k,
                float* y, int64_t ldy) {
  constexpr int kR = 4;
  constexpr int kT = 4;
  constexpr int64_t kChunk = 512;
  constexpr int64_t kBlockRows = 16;
  for (int64_t k0 = 0; k0 < k; k0 += kChunk) {
    const int64_t kc = k - k0 < kChunk ? k - k0 : kChunk;
    const bool first = k0 == 0;
    for (int64_t rb = 0; rb < n_rows; rb += kBlockRows) {
      const int64_t rb_end = n_rows - rb < kBlockRows ? n_rows : rb + kBlockRows;
      for (int64_t t = 0; t < n_tok;) {
        const bool full_t = n_tok - t >= kT;
        const uint8_t* xt = x + static_cast<size_t>(t) * xs + static_cast<size_t>(k0) * sizeof(float);
        for (int64_t r = rb; r < rb_end;) {
          const bool full_r = rb_end - r >= kR;
          const uint8_t* wr = w + static_cast<size_t>(r) * ws + static_cast<size_t>(k0) * W::kBytes;
          float* yt = y + t * ldy + r;
          if (full_r && full_t) {
            float_tile<W, kR, kT>(wr, ws, xt, xs, kc, yt, ldy, first);
          } else if (full_r) {
            float_tile<W, kR, 1>(wr, ws, xt, xs, kc, yt, ldy, first);
          } else if (full_t) {
            float_tile<W, 1, kT>(wr, ws, xt, xs, kc, yt, ldy, first);
          } else {
            float_tile<W, 1, 1>(wr, ws, xt, xs, kc, yt, ldy, first);
          }
          r += full_r ? kR : 1;
        }
        t += full_t ? kT : 1;
      }
    }
  }
}

}  // namespace
}  // namespace avx512

ActQuantFn avx512_quantize_act(GgmlType act) {
  switch (act) {
    case GgmlType::F32:
      return &avx512::copy_f32;
    case GgmlType::Q8_0:
      return &avx512::quantize_q8_0;
    case GgmlType::Q8_1:
      return &avx512::quantize_q8_1;
    case GgmlType::Q8_K:
      return &avx512::quantize_q8_k;
    default:
      return nullptr;
  }
}

VecDotFn avx512_vec_dot(GgmlType weight) {
  switch (weight) {
    case GgmlType::F32:
      return &avx512::dot_float<avx512::F32W>;
    case GgmlType::F16:
      return &avx512::dot_float<avx512::F16W>;
    case GgmlType::BF16:
      return &avx512::dot_float<avx512::BF16W>;
    default:
      break;
  }
  if (VecDotFn f = avx512::legacy_vec_dot(weight)) return f;
  return avx512::kquant_vec_dot(weight);
}

const PackedGemm* avx512_packed(GgmlType weight) { return avx512::quant_packed(weight); }
const PackedGemm* avx512_panels(GgmlType weight) {
  if (const PackedGemm* p = avx512::kquant_panels(weight)) return p;
  if (const PackedGemm* p = avx512::k16_panels(weight)) return p;
  return avx512::legacy_panels(weight);
}

GemmFn avx512_gemm(GgmlType weight) {
  switch (weight) {
    case GgmlType::F32:
      return &avx512::gemm_float<avx512::F32W>;
    case GgmlType::F16:
      return &avx512::gemm_float<avx512::F16W>;
    case GgmlType::BF16:
      return &avx512::gemm_float<avx512::BF16W>;
    default:
      return avx512::quant_gemm(weight);
  }
}

}  // namespace tessera::kernels
