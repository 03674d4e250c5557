// AVX2 path: the 32-element formats Q4_0, Q4_1, Q5_0, Q5_1, IQ4_NL as 8-row panels, written at load in place of
// the rows' copy and exactly the rows' bytes. Their row kernels widen and scale every block of every row on its own
// (Q5's fifth bits by a bit-spreading shuffle per block); here a block of 8 rows costs 8 vpmaddubsw and a widening
// (two for the Q5 formats), so decode keeps up with the memory. Q8_0 keeps its rows: they already stream at the
// memory's pace, and 8-row panels with the sign trick (every product widened at once) decoded a single stream
// slower (docs/perf-log/panels.md).
#include <type_traits>

#include "tensor/kernels/legacy_panel_rows.h"
#include "tensor/kernels/panel_loops.h"
#include "tensor/kernels/x86/avx2/common.h"
#include "tensor/quant_blocks.h"

namespace tessera::kernels::avx2 {
namespace {

using quant::BlockIQ4_NL;
using quant::BlockQ4_0;
using quant::BlockQ4_1;
using quant::BlockQ5_0;
using quant::BlockQ5_1;
using quant::BlockQ8_0;
using quant::BlockQ8_1;
using quant::kQK;

constexpr int kRows = 8;        // one row per 32-bit lane
constexpr int kTokenChunk = 4;  // a chunk's sums, its accumulators and the levels fit the 16 registers

// One panel block: 8 rows x 32 elements. 4 chunks of 32 bytes whose byte 4r + i holds byte 4c + i of row r's qs
// (element 4c + i in the low nibble, 16 + 4c + i in the high one); the Q5 formats' plane of fifth bits (byte 4r + i
// from legacy_fifth_bits); the rows' d and, for Q4_1/Q5_1, m as fp16.
template <class B>
struct Layout {
  static constexpr bool kFive = std::is_same_v<B, BlockQ5_0> || std::is_same_v<B, BlockQ5_1>;
  static constexpr bool kMin = std::is_same_v<B, BlockQ4_1> || std::is_same_v<B, BlockQ5_1>;
  static constexpr bool kTable = std::is_same_v<B, BlockIQ4_NL>;  // its nibbles index 16 signed values
  static constexpr int kOffset = kMin || kTable ? 0
                                 : kFive        ? 16
                                                : 8;  // what the stored levels exceed the signed ones by
  static constexpr size_t kPlane = 128;
  static constexpr size_t kD = kPlane + (kFive ? 32 : 0);
  static constexpr size_t kM = kD + 2 * kRows;
  static constexpr size_t kBytes = kM + (kMin ? 2 * kRows : 0);
  static_assert(kBytes == kRows * sizeof(B));
};

// The activation blocks a format's dots take (ggml's vec_dot_type): Q8_1, with its s, for the formats with a min.
template <class B>
using ActBlock = std::conditional_t<Layout<B>::kMin, BlockQ8_1, BlockQ8_0>;

template <class B>
size_t group_bytes(int64_t k) {
  return (static_cast<size_t>(k / kQK) * Layout<B>::kBytes + 63) / 64 * 64;
}

// Rows past n_rows (the last panel of a matrix whose row count is not a multiple of 8) are zero: d = m = 0.
template <class B>
void pack(const uint8_t* w, size_t w_stride, int64_t n_rows, int64_t k, uint8_t* out) {
  using L = Layout<B>;
  const int64_t nb = k / kQK;
  const size_t panel_bytes = group_bytes<B>(k);
  for (int64_t p = 0; p * kRows < n_rows; ++p) {
    uint8_t* panel = out + static_cast<size_t>(p) * panel_bytes;
    std::memset(panel, 0, panel_bytes);
    for (int64_t b = 0; b < nb; ++b) {
      uint8_t* blk = panel + static_cast<size_t>(b) * L::kBytes;
      for (int r = 0; r < kRows && p * kRows + r < n_rows; ++r) {
        const B& src = reinterpret_cast<const B*>(w + static_cast<size_t>(p * kRows + r) * w_stride)[b];
        for (int c = 0; c < 4; ++c) std::memcpy(blk + 32 * c + 4 * r, src.qs + 4 * c, 4);
        if constexpr (L::kFive) {
          for (int i = 0; i < 4; ++i) blk[L::kPlane + 4 * r + i] = legacy_fifth_bits(src.qh, i);
        }
        std::memcpy(blk + L::kD + 2 * r, &src.d, 2);
        if constexpr (L::kMin) std::memcpy(blk + L::kM + 2 * r, &src.m, 2);
      }
    }
  }
}

// An activation block's d, its levels' sum times the weights' offset, and (Q8_1) its s = d x that sum.
struct LegacyAct {
  float d;
  int32_t offset_sum;
  float s;
};

template <class B>
LegacyAct legacy_act(const ActBlock<B>& x) {
  LegacyAct a{half_at(&x.d), 0, 0.0f};
  if constexpr (Layout<B>::kOffset != 0) {
    const __m256i q = load256(x.qs);
    a.offset_sum = Layout<B>::kOffset *
                   hsum_i32(_mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_set1_epi8(1), q), _mm256_set1_epi16(1)));
  }
  if constexpr (Layout<B>::kMin) a.s = half_at(&x.s);
  return a;
}

template <class B, int T>
void panel_tokens(const uint8_t* panel, int64_t nb, const uint8_t* x, size_t xs, const LegacyAct* act, float* y,
                  int64_t ldy, int n_valid) {
  using L = Layout<B>;
  const __m256i m4 = _mm256_set1_epi8(0x0f);
  const __m256i ones = _mm256_set1_epi16(1);
  const __m256i table = iq4nl_table();
  __m256 acc[T];
  for (int t = 0; t < T; ++t) acc[t] = _mm256_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* blk = panel + static_cast<size_t>(b) * L::kBytes;
    prefetch_stream<L::kBytes>(blk);  // blocks are not line-aligned: it covers one line more
    const __m256 d = _mm256_cvtph_ps(load128(blk + L::kD));
    for (int t = 0; t < T; ++t) {
      const int8_t* xq = reinterpret_cast<const ActBlock<B>*>(x + t * xs)[b].qs;
      const LegacyAct& a = act[t * nb + b];
      __m256i dot;
      if constexpr (L::kFive) {
        dot = five_bit_group_dot(blk, blk + L::kPlane, xq, m4, ones);
      } else if constexpr (L::kTable) {
        dot = table_group_dot(blk, xq, table, m4, ones);
      } else {
        dot = _mm256_madd_epi16(group_products(blk, xq, m4), ones);
      }
      const __m256i s = _mm256_sub_epi32(dot, _mm256_set1_epi32(a.offset_sum));
      acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s), _mm256_mul_ps(d, _mm256_set1_ps(a.d)), acc[t]);
      if constexpr (L::kMin)
        acc[t] = _mm256_fmadd_ps(_mm256_cvtph_ps(load128(blk + L::kM)), _mm256_set1_ps(a.s), acc[t]);
    }
  }
  const __m256i mask = _mm256_cmpgt_epi32(_mm256_set1_epi32(n_valid), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
  for (int t = 0; t < T; ++t) _mm256_maskstore_ps(y + t * ldy, mask, acc[t]);
}

template <class B>
void gemm(const uint8_t* p, int64_t n_rows, const uint8_t* x, size_t xs, int64_t n_tok, int64_t k, float* y,
          int64_t ldy) {
  using Fn = void (*)(const uint8_t*, int64_t, const uint8_t*, size_t, const LegacyAct*, float*, int64_t, int);
  constexpr Fn kTokens[kTokenChunk + 1] = {nullptr, &panel_tokens<B, 1>, &panel_tokens<B, 2>, &panel_tokens<B, 3>,
                                           &panel_tokens<B, 4>};
  panel_gemm<kRows, kTokenChunk, LegacyAct>(
      p, group_bytes<B>(k), n_rows, x, xs, n_tok, k / kQK, y, ldy,
      [](const uint8_t* xt, int64_t b) { return legacy_act<B>(reinterpret_cast<const ActBlock<B>*>(xt)[b]); }, kTokens);
}

// Above these the plain gemm on the rows is as fast or faster (docs/perf-log/prefill.md).
const PackedGemm kQ40Panels{kRows, 1, &group_bytes<BlockQ4_0>, &pack<BlockQ4_0>, &gemm<BlockQ4_0>, 48};
const PackedGemm kQ41Panels{kRows, 1, &group_bytes<BlockQ4_1>, &pack<BlockQ4_1>, &gemm<BlockQ4_1>, 48};
const PackedGemm kQ50Panels{kRows, 1, &group_bytes<BlockQ5_0>, &pack<BlockQ5_0>, &gemm<BlockQ5_0>, 48};
const PackedGemm kQ51Panels{kRows, 1, &group_bytes<BlockQ5_1>, &pack<BlockQ5_1>, &gemm<BlockQ5_1>, 48};
const PackedGemm kIQ4NLPanels{kRows, 1, &group_bytes<BlockIQ4_NL>, &pack<BlockIQ4_NL>, &gemm<BlockIQ4_NL>, 48};

}  // namespace

const PackedGemm* legacy_panels(GgmlType weight) {
  switch (weight) {
    case GgmlType::Q4_0:
      return &kQ40Panels;
    case GgmlType::Q4_1:
      return &kQ41Panels;
    case GgmlType::Q5_0:
      return &kQ50Panels;
    case GgmlType::Q5_1:
      return &kQ51Panels;
    case GgmlType::IQ4_NL:
      return &kIQ4NLPanels;
    default:
      return nullptr;
  }
}

}  // namespace tessera::kernels::avx2
