// AVX2 path: gemm for the legacy formats and IQ4_XS (the K-quants: x86/avx2/gemm_kquants.cpp), the AVX2 twin
// of x86/avx512/gemm.cpp: 8-row panels (4 levels of a row per 32-bit lane), activations as levels + 128, and
// vpmaddubsw products summed in 16 bits for as many 4-element steps as cannot saturate. Levels beyond +-32 (Q8_0,
// IQ4) are split into two planes, 16 * high + low, so two product pairs still sum below 2^15.
#include "tensor/kernels/x86/avx2/gemm_passes.h"
#include "tensor/quant_blocks.h"

namespace tessera::kernels::avx2 {
namespace {

#include "tensor/kernels/x86/unpack.inl"

// A group record: quads [kGroup/4][8 rows][4 bytes] (two planes when split), then per row int32
// -128 * sum(levels), f32 dsc and f32 dmm when the format has mins.
template <class F>
struct PanelGeom {
  // Two 4-element steps must sum in 16 bits: pairs are at most 2 * 255 * |level|, so up to 32 in one plane.
  static constexpr bool kSplit = F::kMaxAbs > 32;
  static constexpr int kGroupsPerBlock = F::kBlock / F::kGroup;
  static constexpr int kQuads = F::kGroup / 4;
  static constexpr size_t kPlaneBytes = static_cast<size_t>(F::kGroup) * kPanelRows;
  static constexpr size_t kQuadBytes = kPlaneBytes * (kSplit ? 2 : 1);
  static constexpr size_t kRec = kQuadBytes + 64 + (F::kMin ? 32 : 0);
  // 4-element steps whose vpmaddubsw results can be summed in 16 bits: pairs are at most 2 * 255 * |level|.
  static constexpr int kMaxLevel = kSplit ? 15 : F::kMaxAbs;
  static constexpr int kFlushRaw = 32767 / (2 * 255 * kMaxLevel);
  static constexpr int kFlushPow2 = kFlushRaw >= 8 ? 8 : kFlushRaw >= 4 ? 4 : kFlushRaw >= 2 ? 2 : 1;
  static constexpr int kFlush = kFlushPow2 < kQuads ? kFlushPow2 : kQuads;
  static_assert(kFlush >= 1 && kQuads % kFlush == 0);
};

template <class F>
void build_panel(const uint8_t* w, size_t ws, int rows, int64_t nblk, uint8_t* panel) {
  using G = PanelGeom<F>;
  constexpr int kNg = G::kGroupsPerBlock;
  alignas(32) int8_t lv[kPanelRows][F::kBlock];
  float dsc[kPanelRows][kNg];
  float dmm[kPanelRows][kNg];
  for (int r = rows; r < kPanelRows; ++r) {
    std::memset(lv[r], 0, sizeof lv[r]);
    for (int g = 0; g < kNg; ++g) dsc[r][g] = dmm[r][g] = 0.0f;
  }
  const __m256i u128 = _mm256_set1_epi8(-128);
  const __m256i ones = _mm256_set1_epi16(1);
  for (int64_t blk = 0; blk < nblk; ++blk) {
    for (int r = 0; r < rows; ++r) F::unpack(w + r * ws + blk * F::kBytes, lv[r], dsc[r], dmm[r]);
    for (int c = 0; c < F::kBlock / 32; ++c) {
      __m256i q[8];
      transpose_8x32(&lv[0][32 * c], F::kBlock, q);
      for (int sub = 0; sub < 8 / G::kQuads; ++sub) {
        const int g = c * (8 / G::kQuads) + sub;
        uint8_t* rec = panel + (blk * kNg + g) * G::kRec;
        __m256i sum = _mm256_setzero_si256();
        for (int j = 0; j < G::kQuads; ++j) {
          const __m256i v = q[sub * G::kQuads + j];
          // 128 * (-128 + -128) is the extreme pair: exactly -32768, so no saturation.
          sum = _mm256_add_epi32(sum, _mm256_madd_epi16(_mm256_maddubs_epi16(u128, v), ones));
          if constexpr (G::kSplit) {
            const __m256i high = _mm256_sub_epi8(
                _mm256_and_si256(_mm256_srli_epi16(_mm256_xor_si256(v, u128), 4), _mm256_set1_epi8(0x0f)),
                _mm256_set1_epi8(8));
            _mm256_store_si256(reinterpret_cast<__m256i*>(rec + 32 * j), high);
            _mm256_store_si256(reinterpret_cast<__m256i*>(rec + G::kPlaneBytes + 32 * j),
                               _mm256_and_si256(v, _mm256_set1_epi8(0x0f)));
          } else {
            _mm256_store_si256(reinterpret_cast<__m256i*>(rec + 32 * j), v);
          }
        }
        _mm256_store_si256(reinterpret_cast<__m256i*>(rec + G::kQuadBytes),
                           _mm256_sub_epi32(_mm256_setzero_si256(), sum));
        float* fd = reinterpret_cast<float*>(rec + G::kQuadBytes + 32);
        for (int r = 0; r < kPanelRows; ++r) fd[r] = dsc[r][g];
        if constexpr (F::kMin) {
          for (int r = 0; r < kPanelRows; ++r) fd[8 + r] = dmm[r][g];
        }
      }
    }
  }
}

// Per activation block and token group of n tokens: levels + 128 [n][kBlock], f32 dx [n], then kAux f32 per
// token: the Q8_1 s (legacy with mins) or the group sums (K-quants with mins), group-major.
template <class F>
struct TokGeom {
  static constexpr int kAux = F::kMin ? (F::kSuper ? F::kBlock / F::kGroup : 1) : 0;
  static constexpr size_t kPerToken = F::kBlock + 4 + 4 * kAux;
};

template <class F>
void prep_tokens(const uint8_t* x, size_t xs, int n, int64_t nblk, uint8_t* out) {
  using T = TokGeom<F>;
  const size_t rec = T::kPerToken * static_cast<size_t>(n);
  const __m256i flip = _mm256_set1_epi8(-128);
  for (int t = 0; t < n; ++t) {
    const uint8_t* xt = x + t * xs;
    for (int64_t b = 0; b < nblk; ++b) {
      uint8_t* r = out + b * rec;
      uint8_t* qs = r + F::kBlock * t;
      float* fx = reinterpret_cast<float*>(r + F::kBlock * n);
      if constexpr (F::kSuper) {
        const auto& a = reinterpret_cast<const BlockQ8_K*>(xt)[b];
        for (int j = 0; j < 8; ++j) store256(qs + 32 * j, _mm256_xor_si256(load256(a.qs + 32 * j), flip));
        fx[t] = a.d;
        if constexpr (T::kAux == 16) {
          for (int g = 0; g < 16; ++g) fx[n * (1 + g) + t] = static_cast<float>(a.bsums[g]);
        } else if constexpr (T::kAux == 8) {
          for (int g = 0; g < 8; ++g) fx[n * (1 + g) + t] = static_cast<float>(a.bsums[2 * g] + a.bsums[2 * g + 1]);
        }
      } else {
        constexpr int kAct = F::kMin ? 36 : 34;  // Q8_1 or Q8_0
        const uint8_t* a = xt + b * kAct;
        store256(qs, _mm256_xor_si256(load256(a + kAct - 32), flip));
        fx[t] = half_at(a);
        if constexpr (F::kMin) fx[n + t] = half_at(a + 2);
      }
    }
  }
}

template <class F, int T>
void micro(const uint8_t* panel, const uint8_t* tok, int64_t nblk, float* y, int64_t ldy, int rows) {
  using G = PanelGeom<F>;
  constexpr size_t kTokRec = TokGeom<F>::kPerToken * T;
  const __m256i ones = _mm256_set1_epi16(1);
  __m256 acc[T];
  for (int t = 0; t < T; ++t) acc[t] = _mm256_setzero_ps();
  for (int64_t b = 0; b < nblk; ++b, tok += kTokRec) {
    const float* fx = reinterpret_cast<const float*>(tok + F::kBlock * T);
    __m256 part[T];
    for (int t = 0; t < T; ++t) part[t] = _mm256_setzero_ps();
    for (int g = 0; g < G::kGroupsPerBlock; ++g, panel += G::kRec) {
      const __m256i corr = load_q(panel + G::kQuadBytes);
      const __m256 dsc = _mm256_load_ps(reinterpret_cast<const float*>(panel + G::kQuadBytes + 32));
#pragma GCC unroll 8
      for (int t = 0; t < T; ++t) {
        const uint8_t* xq = tok + F::kBlock * t + F::kGroup * g;
        __m256i s = corr;
#pragma GCC unroll 8
        for (int j0 = 0; j0 < G::kQuads; j0 += G::kFlush) {
          __m256i a16 = _mm256_setzero_si256();
          __m256i b16 = _mm256_setzero_si256();
#pragma GCC unroll 8
          for (int j = j0; j < j0 + G::kFlush; ++j) {
            const __m256i xb = bcast4(xq + 4 * j);
            a16 = _mm256_add_epi16(a16, _mm256_maddubs_epi16(xb, load_q(panel + 32 * j)));
            if constexpr (G::kSplit) {
              b16 = _mm256_add_epi16(b16, _mm256_maddubs_epi16(xb, load_q(panel + G::kPlaneBytes + 32 * j)));
            }
          }
          if constexpr (G::kSplit) {
            s = _mm256_add_epi32(s, _mm256_madd_epi16(a16, _mm256_set1_epi16(16)));
            s = _mm256_add_epi32(s, _mm256_madd_epi16(b16, ones));
          } else {
            s = _mm256_add_epi32(s, _mm256_madd_epi16(a16, ones));
          }
        }
        if constexpr (F::kSuper) {
          part[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s), dsc, part[t]);
          if constexpr (F::kMin) {
            const __m256 dmm = _mm256_load_ps(reinterpret_cast<const float*>(panel + G::kQuadBytes + 64));
            part[t] = _mm256_fnmadd_ps(dmm, _mm256_set1_ps(fx[T * (1 + g) + t]), part[t]);
          }
        } else {
          acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s), _mm256_mul_ps(dsc, _mm256_set1_ps(fx[t])), acc[t]);
          if constexpr (F::kMin) {
            const __m256 dmm = _mm256_load_ps(reinterpret_cast<const float*>(panel + G::kQuadBytes + 64));
            acc[t] = _mm256_fnmadd_ps(dmm, _mm256_set1_ps(fx[T + t]), acc[t]);
          }
        }
      }
    }
    if constexpr (F::kSuper) {
      for (int t = 0; t < T; ++t) acc[t] = _mm256_fmadd_ps(part[t], _mm256_set1_ps(fx[t]), acc[t]);
    }
  }
  store_panel(acc, y, ldy, rows);
}

// Below this many tokens the repack does not pay (measured): loop over vec_dot instead. IQ4_XS blocks cost more
// to unpack, and split formats do twice the multiplies.
template <class F>
constexpr int kMinTokens = F::kSuper              ? 6
                           : PanelGeom<F>::kSplit ? 4
                                                  : 2;

template <class F>
constexpr int kTokGroup = F::kSuper ? 4 : 6;

template <class F>
void gemm_quant(const uint8_t* w, size_t ws, int64_t n_rows, const uint8_t* x, size_t xs, int64_t n_tok, int64_t k,
                float* y, int64_t ldy) {
  const int64_t nblk = k / F::kBlock;
  if (n_tok < kMinTokens<F>) return vec_dot_rows(quant_vec_dot(F::kType), w, ws, n_rows, x, xs, n_tok, k, y, ldy);
  constexpr int kT = kTokGroup<F>;
  const size_t tok_bytes = TokGeom<F>::kPerToken * static_cast<size_t>(nblk);
  Scratch tok(tok_bytes * static_cast<size_t>(n_tok));
  for (int64_t t0 = 0; t0 < n_tok; t0 += kT) {
    const int n = static_cast<int>(n_tok - t0 < kT ? n_tok - t0 : kT);
    prep_tokens<F>(x + t0 * xs, xs, n, nblk, tok.get() + t0 * tok_bytes);
  }
  panel_passes<kT>(
      n_rows, n_tok, PanelGeom<F>::kRec * PanelGeom<F>::kGroupsPerBlock * static_cast<size_t>(nblk),
      [&](int64_t r, int rows, uint8_t* panel) { build_panel<F>(w + r * ws, ws, rows, nblk, panel); },
      [&](int n, int64_t t0, const uint8_t* panel, int64_t r, int rows) {
        with_tokens<kT>(
            n, [&](auto c) { micro<F, c()>(panel, tok.get() + t0 * tok_bytes, nblk, y + t0 * ldy + r, ldy, rows); });
      });
}

}  // namespace

GemmFn quant_gemm(GgmlType weight) {
  switch (weight) {
    case GgmlType::Q4_0:
      return &gemm_quant<GQ4_0>;
    case GgmlType::Q4_1:
      return &gemm_quant<GQ4_1>;
    case GgmlType::Q5_0:
      return &gemm_quant<GQ5_0>;
    case GgmlType::Q5_1:
      return &gemm_quant<GQ5_1>;
    case GgmlType::Q8_0:
      return &gemm_quant<GQ8_0>;
    case GgmlType::IQ4_NL:
      return &gemm_quant<GIQ4_NL>;
    case GgmlType::IQ4_XS:
      return &gemm_quant<GIQ4_XS>;
    default:
      return kquant_gemm(weight);
  }
}

}  // namespace tessera::kernels::avx2
