// AVX-512 path: Q4_K, Q5_K and IQ4_XS weights as 16-row panels, written at load in place of the rows' copy in
// the rows' bytes. One vpdpbusd multiplies 4 levels of 16 rows by 4 broadcast activations, so a 32-element group of 16
// rows costs 8 of them and one scale multiply: about a third of the row kernels' work per byte, which lets decode run
// at the memory's pace and serves every token count from the same layout. Q5_K adds a plane of fifth bits, merged into
// the levels with a shift and a vpternlogd each; IQ4_XS looks its nibbles up in a table of its values + 128 (vpshufb)
// and starts each group's dot from -128 x the activations' group sum.
#include <type_traits>

#include "tensor/kernels/panel_loops.h"
#include "tensor/kernels/q4k_panel_row.h"
#include "tensor/kernels/x86/avx512/common.h"
#include "tensor/quant_blocks.h"

namespace tessera::kernels::avx512 {
namespace {

using quant::BlockIQ4_XS;
using quant::BlockQ4_K;
using quant::BlockQ5_K;
using quant::BlockQ8_K;

// One panel block: 16 rows x 256 elements, in the order the kernel reads it. Q4_K and Q5_K first keep the 6-bit
// scales and mins in 12 bytes a row, as the rows do: sm, byte 16g + r holding the low four bits of row r's scale of
// group g (32 elements) and, above them, of its min; smh, byte 16(g % 4) + r holding the top two bits of that scale
// and, above them, of that min, in its low nibble for g < 4 and its high one for the others; then the rows' d and
// dmin as fp16. Then per group g, qs: per chunk c 64 bytes where byte 4r + i of row r holds element 32g + 4c + i in
// its low nibble and element 32g + 16 + 4c + i in its high nibble; Q5_K only, after them hi, 64 bytes whose byte
// 4r + i holds the fifth bits as Q4KPanelRow::high (2304 and 2816 bytes: the rows' own). With the scales and mins a
// byte each the panels would be larger than the rows, and decode streams every byte once. IQ4_XS: its 6-bit scales
// ls in 12 bytes a row as well: sm, byte 16(g % 4) + r holding the low four bits of row r's ls of group g, in its
// low nibble for g < 4 and its high one for the others; smh, byte 16(g / 4) + r holding the top two bits of ls at
// bit 2(g % 4); then d, then qs (2176 bytes, the rows' own; 2240 with a byte per scale). Front to back in the order
// the kernel reads, so the hardware prefetcher keeps up with the stream (docs/perf-log/panels.md).
template <class B>
struct Layout {
  static constexpr bool kFive = std::is_same_v<B, BlockQ5_K>;
  static constexpr bool kTable = std::is_same_v<B, BlockIQ4_XS>;  // signed scales, no mins
  // Front to back in the order the kernel reads: the scales (and mins) and d (and dmin), then each group's levels
  // (and Q5_K's fifth bits).
  static constexpr size_t kScOffset = 0;
  static constexpr size_t kSmhOffset = kScOffset + (kTable ? 64 : 128);
  static constexpr size_t kDOffset = kSmhOffset + (kTable ? 32 : 64);
  static constexpr size_t kDminOffset = kDOffset + 32;  // not for IQ4_XS
  static constexpr size_t kMetaBytes = kTable ? kDOffset + 32 : kDminOffset + 32;
  static constexpr size_t kGroupBytes = 256 + (kFive ? 64 : 0);
  static constexpr size_t qs(int g, int c) { return kMetaBytes + g * kGroupBytes + 64 * c; }
  static constexpr size_t hi(int g) { return kMetaBytes + g * kGroupBytes + 256; }  // Q5_K only
  // 2304 = 36 * 64, 2816 = 44, 2176 = 34: 64-byte aligned
  static constexpr size_t kBlockBytes = kMetaBytes + 8 * kGroupBytes;
  static_assert(kBlockBytes % 64 == 0 && kMetaBytes % 64 == 0);
  // How far ahead a lone token's kernel asks for lines (stream_prefetch.h): Q4_K's farther, where only it gained
  // (docs/perf-log/decode-prefetch.md).
  static constexpr int kLoneFar = std::is_same_v<B, BlockQ4_K> ? 3 * kPrefetchFarBytes / 2 : kPrefetchFarBytes;
};

constexpr int kRows = kPanelRowCount;

template <class B>
size_t group_bytes(int64_t k) {
  return static_cast<size_t>(k / quant::kQKK) * Layout<B>::kBlockBytes;
}

// Rows past n_rows (the last panel of a matrix whose row count is not a multiple of 16) are zero: d = 0.
template <class B>
void pack(const uint8_t* w, size_t w_stride, int64_t n_rows, int64_t k, uint8_t* out) {
  using L = Layout<B>;
  const int64_t nb = k / quant::kQKK;
  for (int64_t p = 0; p * kRows < n_rows; ++p) {
    for (int64_t b = 0; b < nb; ++b) {
      uint8_t* blk = out + static_cast<size_t>(p * nb + b) * L::kBlockBytes;
      std::memset(blk, 0, L::kBlockBytes);
      for (int r = 0; r < kRows && p * kRows + r < n_rows; ++r) {
        const auto& src = reinterpret_cast<const B*>(w + static_cast<size_t>(p * kRows + r) * w_stride)[b];
        if constexpr (L::kTable) {
          // Its qs already hold element 32g + j in the low nibble of byte 16g + j and 32g + 16 + j in the high one.
          for (int g = 0; g < 8; ++g) {
            for (int c = 0; c < 4; ++c) std::memcpy(blk + L::qs(g, c) + 4 * r, src.qs + 16 * g + 4 * c, 4);
            const int ls = quant::iq4xs_scale(src, g) + 32;
            blk[L::kScOffset + 16 * (g % 4) + r] |= static_cast<uint8_t>((ls & 15) << (g < 4 ? 0 : 4));
            blk[L::kSmhOffset + 16 * (g / 4) + r] |= static_cast<uint8_t>((ls >> 4) << (2 * (g % 4)));
          }
          std::memcpy(blk + L::kDOffset + 2 * r, &src.d, 2);
        } else {
          const Q4KPanelRow row = q4k_panel_row(src);
          for (int g = 0; g < 8; ++g) {
            for (int c = 0; c < 4; ++c) std::memcpy(blk + L::qs(g, c) + 4 * r, row.qs + 16 * g + 4 * c, 4);
            if constexpr (L::kFive) std::memcpy(blk + L::hi(g) + 4 * r, row.high + 4 * g, 4);
            blk[L::kScOffset + 16 * g + r] = static_cast<uint8_t>((row.scales[g] & 15) | (row.mins[g] & 15) << 4);
            const int top = row.scales[g] >> 4 | (row.mins[g] >> 4) << 2;
            blk[L::kSmhOffset + 16 * (g % 4) + r] |= static_cast<uint8_t>(top << (g < 4 ? 0 : 4));
          }
          std::memcpy(blk + L::kDOffset + 2 * r, &src.d, 2);
          std::memcpy(blk + L::kDminOffset + 2 * r, &src.dmin, 2);
        }
      }
    }
  }
}

// The activation side of one Q8_K block as the panel kernel reads it: the eight 32-element group sums as the
// int16 pairs (g0, g1) ... (g6, g7) the mins' vpdpwssd takes, and d; IQ4_XS: each group sum x -128 instead.
struct PanelAct {
  int32_t gsum_pairs[4];
  int32_t neg_offset[8];
  float d;
};

template <class B>
PanelAct panel_act(const BlockQ8_K& x) {
  PanelAct a;
  const __m128i sums = _mm_hadd_epi16(load128(x.bsums), load128(x.bsums + 8));
  if constexpr (Layout<B>::kTable) {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(a.neg_offset),
                        _mm256_mullo_epi32(_mm256_cvtepi16_epi32(sums), _mm256_set1_epi32(-128)));
  } else {
    _mm_storeu_si128(reinterpret_cast<__m128i*>(a.gsum_pairs), sums);
  }
  a.d = x.d;
  return a;
}

// A block's scales and mins from sm and smh (Layout) into a byte each, 16 bytes a group, four groups per vector:
// about 25 operations a block, against ~250 for its levels at one token. Prefill pays them per pass of four tokens,
// which the decode's smaller stream outweighs (docs/perf-log/panels.md).
[[gnu::always_inline]] inline void unpack_scales_mins(const uint8_t* sm, const uint8_t* smh, uint8_t* sc, uint8_t* mn) {
  const __m512i low4 = _mm512_set1_epi8(0x0f);
  const __m512i low2 = _mm512_set1_epi8(0x03);
  const __m512i top = _mm512_load_si512(smh);
  for (int h = 0; h < 2; ++h) {
    const __m512i v = _mm512_load_si512(sm + 64 * h);
    const __m512i top_h = h == 0 ? top : _mm512_srli_epi16(top, 4);
    const __m512i sc_top = _mm512_slli_epi16(_mm512_and_si512(top_h, low2), 4);
    const __m512i mn_top = _mm512_slli_epi16(_mm512_and_si512(_mm512_srli_epi16(top_h, 2), low2), 4);
    _mm512_store_si512(sc + 64 * h, _mm512_or_si512(_mm512_and_si512(v, low4), sc_top));
    _mm512_store_si512(mn + 64 * h, _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(v, 4), low4), mn_top));
  }
}

// IQ4_XS: a block's signed scales (ls - 32) from sm and smh into a byte each, 16 bytes a group.
[[gnu::always_inline]] inline void unpack_iq4xs_scales(const uint8_t* sm, const uint8_t* smh, uint8_t* sc) {
  const __m512i low4 = _mm512_set1_epi8(0x0f);
  const __m512i low2 = _mm512_set1_epi8(0x03);
  const __m512i v = _mm512_load_si512(sm);
  // Lane j of the four 16-byte lanes shifts its rows' top bits right by 2j: group 4h + j's bits come down to 0-1.
  const __m512i shifts = _mm512_set_epi64(0x0006000600060006, 0x0006000600060006, 0x0004000400040004,
                                          0x0004000400040004, 0x0002000200020002, 0x0002000200020002, 0, 0);
  for (int h = 0; h < 2; ++h) {
    const __m512i tops = _mm512_broadcast_i32x4(_mm_load_si128(reinterpret_cast<const __m128i*>(smh + 16 * h)));
    const __m512i top = _mm512_slli_epi16(_mm512_and_si512(_mm512_srlv_epi16(tops, shifts), low2), 4);
    const __m512i low = _mm512_and_si512(h == 0 ? v : _mm512_srli_epi16(v, 4), low4);
    _mm512_store_si512(sc + 64 * h, _mm512_sub_epi8(_mm512_or_si512(low, top), _mm512_set1_epi8(32)));
  }
}

// T tokens (T <= kPanelTokenChunk) against one panel over all nb blocks: each group's levels are unpacked once and
// dotted with every token. y[t * ldy + r] for the panel's rows r < n_valid.
template <class B, int T, Reach R>
void panel_tokens(const uint8_t* panel, int64_t nb, const uint8_t* x, size_t xs, const PanelAct* act, float* y,
                  int64_t ldy, int n_valid) {
  using L = Layout<B>;
  constexpr size_t kBlockBytes = L::kBlockBytes;
  constexpr int kFar = T == 1 ? L::kLoneFar : kPrefetchFarBytes;
  const __m512i m_lo = _mm512_set1_epi8(0x0f);
  const __m512i m_hi = _mm512_set1_epi8(static_cast<char>(0xf0));
  const __m512i table = iq4nl_table_u8();
  constexpr bool kWhole = L::kFive || L::kTable;  // the high nibbles' levels as they are, not 16 x
  // Q4_K from 4 tokens: the low nibbles as 16 x level too (a shift a chunk, shared by the tokens), so no token's
  // dot is shifted back; the 16 comes out with d, exactly. One chain a token instead of two was slower
  // (docs/perf-log/prefill.md).
  constexpr bool kSixteen = !kWhole && T >= 4;
  __m512 acc[T];
#pragma GCC unroll 8
  for (int t = 0; t < T; ++t) acc[t] = _mm512_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* blk = panel + static_cast<size_t>(b) * kBlockBytes;
    // Spread over the block (a group's 4 lines at a time), not one burst of 37 lines: a burst fills the core's
    // miss buffers and stalls the loads behind it.
    prefetch_stream<L::kMetaBytes - 64, kFar, R>(blk);
    const int8_t* xq[T];
    __m512 blk_sum[T];
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) {
      xq[t] = reinterpret_cast<const BlockQ8_K*>(x + t * xs)[b].qs;
      blk_sum[t] = _mm512_setzero_ps();
    }
    // The scales (and mins) of all eight groups as a byte each, 16 bytes a group.
    alignas(64) uint8_t scales[128];
    alignas(64) uint8_t mn_bytes[128];
    if constexpr (L::kTable) {
      unpack_iq4xs_scales(blk + L::kScOffset, blk + L::kSmhOffset, scales);
    } else {
      unpack_scales_mins(blk + L::kScOffset, blk + L::kSmhOffset, scales, mn_bytes);
    }
    for (int g = 0; g < 8; ++g) {
      prefetch_stream<L::kGroupBytes - 64, kFar, R>(blk + L::qs(g, 0));
      __m512i lo[4], hi[4];
      for (int c = 0; c < 4; ++c) {
        __m512i v = _mm512_load_si512(blk + L::qs(g, c));
        in_register(v);
        lo[c] = kSixteen ? _mm512_and_si512(_mm512_slli_epi16(v, 4), m_hi) : _mm512_and_si512(v, m_lo);
        // Q4_K: 16 x level, the sum shifted back once per group unless kSixteen. Q5_K: the level, as 16 x level
        // would overflow.
        hi[c] = kWhole ? _mm512_and_si512(_mm512_srli_epi16(v, 4), m_lo) : _mm512_and_si512(v, m_hi);
        if constexpr (L::kTable) {
          lo[c] = _mm512_shuffle_epi8(table, lo[c]);
          hi[c] = _mm512_shuffle_epi8(table, hi[c]);
        }
      }
      if constexpr (L::kFive) {
        __m512i plane = _mm512_load_si512(blk + L::hi(g));
        in_register(plane);
        merge_fifth_bits(plane, lo, hi);
      }
      // The scale as f32: a convert and an FMA per token instead of vpmulld's two port-0 uops and 10 cycles. Q4_K's
      // products stay exact (|dot * scale| < 2^22); the sum over groups rounds like any f32 accumulation.
      const __m128i sc8 = _mm_load_si128(reinterpret_cast<const __m128i*>(scales + 16 * g));
      const __m512 sc = _mm512_cvtepi32_ps(L::kTable ? _mm512_cvtepi8_epi32(sc8) : _mm512_cvtepu8_epi32(sc8));
#pragma GCC unroll 8
      for (int t = 0; t < T; ++t) {
        __m512i s_lo = L::kTable ? _mm512_set1_epi32(act[t * nb + b].neg_offset[g]) : _mm512_setzero_si512();
        __m512i s_hi = _mm512_setzero_si512();
        for (int c = 0; c < 4; ++c) {
          s_lo = dpbusd_bcast(s_lo, lo[c], xq[t] + 32 * g + 4 * c);
          s_hi = dpbusd_bcast(s_hi, hi[c], xq[t] + 32 * g + 16 + 4 * c);
        }
        const __m512i dot = _mm512_add_epi32(s_lo, kWhole || kSixteen ? s_hi : _mm512_srai_epi32(s_hi, 4));
        blk_sum[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot), sc, blk_sum[t]);
      }
    }
    __m512 d = _mm512_cvtph_ps(_mm256_load_si256(reinterpret_cast<const __m256i*>(blk + L::kDOffset)));
    if constexpr (kSixteen) d = _mm512_mul_ps(d, _mm512_set1_ps(1.0f / 16));
    if constexpr (L::kTable) {
#pragma GCC unroll 8
      for (int t = 0; t < T; ++t)
        acc[t] = _mm512_fmadd_ps(blk_sum[t], _mm512_mul_ps(d, _mm512_set1_ps(act[t * nb + b].d)), acc[t]);
      continue;
    }
    const __m512 dmin = _mm512_cvtph_ps(_mm256_load_si256(reinterpret_cast<const __m256i*>(blk + L::kDminOffset)));
    // Row r's mins of groups 2p and 2p + 1 as the int16 pair of its 32-bit lane, as gsum_pairs holds the sums.
    __m512i mn[4];
    for (int p = 0; p < 4; ++p) {
      const __m512i even = _mm512_cvtepu8_epi32(_mm_load_si128(reinterpret_cast<const __m128i*>(mn_bytes + 32 * p)));
      const __m512i odd =
          _mm512_cvtepu8_epi32(_mm_load_si128(reinterpret_cast<const __m128i*>(mn_bytes + 32 * p + 16)));
      mn[p] = _mm512_or_si512(even, _mm512_slli_epi32(odd, 16));
    }
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) {
      const PanelAct& a = act[t * nb + b];
      __m512i m = _mm512_setzero_si512();
      for (int p = 0; p < 4; ++p) m = _mm512_dpwssd_epi32(m, mn[p], _mm512_set1_epi32(a.gsum_pairs[p]));
      const __m512 xd = _mm512_set1_ps(a.d);
      acc[t] = _mm512_fmadd_ps(blk_sum[t], _mm512_mul_ps(d, xd), acc[t]);
      acc[t] = _mm512_fnmadd_ps(_mm512_cvtepi32_ps(m), _mm512_mul_ps(dmin, xd), acc[t]);
    }
  }
  const auto mask = static_cast<__mmask16>((1u << n_valid) - 1);
#pragma GCC unroll 8
  for (int t = 0; t < T; ++t) _mm512_mask_storeu_ps(y + t * ldy, mask, acc[t]);
}

// Rows in blocks, token chunks inside, panels innermost (panel_loops.h).
template <class B, Reach R = Reach::L1>
void gemm(const uint8_t* p, int64_t n_rows, const uint8_t* x, size_t xs, int64_t n_tok, int64_t k, float* y,
          int64_t ldy) {
  using PanelFn = void (*)(const uint8_t*, int64_t, const uint8_t*, size_t, const PanelAct*, float*, int64_t, int);
  constexpr auto kPanelTokens =
      token_kernels<kPanelTokenChunk, PanelFn>([]<int T>() { return &panel_tokens<B, T, reach_for(R, T)>; });
  panel_gemm<kRows, kPanelTokenChunk, PanelAct>(
      p, group_bytes<B>(k), n_rows, x, xs, n_tok, k / quant::kQKK, y, ldy,
      [](const uint8_t* xt, int64_t b) { return panel_act<B>(reinterpret_cast<const BlockQ8_K*>(xt)[b]); },
      kPanelTokens.data());
}

// Every token count: tiles packed at load (--repack) take over from 9 tokens where they exist (matmul's
// packed_for); without them the panels beat the plain gemm, which builds its tiles per call from rows left in the
// 4 KB pages of the file mapping (docs/perf-log/prefill.md).
constexpr int kPanelMaxTokens = 0;
// Each layout's gemm_l2: the same kernels asking for lines into L2 (stream_prefetch.h's Reach); matmul times
// them against gemm and runs the faster.
template <class B, int kMaxTokens>
constexpr PackedGemm kPanels{kRows,    1,          &group_bytes<B>,       &pack<B>,
                             &gemm<B>, kMaxTokens, &gemm<B, Reach::None>, &gemm<B, Reach::L2>};
const PackedGemm& kQ4KPanels = kPanels<BlockQ4_K, kPanelMaxTokens>;
const PackedGemm& kQ5KPanels = kPanels<BlockQ5_K, kPanelMaxTokens>;
// IQ4_XS's plain gemm catches up by 512 tokens, so its panels stop at 256 as Q4_0's do (docs/perf-log/prefill.md).
const PackedGemm& kIQ4XSPanels = kPanels<BlockIQ4_XS, 256>;

}  // namespace

const PackedGemm* kquant_panels(GgmlType weight) {
  switch (weight) {
    case GgmlType::Q4_K:
      return &kQ4KPanels;
    case GgmlType::Q5_K:
      return &kQ5KPanels;
    case GgmlType::IQ4_XS:
      return &kIQ4XSPanels;
    default:
      return nullptr;
  }
}

}  // namespace tessera::kernels::avx512
