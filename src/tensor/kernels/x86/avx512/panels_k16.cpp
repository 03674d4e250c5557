// AVX-512 path: the K-quants with a scale per 16 elements (Q2_K, Q3_K, Q6_K) as 16-row panels written at
// load in place of the rows' copy, as x86/avx512/panels_q4k.cpp does for Q4_K. Their row kernels spend 10-15
// instructions per cache line on bit-plane shuffles and a horizontal sum per row; here each vector of a panel takes
// a load and a few logic ops to give vpdpbusd operands of 16 rows, so decode keeps up with the memory.
#include "tensor/kernels/k16_panel_rows.h"
#include "tensor/kernels/panel_loops.h"
#include "tensor/kernels/x86/avx512/common.h"
#include "tensor/kernels/x86/k16_unpack.h"
#include "tensor/quant_blocks.h"

namespace tessera::kernels::avx512 {
namespace {

using quant::BlockQ2_K;
using quant::BlockQ3_K;
using quant::BlockQ6_K;
using quant::BlockQ8_K;

constexpr int kRows = kPanelRowCount;

// A format's levels come in units of kVectors 64-byte vectors holding kGroupsPerUnit groups of 16 elements of the
// 16 rows. The levels of a group go to four vpdpbusd operands: operand c holds elements 4c..4c+3 of each row (byte
// 4r + i: element 4c + i of row r). Levels are stored unsigned (level + kOffset); a group's dot starts from
// -kOffset x its activation sum. Scales are signed bytes, 16 per group (byte r: row r's), except for Q2_K (kMins),
// whose scale and min share a byte as in its rows, laid out in pairs of groups: byte 2r + h of pair p holds group
// 2p + h's, so one zero extension gives the (min, min) words vpdpwssd pairs with the activations' group sums.
//
// The units' bit layouts: k16_panel_rows.h. Q6_K, one group per unit of 3 vectors.
struct Q6Format : K16Base<K16Format::Q6_K> {
  using Block = BlockQ6_K;
  [[gnu::always_inline]] static void unpack(const __m512i* v, __m512i* lv) { x86::K16Unpack<Width>::q6(v, lv); }
};

// Q3_K, two groups per unit of 3 vectors. 16-bit shifts carry bits across bytes only into positions the masks drop.
struct Q3Format : K16Base<K16Format::Q3_K> {
  using Block = BlockQ3_K;
  [[gnu::always_inline]] static void unpack(const __m512i* v, __m512i* lv) { x86::K16Unpack<Width>::q3(v, lv); }
};

// Q2_K, one group per unit of 1 vector.
struct Q2Format : K16Base<K16Format::Q2_K> {
  using Block = BlockQ2_K;
  [[gnu::always_inline]] static void unpack(const __m512i* v, __m512i* lv) { x86::K16Unpack<Width>::q2(v, lv); }
};

// One panel block: 16 rows x 256 elements, in four quarters of 64 elements (two pairs of groups), each the pairs'
// scales (one line) and then their units, and last the rows' d (and dmin) as fp16 in one line: read front to back,
// a line of scales every 0.3-0.8 KB, so the hardware prefetcher keeps up with the stream (docs/perf-log/panels.md).
template <class F>
struct Layout {
  static constexpr size_t kUnitBytes = 64 * F::kVectors;
  static constexpr int kPairUnits = 2 / F::kGroupsPerUnit;
  static constexpr size_t kPairBytes = kPairUnits * kUnitBytes;
  static constexpr size_t kQuarterBytes = 64 + 2 * kPairBytes;
  // Pair p's scales (32 bytes: 16 per group, or Q2_K's pairs of scale-and-min bytes).
  static constexpr size_t scales(int p) { return p / 2 * kQuarterBytes + 32 * (p % 2); }
  // Unit m (the m-th of the block's 16 / kGroupsPerUnit, in element order).
  static constexpr size_t unit(int m) {
    const int p = m / kPairUnits;
    return p / 2 * kQuarterBytes + 64 + p % 2 * kPairBytes + m % kPairUnits * kUnitBytes;
  }
  static constexpr size_t kDOffset = 4 * kQuarterBytes;
  static constexpr size_t kDminOffset = kDOffset + 2 * kRows;
  static constexpr size_t kBlockBytes = kDOffset + 64;
  static_assert(kBlockBytes == (F::kMins ? 1344 : F::kOffset == 4 ? 1856 : 3392));  // Q2_K: the rows' bytes
};

template <class F>
size_t group_bytes(int64_t k) {
  return static_cast<size_t>(k / quant::kQKK) * Layout<F>::kBlockBytes;
}

// Rows past n_rows (the last panel of a matrix whose row count is not a multiple of 16) are zero: d = 0.
template <class F>
void pack(const uint8_t* w, size_t w_stride, int64_t n_rows, int64_t k, uint8_t* out) {
  using L = Layout<F>;
  constexpr int kUnitElements = 16 * F::kGroupsPerUnit;
  const int64_t nb = k / quant::kQKK;
  for (int64_t p = 0; p * kRows < n_rows; ++p) {
    for (int64_t b = 0; b < nb; ++b) {
      uint8_t* blk = out + static_cast<size_t>(p * nb + b) * L::kBlockBytes;
      std::memset(blk, 0, L::kBlockBytes);
      for (int r = 0; r < kRows && p * kRows + r < n_rows; ++r) {
        const auto& src =
            reinterpret_cast<const typename F::Block*>(w + static_cast<size_t>(p * kRows + r) * w_stride)[b];
        uint8_t u[quant::kQKK];
        uint8_t scales[16];
        k16_row(F::kFormat, &src, u, scales);
        for (int m = 0; m < quant::kQKK / kUnitElements; ++m) {
          k16_place(F::kFormat, u + kUnitElements * m, r, 64, blk + L::unit(m));
        }
        for (int j = 0; j < 16; ++j) {
          blk[L::scales(j / 2) + (F::kMins ? 2 * r + j % 2 : 16 * (j % 2) + r)] = scales[j];
        }
        std::memcpy(blk + L::kDOffset + 2 * r, &src.d, 2);
        if constexpr (F::kMins) std::memcpy(blk + L::kDminOffset + 2 * r, &src.dmin, 2);
      }
    }
  }
}

// The activation side of one Q8_K block: each group's sum times the levels' offset, negated (a group's dot starts
// from it), and d.
struct PanelAct {
  int32_t neg_offset[16];
  float d;
};

template <class F>
PanelAct panel_act(const BlockQ8_K& x) {
  PanelAct a;
  const __m512i sums = _mm512_cvtepi16_epi32(load256(x.bsums));
  _mm512_storeu_si512(a.neg_offset, _mm512_mullo_epi32(sums, _mm512_set1_epi32(-F::kOffset)));
  a.d = x.d;
  return a;
}

// T tokens (T <= kChunk) against one panel over all nb blocks; y[t * ldy + r] for the panel's rows r < n_valid.
template <class F, int T, Reach R>
void panel_tokens(const uint8_t* panel, int64_t nb, const uint8_t* x, size_t xs, const PanelAct* act, float* y,
                  int64_t ldy, int n_valid) {
  using L = Layout<F>;
  constexpr int G = F::kGroupsPerUnit;
  __m512 acc[T];
#pragma GCC unroll 4
  for (int t = 0; t < T; ++t) acc[t] = _mm512_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* blk = panel + static_cast<size_t>(b) * L::kBlockBytes;
    prefetch_stream<0, kPrefetchFarBytes, R>(blk + L::kDOffset);
    const int8_t* xq[T];
    __m512 blk_sum[T];
#pragma GCC unroll 4
    for (int t = 0; t < T; ++t) {
      xq[t] = reinterpret_cast<const BlockQ8_K*>(x + t * xs)[b].qs;
      blk_sum[t] = _mm512_setzero_ps();
    }
    __m512i min_sum[T];  // kMins: sum over groups of min x activation sum, per row
#pragma GCC unroll 4
    for (int t = 0; t < T; ++t) min_sum[t] = _mm512_setzero_si512();
    // Pairs of groups: 8 operands, and Q2_K's scales and mins come a pair at a time.
    for (int p = 0; p < 8; ++p) {
      if (p % 2 == 0) prefetch_stream<0, kPrefetchFarBytes, R>(blk + L::scales(p));
      __m512i lv[8];
      for (int h = 0; h < 2 / G; ++h) {
        const uint8_t* unit = blk + L::unit(2 / G * p + h);
        prefetch_stream<L::kUnitBytes - 64, kPrefetchFarBytes, R>(unit);
        __m512i v[F::kVectors];
        for (int k = 0; k < F::kVectors; ++k) {
          v[k] = _mm512_load_si512(unit + 64 * k);
          in_register(v[k]);
        }
        F::unpack(v, lv + 4 * G * h);
      }
      // The scales as f32: a convert and an FMA per token rather than vpmulld's two uops; a group's exact dot
      // (|dot| <= 2^16) times its scale stays exact.
      __m512 sc[2];
      __m512i mins;
      if constexpr (F::kMins) {
        const __m512i both = _mm512_cvtepu8_epi16(load256(blk + L::scales(p)));
        const __m512i low = _mm512_set1_epi32(0x0f);
        sc[0] = _mm512_cvtepi32_ps(_mm512_and_si512(both, low));
        sc[1] = _mm512_cvtepi32_ps(_mm512_and_si512(_mm512_srli_epi32(both, 16), low));
        mins = _mm512_srli_epi16(both, 4);
      } else {
        for (int h = 0; h < 2; ++h) {
          sc[h] = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(load128(blk + L::scales(p) + 16 * h)));
        }
      }
#pragma GCC unroll 4
      for (int t = 0; t < T; ++t) {
        for (int h = 0; h < 2; ++h) {
          const int j = 2 * p + h;
          __m512i dot = F::kOffset != 0 ? _mm512_set1_epi32(act[t * nb + b].neg_offset[j]) : _mm512_setzero_si512();
          for (int c = 0; c < 4; ++c) dot = dpbusd_bcast(dot, lv[4 * h + c], xq[t] + 16 * j + 4 * c);
          blk_sum[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot), sc[h], blk_sum[t]);
        }
        if constexpr (F::kMins) {
          const auto* sums = reinterpret_cast<const BlockQ8_K*>(x + t * xs)[b].bsums;
          min_sum[t] =
              _mm512_dpwssd_epi32(min_sum[t], mins, _mm512_set1_epi32(static_cast<int>(load_u32(sums + 2 * p))));
        }
      }
    }
    const __m512 d = _mm512_cvtph_ps(_mm256_load_si256(reinterpret_cast<const __m256i*>(blk + L::kDOffset)));
#pragma GCC unroll 4
    for (int t = 0; t < T; ++t) {
      const __m512 xd = _mm512_set1_ps(act[t * nb + b].d);
      acc[t] = _mm512_fmadd_ps(blk_sum[t], _mm512_mul_ps(d, xd), acc[t]);
      if constexpr (F::kMins) {
        const __m512 dmin = _mm512_cvtph_ps(_mm256_load_si256(reinterpret_cast<const __m256i*>(blk + L::kDminOffset)));
        acc[t] = _mm512_fnmadd_ps(_mm512_cvtepi32_ps(min_sum[t]), _mm512_mul_ps(dmin, xd), acc[t]);
      }
    }
  }
  const auto mask = static_cast<__mmask16>((1u << n_valid) - 1);
#pragma GCC unroll 4
  for (int t = 0; t < T; ++t) _mm512_mask_storeu_ps(y + t * ldy, mask, acc[t]);
}

// Tokens per pass: 4, not kPanelTokenChunk. Q2_K's mins take a third register a token (8 would spill), and with 8
// clang's ASan/UBSan build of this file (the fuzz tree) ran for over 40 minutes without finishing.
constexpr int kChunk = 4;

template <class F, Reach R = Reach::L1>
void gemm(const uint8_t* p, int64_t n_rows, const uint8_t* x, size_t xs, int64_t n_tok, int64_t k, float* y,
          int64_t ldy) {
  using PanelFn = void (*)(const uint8_t*, int64_t, const uint8_t*, size_t, const PanelAct*, float*, int64_t, int);
  constexpr auto kPanelTokens =
      token_kernels<kChunk, PanelFn>([]<int T>() { return &panel_tokens<F, T, reach_for(R, T)>; });
  panel_gemm<kRows, kChunk, PanelAct>(
      p, group_bytes<F>(k), n_rows, x, xs, n_tok, k / quant::kQKK, y, ldy,
      [](const uint8_t* xt, int64_t b) { return panel_act<F>(reinterpret_cast<const BlockQ8_K*>(xt)[b]); },
      kPanelTokens.data());
}

// Q6_K's serve every token count, as the Q4_K panels (x86/avx512/panels_q4k.cpp); Q2_K's and Q3_K's up to 128
// tokens, above which the plain gemm's tiles win (docs/perf-log/prefill.md).
// Each layout's gemm_l2: the same kernels asking for lines into L2 (stream_prefetch.h's Reach); matmul times
// them against gemm and runs the faster.
template <class F, int kMaxTokens>
constexpr PackedGemm kPanels{kRows,    1,          &group_bytes<F>,       &pack<F>,
                             &gemm<F>, kMaxTokens, &gemm<F, Reach::None>, &gemm<F, Reach::L2>};
const PackedGemm& kQ3KPanels = kPanels<Q3Format, 128>;
const PackedGemm& kQ6KPanels = kPanels<Q6Format, 0>;
const PackedGemm& kQ2KPanels = kPanels<Q2Format, 128>;

}  // namespace

const PackedGemm* k16_panels(GgmlType weight) {
  switch (weight) {
    case GgmlType::Q2_K:
      return &kQ2KPanels;
    case GgmlType::Q3_K:
      return &kQ3KPanels;
    case GgmlType::Q6_K:
      return &kQ6KPanels;
    default:
      return nullptr;
  }
}

}  // namespace tessera::kernels::avx512
