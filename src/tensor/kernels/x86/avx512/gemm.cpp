// AVX-512 path: gemm for the quantized formats. Each call repacks weights (unless packed at load: kPacked)
// into 16-row panels (one 32-bit
// lane per row holding 4 consecutive signed levels, so one vpdpbusd advances 16 rows by 4 elements) and the
// activations into token groups (levels + 128, unsigned); a panel group then stays in registers while it meets
// every token of a group. The +128 is taken back per row and group with a precomputed -128 * sum(levels).
#include <algorithm>

#include "tensor/kernels/x86/avx512/common.h"
#include "tensor/quant_blocks.h"

namespace tessera::kernels::avx512 {
namespace {

constexpr int kPanelRows = 16;
constexpr int kPanelsPerPass = 4;  // panels built together, so a token group is read once per 64 rows

inline void store256(void* p, __m256i v) { _mm256_storeu_si256(static_cast<__m256i*>(p), v); }

#include "tensor/kernels/x86/unpack.inl"

// ---- panels ----

// One panel group record: quads [kGroup/4][16 rows][4 bytes], then per row: int32 -128 * sum(levels), f32 dsc,
// and f32 dmm when the format has mins.
template <class F>
struct PanelGeom {
  static constexpr int kGroupsPerBlock = F::kBlock / F::kGroup;
  static constexpr size_t kQuadBytes = static_cast<size_t>(F::kGroup) * kPanelRows;
  static constexpr size_t kRec = kQuadBytes + 128 + (F::kMin ? 64 : 0);
};

// 16 rows x 32 bytes (row r at src + r * stride) -> out[j], lane r = bytes 4j..4j+3 of row r. Rows r and r + 8
// share a register, so each 256-bit half is an independent 8x8 dword transpose.
inline void transpose_16x32(const int8_t* src, size_t stride, __m512i (&out)[8]) {
  __m512i z[8];
  for (int i = 0; i < 8; ++i) z[i] = load2x256(src + i * stride, src + (i + 8) * stride);
  const __m512i t0 = _mm512_unpacklo_epi32(z[0], z[1]), t1 = _mm512_unpackhi_epi32(z[0], z[1]);
  const __m512i t2 = _mm512_unpacklo_epi32(z[2], z[3]), t3 = _mm512_unpackhi_epi32(z[2], z[3]);
  const __m512i t4 = _mm512_unpacklo_epi32(z[4], z[5]), t5 = _mm512_unpackhi_epi32(z[4], z[5]);
  const __m512i t6 = _mm512_unpacklo_epi32(z[6], z[7]), t7 = _mm512_unpackhi_epi32(z[6], z[7]);
  const __m512i u[4] = {_mm512_unpacklo_epi64(t0, t2), _mm512_unpackhi_epi64(t0, t2), _mm512_unpacklo_epi64(t1, t3),
                        _mm512_unpackhi_epi64(t1, t3)};
  const __m512i v[4] = {_mm512_unpacklo_epi64(t4, t6), _mm512_unpackhi_epi64(t4, t6), _mm512_unpacklo_epi64(t5, t7),
                        _mm512_unpackhi_epi64(t5, t7)};
  // u[c] has rows 0-3 / 8-11 of dwords c (128-bit lanes 0, 2) and c + 4 (lanes 1, 3); v[c] rows 4-7 / 12-15.
  const __m512i first = _mm512_set_epi64(13, 12, 5, 4, 9, 8, 1, 0);
  const __m512i second = _mm512_set_epi64(15, 14, 7, 6, 11, 10, 3, 2);
  for (int c = 0; c < 4; ++c) {
    out[c] = _mm512_permutex2var_epi64(u[c], first, v[c]);
    out[c + 4] = _mm512_permutex2var_epi64(u[c], second, v[c]);
  }
}

// Repacks rows [0, rows) (rows <= 16; the rest of the panel is zero) of nblk weight blocks.
template <class F>
void build_panel(const uint8_t* w, size_t ws, int rows, int64_t nblk, uint8_t* panel) {
  using G = PanelGeom<F>;
  constexpr int kNg = G::kGroupsPerBlock;
  alignas(64) int8_t lv[kPanelRows][F::kBlock];
  float dsc[kPanelRows][kNg];
  float dmm[kPanelRows][kNg];
  const __m512i u128 = _mm512_set1_epi8(-128);
  for (int r = rows; r < kPanelRows; ++r) {
    std::memset(lv[r], 0, sizeof lv[r]);
    for (int g = 0; g < kNg; ++g) dsc[r][g] = dmm[r][g] = 0.0f;
  }
  for (int64_t blk = 0; blk < nblk; ++blk) {
    for (int r = 0; r < rows; ++r) F::unpack(w + r * ws + blk * F::kBytes, lv[r], dsc[r], dmm[r]);
    for (int c = 0; c < F::kBlock / 32; ++c) {
      __m512i q[8];
      transpose_16x32(&lv[0][32 * c], F::kBlock, q);
      constexpr int kQuads = F::kGroup / 4;
      for (int sub = 0; sub < 8 / kQuads; ++sub) {
        const int g = c * (8 / kQuads) + sub;
        uint8_t* rec = panel + (blk * kNg + g) * G::kRec;
        __m512i sum = _mm512_setzero_si512();
        for (int j = 0; j < kQuads; ++j) {
          _mm512_store_si512(rec + 64 * j, q[sub * kQuads + j]);
          sum = _mm512_dpbusd_epi32(sum, u128, q[sub * kQuads + j]);
        }
        _mm512_store_si512(rec + G::kQuadBytes, _mm512_sub_epi32(_mm512_setzero_si512(), sum));
        float* fd = reinterpret_cast<float*>(rec + G::kQuadBytes + 64);
        for (int r = 0; r < kPanelRows; ++r) fd[r] = dsc[r][g];
        if constexpr (F::kMin) {
          for (int r = 0; r < kPanelRows; ++r) fd[16 + r] = dmm[r][g];
        }
      }
    }
  }
}

// ---- activations ----

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
  const __m512i flip = _mm512_set1_epi8(-128);
  for (int t = 0; t < n; ++t) {
    const uint8_t* xt = x + t * xs;
    for (int64_t b = 0; b < nblk; ++b) {
      uint8_t* r = out + b * rec;
      uint8_t* qs = r + F::kBlock * t;
      float* fx = reinterpret_cast<float*>(r + F::kBlock * n);
      if constexpr (F::kSuper) {
        const auto& a = reinterpret_cast<const BlockQ8_K*>(xt)[b];
        for (int j = 0; j < 4; ++j) _mm512_storeu_si512(qs + 64 * j, _mm512_xor_si512(load512(a.qs + 64 * j), flip));
        fx[t] = a.d;
        if constexpr (T::kAux == 16) {
          for (int g = 0; g < 16; ++g) fx[n * (1 + g) + t] = static_cast<float>(a.bsums[g]);
        } else if constexpr (T::kAux == 8) {
          for (int g = 0; g < 8; ++g) fx[n * (1 + g) + t] = static_cast<float>(a.bsums[2 * g] + a.bsums[2 * g + 1]);
        }
      } else {
        constexpr int kAct = F::kMin ? 36 : 34;  // Q8_1 or Q8_0
        const uint8_t* a = xt + b * kAct;
        store256(qs, _mm256_xor_si256(load256(a + kAct - 32), _mm512_castsi512_si256(flip)));
        fx[t] = half_at(a);
        if constexpr (F::kMin) fx[n + t] = half_at(a + 2);
      }
    }
  }
}

// ---- micro-kernels: one 16-row panel x T tokens over all of k ----

inline __m512i bcast4(const uint8_t* p) { return _mm512_set1_epi32(static_cast<int>(load_u32(p))); }

// Bytes of the next row pass to pull into L2 while a micro-kernel computes on panels already there.
struct NextPass {
  const uint8_t* begin = nullptr;
  size_t bytes = 0;
};

// The T accumulator chains are interleaved (quad-outer, token-inner) so the vpdpbusd latency is hidden. Panels
// packed at load come from memory, not from a scratch just written: kStream prefetches ahead of them, or, given a
// next pass, spreads its prefetches over this call.
template <class F, int T, bool kStream>
void micro(const uint8_t* panel, const uint8_t* tok, int64_t nblk, float* y, int64_t ldy, __mmask16 rows,
           NextPass next) {
  using G = PanelGeom<F>;
  constexpr int kNg = G::kGroupsPerBlock;
  constexpr int kQuads = F::kGroup / 4;
  constexpr size_t kTokRec = TokGeom<F>::kPerToken * T;
  __m512 acc[T];
#pragma GCC unroll 16
  for (int t = 0; t < T; ++t) acc[t] = _mm512_setzero_ps();
  // next.bytes spread evenly over the records: each record adds next.bytes to the budget, a line costs 64 * records.
  const size_t line_cost = 64 * static_cast<size_t>(nblk) * kNg;
  size_t budget = 0;
  const char* fetch = reinterpret_cast<const char*>(next.begin);
  for (int64_t b = 0; b < nblk; ++b, tok += kTokRec) {
    const float* fx = reinterpret_cast<const float*>(tok + F::kBlock * T);
    __m512 part[T];  // this block's sum before the activation scale (K-quants)
    if constexpr (F::kSuper) {
#pragma GCC unroll 16
      for (int t = 0; t < T; ++t) part[t] = _mm512_setzero_ps();
    }
    for (int g = 0; g < kNg; ++g, panel += G::kRec) {
      if constexpr (kStream) {
        if (next.begin == nullptr) {
          prefetch_stream<G::kRec - 64>(panel);
        } else {
          for (budget += next.bytes; budget >= line_cost; budget -= line_cost, fetch += 64) {
            _mm_prefetch(fetch, _MM_HINT_T1);
          }
        }
      }
      const __m512i corr = _mm512_load_si512(panel + G::kQuadBytes);
      __m512i s[T];
#pragma GCC unroll 16
      for (int t = 0; t < T; ++t) s[t] = corr;
#pragma GCC unroll 8
      for (int j = 0; j < kQuads; ++j) {
        const __m512i wq = _mm512_load_si512(panel + 64 * j);
#pragma GCC unroll 16
        for (int t = 0; t < T; ++t) {
          s[t] = _mm512_dpbusd_epi32(s[t], bcast4(tok + F::kBlock * t + F::kGroup * g + 4 * j), wq);
        }
      }
      const __m512 dsc = _mm512_load_ps(panel + G::kQuadBytes + 64);
#pragma GCC unroll 16
      for (int t = 0; t < T; ++t) {
        if constexpr (F::kSuper) {
          part[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s[t]), dsc, part[t]);
          if constexpr (F::kMin) {
            const __m512 dmm = _mm512_load_ps(panel + G::kQuadBytes + 128);
            part[t] = _mm512_fnmadd_ps(dmm, _mm512_set1_ps(fx[T * (1 + g) + t]), part[t]);
          }
        } else {
          acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s[t]), _mm512_mul_ps(dsc, _mm512_set1_ps(fx[t])), acc[t]);
          if constexpr (F::kMin) {
            const __m512 dmm = _mm512_load_ps(panel + G::kQuadBytes + 128);
            acc[t] = _mm512_fnmadd_ps(dmm, _mm512_set1_ps(fx[T + t]), acc[t]);
          }
        }
      }
    }
    if constexpr (F::kSuper) {
#pragma GCC unroll 16
      for (int t = 0; t < T; ++t) acc[t] = _mm512_fmadd_ps(part[t], _mm512_set1_ps(fx[t]), acc[t]);
    }
  }
#pragma GCC unroll 16
  for (int t = 0; t < T; ++t) _mm512_mask_storeu_ps(y + t * ldy, rows, acc[t]);
}

template <class F, int N, bool kStream>
void micro_n(int n, const uint8_t* panel, const uint8_t* tok, int64_t nblk, float* y, int64_t ldy, __mmask16 rows,
             NextPass next) {
  if constexpr (N > 0) {
    if (n == N) return micro<F, N, kStream>(panel, tok, nblk, y, ldy, rows, next);
    micro_n<F, N - 1, kStream>(n, panel, tok, nblk, y, ldy, rows, next);
  }
}

// Below this many tokens the repack does not pay (measured): loop over vec_dot instead. K-quant blocks cost more
// to unpack and their vec_dot is faster per byte.
template <class F>
constexpr int kMinTokens = F::kSuper ? 4 : 2;

// K-quants (those with kquant_gemm_batch) from 2 up to this many tokens: unpack each block once and dot it with
// every token, no repack. Above it the panels' per-call repack is amortized and their tiles win
// (docs/perf-log/prefill.md, k-quant small batch). A server's decode step with a new prompt joining is such a size.
constexpr int kBatchMaxTokens = 16;
// Weights packed at load (--repack) have no per-call repack: their tiles beat the small-batch kernels from here.
constexpr int kPackedFromTokens = 9;

template <class F>
constexpr int kTokGroup = F::kSuper ? 12 : 10;

// All tokens in groups of kTokGroup, group after group (each group's records are contiguous).
template <class F>
void prep_all_tokens(const uint8_t* x, size_t xs, int64_t n_tok, int64_t nblk, uint8_t* out) {
  constexpr int kT = kTokGroup<F>;
  const size_t tok_bytes = TokGeom<F>::kPerToken * static_cast<size_t>(nblk);
  for (int64_t t0 = 0; t0 < n_tok; t0 += kT) {
    const int n = static_cast<int>(n_tok - t0 < kT ? n_tok - t0 : kT);
    prep_tokens<F>(x + t0 * xs, xs, n, nblk, out + t0 * tok_bytes);
  }
}

// Rows [0, n_rows) into consecutive panels of panel_bytes each (the last one zero-padded).
template <class F>
void pack_panels(const uint8_t* w, size_t ws, int64_t n_rows, int64_t nblk, uint8_t* out) {
  const size_t panel_bytes = PanelGeom<F>::kRec * PanelGeom<F>::kGroupsPerBlock * static_cast<size_t>(nblk);
  for (int64_t r = 0; r < n_rows; r += kPanelRows) {
    const int64_t left = n_rows - r;
    build_panel<F>(w + r * ws, ws, static_cast<int>(left < kPanelRows ? left : kPanelRows), nblk,
                   out + (r / kPanelRows) * panel_bytes);
  }
}

// y for rows [0, n_rows) of consecutive panels against every token group; kPanelsPerPass panels at a time meet a
// token group, so the group is read once per 64 rows while the panels stay in L1/L2. Panels packed at load
// (kStream) come from memory: the first token group streams its pass, and every later group pulls a share of the
// next pass into L2. Streaming each pass with the first group alone asks for more than one core's bandwidth while
// the others ask for none, which slowed short prompts the most (docs/perf-log/prefill.md).
template <class F, bool kStream>
void panels_times_tokens(const uint8_t* panels, size_t panel_bytes, int64_t n_rows, const uint8_t* tok,
                         size_t tok_bytes, int64_t n_tok, int64_t nblk, float* y, int64_t ldy) {
  constexpr int kT = kTokGroup<F>;
  constexpr int64_t kPassRows = kPanelRows * kPanelsPerPass;
  const int64_t n_groups = (n_tok + kT - 1) / kT;
  for (int64_t r0 = 0; r0 < n_rows; r0 += kPassRows) {
    const int np = static_cast<int>(std::min<int64_t>(kPanelsPerPass, (n_rows - r0 + kPanelRows - 1) / kPanelRows));
    const uint8_t* pass = panels + (r0 / kPanelRows) * panel_bytes;
    const int64_t next_rows = std::min<int64_t>(kPassRows, n_rows - r0 - kPassRows);
    const size_t next_bytes =
        next_rows > 0 ? static_cast<size_t>((next_rows + kPanelRows - 1) / kPanelRows) * panel_bytes : 0;
    // With one later group (up to 24 tokens) its compute is too short to hide a whole pass: stream as the first.
    const bool spread = kStream && n_groups > 2;
    const size_t share = spread ? (next_bytes / static_cast<size_t>((n_groups - 1) * np) + 63) / 64 * 64 : 0;
    for (int64_t t0 = 0, gi = 0; t0 < n_tok; t0 += kT, ++gi) {
      const int n = static_cast<int>(n_tok - t0 < kT ? n_tok - t0 : kT);
      for (int p = 0; p < np; ++p) {
        const int64_t left = n_rows - r0 - p * kPanelRows;
        const auto rows = static_cast<__mmask16>(left >= kPanelRows ? 0xffff : (1u << left) - 1);
        NextPass next;
        if (spread && gi > 0) {
          // Every later group prefetches (nothing once the next pass is all asked for): its own panels are in L2.
          const size_t from = std::min(next_bytes, static_cast<size_t>((gi - 1) * np + p) * share);
          next = {pass + static_cast<size_t>(np) * panel_bytes + from, std::min(share, next_bytes - from)};
        }
        micro_n<F, kT, kStream>(n, pass + p * panel_bytes, tok + t0 * tok_bytes, nblk,
                                y + t0 * ldy + r0 + p * kPanelRows, ldy, rows, next);
      }
    }
  }
}

template <class F>
void gemm_quant(const uint8_t* w, size_t ws, int64_t n_rows, const uint8_t* x, size_t xs, int64_t n_tok, int64_t k,
                float* y, int64_t ldy) {
  const int64_t nblk = k / F::kBlock;
  if constexpr (F::kSuper) {
    if (n_tok >= 2 && n_tok <= kBatchMaxTokens) {
      if (const GemmFn batch = kquant_gemm_batch(F::kType)) return batch(w, ws, n_rows, x, xs, n_tok, k, y, ldy);
    }
  }
  if (n_tok < kMinTokens<F>) {
    // One token (decode): the multi-row gemv. More tokens loop over vec_dot with rows outer, so each row is
    // streamed from memory once.
    const GemvFn gemv = F::kSuper ? kquant_gemv(F::kType) : legacy_gemv(F::kType);
    if (n_tok == 1 && gemv != nullptr) return gemv(w, ws, n_rows, x, k, y);
    const VecDotFn dot = F::kSuper ? kquant_vec_dot(F::kType) : legacy_vec_dot(F::kType);
    for (int64_t r = 0; r < n_rows; ++r) {
      for (int64_t t = 0; t < n_tok; ++t) y[t * ldy + r] = dot(w + r * ws, x + t * xs, k);
    }
    return;
  }
  const size_t tok_bytes = TokGeom<F>::kPerToken * static_cast<size_t>(nblk);  // per token
  Scratch tok(tok_bytes * static_cast<size_t>(n_tok));
  prep_all_tokens<F>(x, xs, n_tok, nblk, tok.get());
  const size_t panel_bytes = PanelGeom<F>::kRec * PanelGeom<F>::kGroupsPerBlock * static_cast<size_t>(nblk);
  Scratch panels(panel_bytes * kPanelsPerPass);
  for (int64_t r0 = 0; r0 < n_rows; r0 += kPanelRows * kPanelsPerPass) {
    const int64_t rows = std::min<int64_t>(n_rows - r0, kPanelRows * kPanelsPerPass);
    pack_panels<F>(w + r0 * ws, ws, rows, nblk, panels.get());
    panels_times_tokens<F, false>(panels.get(), panel_bytes, rows, tok.get(), tok_bytes, n_tok, nblk, y + r0, ldy);
  }
}

// ---- weights packed at load ----

template <class F>
size_t packed_group_bytes(int64_t k) {
  return PanelGeom<F>::kRec * PanelGeom<F>::kGroupsPerBlock * static_cast<size_t>(k / F::kBlock);
}

template <class F>
void pack_weights(const uint8_t* w, size_t ws, int64_t n_rows, int64_t k, uint8_t* out) {
  pack_panels<F>(w, ws, n_rows, k / F::kBlock, out);
}

template <class F>
void packed_gemm(const uint8_t* p, int64_t n_rows, const uint8_t* x, size_t xs, int64_t n_tok, int64_t k, float* y,
                 int64_t ldy) {
  const int64_t nblk = k / F::kBlock;
  const size_t tok_bytes = TokGeom<F>::kPerToken * static_cast<size_t>(nblk);
  Scratch tok(tok_bytes * static_cast<size_t>(n_tok));
  prep_all_tokens<F>(x, xs, n_tok, nblk, tok.get());
  panels_times_tokens<F, true>(p, packed_group_bytes<F>(k), n_rows, tok.get(), tok_bytes, n_tok, nblk, y, ldy);
}

// With the panels ready, the repack's cost is gone. But a packed panel holds 2-2.5x the bytes of the weights, so
// for a few tokens, where reading the weights sets the pace, the small-batch kernels of Q4_K/Q5_K/Q6_K stay
// faster below kPackedFromTokens (docs/perf-log/prefill.md, repack).
template <class F>
constexpr int kPackedMinTokens =
    F::kType == GgmlType::Q4_K || F::kType == GgmlType::Q5_K || F::kType == GgmlType::Q6_K ? kPackedFromTokens
                                                                                           : kMinTokens<F>;

template <class F>
constexpr PackedGemm kPacked{kPanelRows, kPackedMinTokens<F>, &packed_group_bytes<F>, &pack_weights<F>,
                             &packed_gemm<F>};

}  // namespace

namespace {

template <class F>
struct Format {
  using type = F;
};

// Calls fn(Format<F>{}) with the unpack format of a weight type; a null result for types without one.
template <class Fn>
auto with_format(GgmlType weight, Fn&& fn) -> decltype(fn(Format<GQ4_0>{})) {
  switch (weight) {
    case GgmlType::Q4_0:
      return fn(Format<GQ4_0>{});
    case GgmlType::Q4_1:
      return fn(Format<GQ4_1>{});
    case GgmlType::Q5_0:
      return fn(Format<GQ5_0>{});
    case GgmlType::Q5_1:
      return fn(Format<GQ5_1>{});
    case GgmlType::Q8_0:
      return fn(Format<GQ8_0>{});
    case GgmlType::IQ4_NL:
      return fn(Format<GIQ4_NL>{});
    case GgmlType::Q2_K:
      return fn(Format<GQ2_K>{});
    case GgmlType::Q3_K:
      return fn(Format<GQ3_K>{});
    case GgmlType::Q4_K:
      return fn(Format<GQ4_K>{});
    case GgmlType::Q5_K:
      return fn(Format<GQ5_K>{});
    case GgmlType::Q6_K:
      return fn(Format<GQ6_K>{});
    case GgmlType::IQ4_XS:
      return fn(Format<GIQ4_XS>{});
    default:
      return nullptr;
  }
}

}  // namespace

const PackedGemm* quant_packed(GgmlType weight) {
  return with_format(weight, [](auto f) -> const PackedGemm* { return &kPacked<typename decltype(f)::type>; });
}

GemmFn quant_gemm(GgmlType weight) {
  return with_format(weight, [](auto f) -> GemmFn { return &gemm_quant<typename decltype(f)::type>; });
}

}  // namespace tessera::kernels::avx512
