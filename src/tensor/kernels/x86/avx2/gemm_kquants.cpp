// AVX2 path: gemm for the K-quants (Q2_K..Q6_K) in their own integers. Unsigned levels (level + offset) are
// vpmaddubsw's unsigned operand against the Q8_K activations as they are (no copy of the tokens), products sum in
// 16 bits for as many 4-element steps as cannot saturate, then vpmaddwd by the group's integer scale into one int32
// per row and block; mins and offsets come from the activations' 16-element sums (bsums), so the floats are touched
// once per 256 elements instead of once per group, and a group's quads stay in registers for all tokens of a step.
#include "tensor/kernels/x86/avx2/gemm_passes.h"
#include "tensor/quant_blocks.h"

namespace tessera::kernels::avx2 {
namespace {

#include "tensor/kernels/x86/unpack.inl"

// One 256-element block of an 8-row panel: quads [group][group / 4][8 rows][4 bytes] of unsigned levels, each
// group's scale as int16 pairs (sc, sc) per row, 8 pairs of per-16-element coefficients c (the mins, or for the
// offset formats offset * sc) for the bsums, then f32 d and dmin per row. A row's value is
// d * sum_g sc_g * sum(u * x) - (dmin or d) * sum_j c_j * bsum_j.
template <class F>
struct KPanel {
  static constexpr int kGroups = 256 / F::kGroup;
  static constexpr int kQuads = F::kGroup / 4;
  static constexpr bool kCoefs = F::kMin || F::kOffset != 0;
  static constexpr size_t kScales = size_t{32} * kQuads * kGroups;
  static constexpr size_t kCoef = kScales + size_t{32} * kGroups;
  static constexpr size_t kD = kCoef + (kCoefs ? 32 * 8 : 0);
  static constexpr size_t kRec = kD + 64;
  // A step's pairs are at least -2 * 128 * kMaxU, and their sum must stay >= -32768.
  static constexpr int kFlushRaw = 32768 / (2 * 128 * F::kMaxU);
  static constexpr int kFlushPow2 = kFlushRaw >= 8 ? 8 : kFlushRaw >= 4 ? 4 : kFlushRaw >= 2 ? 2 : 1;
  static constexpr int kFlush = kFlushPow2 < kQuads ? kFlushPow2 : kQuads;
  static_assert(kFlush >= 1 && kQuads % kFlush == 0);
};

// Coefficient j (of the 16 per-16-element sums) of row k: the min of its group, or offset * scale.
template <class F>
int16_t coef(const KInts& k, int j) {
  const int g = j * 16 / F::kGroup;
  if constexpr (F::kMin) return k.mn[g];
  return static_cast<int16_t>(F::kOffset * k.sc[g]);
}

template <class F>
void build_panel(const uint8_t* w, size_t ws, int rows, int64_t nblk, uint8_t* panel) {
  using P = KPanel<F>;
  KInts k[kPanelRows];
  for (int r = rows; r < kPanelRows; ++r) {
    std::memset(k[r].u, 0, sizeof k[r].u);
    for (int g = 0; g < 16; ++g) k[r].sc[g] = k[r].mn[g] = 0;
  }
  for (int64_t blk = 0; blk < nblk; ++blk) {
    uint8_t* rec = panel + blk * P::kRec;
    for (int r = 0; r < rows; ++r) F::unpack_int(w + r * ws + blk * F::kBytes, k[r]);
    for (int c = 0; c < 8; ++c) {
      __m256i q[8];
      transpose_8x32(k[0].u + 32 * c, sizeof(KInts), q);
      for (int j = 0; j < 8; ++j) _mm256_store_si256(reinterpret_cast<__m256i*>(rec + 32 * (8 * c + j)), q[j]);
    }
    auto* sc = reinterpret_cast<int16_t*>(rec + P::kScales);
    for (int g = 0; g < P::kGroups; ++g) {
      for (int r = 0; r < kPanelRows; ++r) sc[16 * g + 2 * r] = sc[16 * g + 2 * r + 1] = k[r].sc[g];
    }
    if constexpr (P::kCoefs) {
      auto* cf = reinterpret_cast<int16_t*>(rec + P::kCoef);
      for (int i = 0; i < 8; ++i) {
        for (int r = 0; r < kPanelRows; ++r) {
          cf[16 * i + 2 * r] = coef<F>(k[r], 2 * i);
          cf[16 * i + 2 * r + 1] = coef<F>(k[r], 2 * i + 1);
        }
      }
    }
    auto* d = reinterpret_cast<float*>(rec + P::kD);
    for (int r = 0; r < kPanelRows; ++r) {
      d[r] = r < rows ? k[r].d : 0.0f;
      d[8 + r] = r < rows ? (F::kMin ? k[r].dmin : k[r].d) : 0.0f;
    }
  }
}

// Rows of one panel against T tokens (activation rows xs bytes apart), y[t * ldy + r].
template <class F, int T>
void micro(const uint8_t* panel, const uint8_t* x, size_t xs, int64_t nblk, float* y, int64_t ldy, int rows) {
  using P = KPanel<F>;
  __m256 acc[T];
  for (int t = 0; t < T; ++t) acc[t] = _mm256_setzero_ps();
  for (int64_t b = 0; b < nblk; ++b, panel += P::kRec) {
    const auto* xb = reinterpret_cast<const BlockQ8_K*>(x) + b;
    const auto blk = [&](int t) -> const BlockQ8_K& {
      return *reinterpret_cast<const BlockQ8_K*>(reinterpret_cast<const uint8_t*>(xb) + t * xs);
    };
    __m256i s[T];
    for (int t = 0; t < T; ++t) s[t] = _mm256_setzero_si256();
    for (int g = 0; g < P::kGroups; ++g) {
      __m256i q[P::kQuads];
      for (int j = 0; j < P::kQuads; ++j) q[j] = load_q(panel + 32 * (P::kQuads * g + j));
      const __m256i sc = load_q(panel + P::kScales + 32 * g);
#pragma GCC unroll 8
      for (int t = 0; t < T; ++t) {
        const int8_t* xq = blk(t).qs + F::kGroup * g;
#pragma GCC unroll 8
        for (int j0 = 0; j0 < P::kQuads; j0 += P::kFlush) {
          __m256i a16 = _mm256_maddubs_epi16(q[j0], bcast4(xq + 4 * j0));
#pragma GCC unroll 8
          for (int j = j0 + 1; j < j0 + P::kFlush; ++j) {
            a16 = _mm256_add_epi16(a16, _mm256_maddubs_epi16(q[j], bcast4(xq + 4 * j)));
          }
          s[t] = _mm256_add_epi32(s[t], _mm256_madd_epi16(a16, sc));
        }
      }
    }
    const __m256 d = _mm256_load_ps(reinterpret_cast<const float*>(panel + P::kD));
    const __m256 dmin = _mm256_load_ps(reinterpret_cast<const float*>(panel + P::kD + 32));
    for (int t = 0; t < T; ++t) {
      const BlockQ8_K& a = blk(t);
      const __m256 dx = _mm256_set1_ps(a.d);
      if constexpr (P::kCoefs) {
        __m256i m = _mm256_madd_epi16(load_q(panel + P::kCoef), bcast4(a.bsums));
        for (int i = 1; i < 8; ++i) {
          m = _mm256_add_epi32(m, _mm256_madd_epi16(load_q(panel + P::kCoef + 32 * i), bcast4(a.bsums + 2 * i)));
        }
        if constexpr (F::kMin) {
          acc[t] = _mm256_fnmadd_ps(_mm256_cvtepi32_ps(m), _mm256_mul_ps(dmin, dx), acc[t]);
        } else {
          s[t] = _mm256_sub_epi32(s[t], m);
        }
      }
      acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s[t]), _mm256_mul_ps(d, dx), acc[t]);
    }
  }
  store_panel(acc, y, ldy, rows);
}

// Tokens per step: a 32-element group's 8 quads leave registers for 6 tokens' sums, a 16-element group's 4 for 8.
template <class F>
constexpr int kTokens = KPanel<F>::kQuads > 4 ? 6 : 8;

// Below this many tokens building the panels does not pay: loop over vec_dot instead (docs/perf-log/prefill.md).
constexpr int kMinTokens = 4;

template <class F>
void gemm_k(const uint8_t* w, size_t ws, int64_t n_rows, const uint8_t* x, size_t xs, int64_t n_tok, int64_t k,
            float* y, int64_t ldy) {
  const int64_t nblk = k / F::kBlock;
  if (n_tok < kMinTokens) return vec_dot_rows(quant_vec_dot(F::kType), w, ws, n_rows, x, xs, n_tok, k, y, ldy);
  constexpr int kT = kTokens<F>;
  panel_passes<kT>(
      n_rows, n_tok, KPanel<F>::kRec * static_cast<size_t>(nblk),
      [&](int64_t r, int rows, uint8_t* panel) { build_panel<F>(w + r * ws, ws, rows, nblk, panel); },
      [&](int n, int64_t t0, const uint8_t* panel, int64_t r, int rows) {
        with_tokens<kT>(n, [&](auto c) { micro<F, c()>(panel, x + t0 * xs, xs, nblk, y + t0 * ldy + r, ldy, rows); });
      });
}

}  // namespace

GemmFn kquant_gemm(GgmlType weight) {
  switch (weight) {
    case GgmlType::Q2_K:
      return &gemm_k<GQ2_K>;
    case GgmlType::Q3_K:
      return &gemm_k<GQ3_K>;
    case GgmlType::Q4_K:
      return &gemm_k<GQ4_K>;
    case GgmlType::Q5_K:
      return &gemm_k<GQ5_K>;
    case GgmlType::Q6_K:
      return &gemm_k<GQ6_K>;
    default:
      return nullptr;
  }
}

}  // namespace tessera::kernels::avx2
