// AVX2 path, part 1: activation quantizers (byte-identical to quant.h's), F32/F16/BF16 dots and gemm with f32
// activations, and this path's lookups. Quantized dots and gemm live in the kernels_avx2_*.cpp files.
#include <cstring>

#include "tensor/kernels/avx2_common.h"
#include "tensor/kernels/kernels_internal.h"
#include "tensor/quant_blocks.h"

namespace tessera::kernels {
namespace avx2 {
namespace {

using quant::BlockQ8_0;
using quant::BlockQ8_1;
using quant::BlockQ8_K;

constexpr int kRne = _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC;

// Rounds to nearest even explicitly (the reference: nearbyint in the default mode, or the 1.5 * 2^23 trick), then
// wraps to int8 like the reference's static_cast. That only matters when a block's amax is so small that
// 127 / amax overflows to inf: the conversion then yields INT_MIN, whose low byte is 0.
inline __m256i round_i32(__m256 v) { return _mm256_cvttps_epi32(_mm256_round_ps(v, kRne)); }
inline __m256i wrap_i8(__m256i q) { return _mm256_srai_epi32(_mm256_slli_epi32(q, 24), 24); }

// Four vectors of 8 int32 in [-128, 127] -> 32 bytes in order.
inline __m256i pack_i8(__m256i a, __m256i b, __m256i c, __m256i d) {
  const __m256i ab = _mm256_packs_epi32(a, b);
  const __m256i cd = _mm256_packs_epi32(c, d);
  return _mm256_permutevar8x32_epi32(_mm256_packs_epi16(ab, cd), _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
}

// Shared by Q8_0 and Q8_1: id = 127/amax and round half to even. Returns amax / 127; *sum = sum of levels.
inline float quantize_block32(const float* x, int8_t* qs, int* sum) {
  __m256 v[4];
  __m256 amax_v = _mm256_setzero_ps();
  for (int j = 0; j < 4; ++j) {
    v[j] = _mm256_loadu_ps(x + 8 * j);
    amax_v = _mm256_max_ps(amax_v, abs_ps(v[j]));
  }
  const float amax = hmax(amax_v);
  const __m256 id = _mm256_set1_ps(amax != 0.0f ? 127.0f / amax : 0.0f);
  __m256i q[4];
  for (int j = 0; j < 4; ++j) q[j] = wrap_i8(round_i32(_mm256_mul_ps(v[j], id)));
  store256(qs, pack_i8(q[0], q[1], q[2], q[3]));
  *sum = hsum_i32(_mm256_add_epi32(_mm256_add_epi32(q[0], q[1]), _mm256_add_epi32(q[2], q[3])));
  return amax / 127.0f;
}

void quantize_q8_0(const float* x, void* vy, int64_t n) {
  auto* y = static_cast<BlockQ8_0*>(vy);
  for (int64_t i = 0; i < n / 32; ++i, x += 32) {
    int sum;
    y[i].d = to_half(quantize_block32(x, y[i].qs, &sum));
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

// Q8_K: the scale comes from the signed value of largest magnitude, the first one on ties; iscale = -127/max,
// levels capped at 127, f32 d = 1/iscale and the 16 group sums.
void quantize_q8_k(const float* x, void* vy, int64_t n) {
  auto* y = static_cast<BlockQ8_K*>(vy);
  for (int64_t i = 0; i < n / 256; ++i, x += 256) {
    __m256 amax_v = _mm256_setzero_ps();
    for (int j = 0; j < 32; ++j) amax_v = _mm256_max_ps(amax_v, abs_ps(_mm256_loadu_ps(x + 8 * j)));
    const float amax = hmax(amax_v);
    if (amax == 0.0f) {
      std::memset(&y[i], 0, sizeof y[i]);
      continue;
    }
    int first = 0;
    for (int j = 0; j < 32; ++j) {
      const int hit =
          _mm256_movemask_ps(_mm256_cmp_ps(abs_ps(_mm256_loadu_ps(x + 8 * j)), _mm256_set1_ps(amax), _CMP_EQ_OQ));
      if (hit != 0) {
        first = 8 * j + __builtin_ctz(static_cast<unsigned>(hit));
        break;
      }
    }
    const float iscale = -127.0f / x[first];
    const __m256 s = _mm256_set1_ps(iscale);
    for (int j = 0; j < 8; ++j) {
      __m256i q[4];
      for (int c = 0; c < 4; ++c) {
        q[c] = wrap_i8(
            _mm256_min_epi32(round_i32(_mm256_mul_ps(_mm256_loadu_ps(x + 32 * j + 8 * c), s)), _mm256_set1_epi32(127)));
      }
      store256(y[i].qs + 32 * j, pack_i8(q[0], q[1], q[2], q[3]));
      y[i].bsums[2 * j] = static_cast<int16_t>(hsum_i32(_mm256_add_epi32(q[0], q[1])));
      y[i].bsums[2 * j + 1] = static_cast<int16_t>(hsum_i32(_mm256_add_epi32(q[2], q[3])));
    }
    y[i].d = 1 / iscale;
  }
}

void copy_f32(const float* x, void* y, int64_t n) {
  if (n > 0) std::memcpy(y, x, static_cast<size_t>(n) * sizeof(float));
}

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

// Tiles of kR rows x kT tokens. k is cut into chunks and rows into blocks of kBlockRows so that a chunk of a row
// block (weights) and of a token tile (activations) both stay in L1 while every token tile meets every row tile
// of the block: without this the tiles re-read their operands from L2 and L3 and run at a quarter of the speed.
template <class W>
void gemm_float(const uint8_t* w, size_t ws, int64_t n_rows, const uint8_t* x, size_t xs, int64_t n_tok, int64_t k,
                float* y, int64_t ldy) {
  constexpr int kR = 4;
  constexpr int kT = 3;
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
}  // namespace avx2

ActQuantFn avx2_quantize_act(GgmlType act) {
  switch (act) {
    case GgmlType::F32:
      return &avx2::copy_f32;
    case GgmlType::Q8_0:
      return &avx2::quantize_q8_0;
    case GgmlType::Q8_1:
      return &avx2::quantize_q8_1;
    case GgmlType::Q8_K:
      return &avx2::quantize_q8_k;
    default:
      return nullptr;
  }
}

VecDotFn avx2_vec_dot(GgmlType weight) {
  switch (weight) {
    case GgmlType::F32:
      return &avx2::dot_float<avx2::F32W>;
    case GgmlType::F16:
      return &avx2::dot_float<avx2::F16W>;
    case GgmlType::BF16:
      return &avx2::dot_float<avx2::BF16W>;
    default:
      return avx2::quant_vec_dot(weight);
  }
}

const PackedGemm* avx2_panels(GgmlType weight) { return avx2::panels(weight); }

GemmFn avx2_gemm(GgmlType weight) {
  switch (weight) {
    case GgmlType::F32:
      return &avx2::gemm_float<avx2::F32W>;
    case GgmlType::F16:
      return &avx2::gemm_float<avx2::F16W>;
    case GgmlType::BF16:
      return &avx2::gemm_float<avx2::BF16W>;
    default:
      return avx2::quant_gemm(weight);
  }
}

}  // namespace tessera::kernels
