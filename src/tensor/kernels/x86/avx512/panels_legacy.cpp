// AVX-512 path: the 32-element formats (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, IQ4_NL) as 16-row panels (the rows'
// bytes), written at load in place of the rows' copy, as x86/avx512/panels_q4k.cpp does for Q4_K. Levels
// are stored unsigned (the nibbles as they are, Q8_0's bytes + 128) so one vpdpbusd takes 4 levels of 16 rows; an
// offset comes back as offset * the activation block's sum, a minimum (Q4_1, Q5_1) as m * the Q8_1 block's s.
#include <type_traits>

#include "tensor/kernels/legacy_panel_rows.h"
#include "tensor/kernels/panel_loops.h"
#include "tensor/kernels/x86/avx512/common.h"
#include "tensor/quant_blocks.h"

namespace tessera::kernels::avx512 {
namespace {

using quant::BlockIQ4_NL;
using quant::BlockQ4_0;
using quant::BlockQ4_1;
using quant::BlockQ5_0;
using quant::BlockQ5_1;
using quant::BlockQ8_0;
using quant::BlockQ8_1;
using quant::kQK;

constexpr int kRows = kPanelRowCount;

// One panel block: 16 rows x 32 elements. Chunk c of 64 bytes holds 4 consecutive levels of each row (byte 4r + i
// of row r); the nibble formats have 4 chunks whose low nibbles are elements 4c + i and high nibbles 16 + 4c + i
// (the rows' own byte order), Q8_0 8 chunks of elements 4c + i. The Q5 formats add a plane of fifth bits (byte
// 4r + i: bit c for element 4c + i, bit 4 + c for element 16 + 4c + i). Blocks come in groups of about 2.3 KB
// (kGroup): every block's 16 d, then (Q4_1, Q5_1) every block's 16 m, all as fp16, then every block's levels, so
// that every load is one whole cache line, the group is read front to back, and a lone token's kernel asks for a
// group's lines in one burst (stream_prefetch.h). Group sizes tried: docs/perf-log/panels.md.
template <class B>
struct Layout;

// The nibble formats: qs in the rows' order, and the fifth bits (none for Q4).
struct NibbleLayout {
  static constexpr int kChunks = 4;
  static constexpr bool kTable = false;  // IQ4_NL: the nibbles index its 16 values
  template <class B>
  static uint8_t byte(const B& b, int c, int i) {
    return b.qs[4 * c + i];
  }
  template <class B>
  static uint8_t fifth_bits(const B& b, int i) {
    return legacy_fifth_bits(b.qh, i);
  }
};

template <>
struct Layout<BlockQ4_0> : NibbleLayout {
  static constexpr int kOffset = 8;
  static constexpr bool kFive = false, kMin = false;
};

template <>
struct Layout<BlockQ4_1> : NibbleLayout {
  static constexpr int kOffset = 0;
  static constexpr bool kFive = false, kMin = true;
};

template <>
struct Layout<BlockQ5_0> : NibbleLayout {
  static constexpr int kOffset = 16;
  static constexpr bool kFive = true, kMin = false;
};

template <>
struct Layout<BlockQ5_1> : NibbleLayout {
  static constexpr int kOffset = 0;
  static constexpr bool kFive = true, kMin = true;
};

// IQ4_NL: Q4_0's nibbles, looked up in its table of values + 128 (kvalues_iq4nl, all in 1..241) by vpshufb.
template <>
struct Layout<BlockIQ4_NL> : NibbleLayout {
  static constexpr bool kTable = true;
  static constexpr int kOffset = 128;
  static constexpr bool kFive = false, kMin = false;
};

template <>
struct Layout<BlockQ8_0> {
  static constexpr int kChunks = 8;
  static constexpr bool kTable = false;
  static constexpr int kOffset = 128;
  static constexpr bool kFive = false, kMin = false;
  static uint8_t byte(const BlockQ8_0& b, int c, int i) { return static_cast<uint8_t>(b.qs[4 * c + i] + 128); }
};

// Block h of a group of n blocks: its d at 32h, its m (Q4_1, Q5_1) at m_offset(n) + 32h, its levels at
// levels_offset(n) + h * kLevelBytes (a Q5 format's fifth-bit plane after its chunks).
template <class B>
constexpr size_t kPlaneOffset = Layout<B>::kChunks * 64;
template <class B>
constexpr size_t kLevelBytes = kPlaneOffset<B> + (Layout<B>::kFive ? 64 : 0);
template <class B>
constexpr size_t kBlockBytes = kLevelBytes<B> + (Layout<B>::kMin ? 4 : 2) * kRows;
// Blocks per group: as many as fit 2.3 KB (a Q4_K panel block's size), an even number so that the group's d (and m)
// fill whole lines: 8 (Q4_0, IQ4_NL: 2,304 bytes), 6 (Q4_1, Q5_0, Q5_1), 4 (Q8_0: 2,176). Groups of a whole prefetch
// burst (kPrefetchBurstBytes) streamed far slower without software prefetch (docs/perf-log/panels.md).
template <class B>
constexpr int kGroup = static_cast<int>(2304 / kBlockBytes<B>) / 2 * 2;
template <class B>
constexpr size_t kGroupBytes = kGroup<B>* kBlockBytes<B>;
static_assert(kGroupBytes<BlockQ4_0> == 2304 && kGroupBytes<BlockQ4_1> % 64 == 0 && kGroupBytes<BlockQ5_0> % 64 == 0 &&
              kGroupBytes<BlockQ5_1> % 64 == 0 && kGroupBytes<BlockQ8_0> == 2176);

// A group's scales come first, so that its bytes are read front to back: with them behind the levels (each block's
// d read 4 KB ahead of its levels, then the levels), the hardware prefetcher lost the stream
// (docs/perf-log/panels.md).
constexpr size_t m_offset(int64_t n) { return static_cast<size_t>(n) * 2 * kRows; }
// Whole lines of scales (a panel's last group may have an odd number of blocks), so every level load is aligned.
template <class B>
constexpr size_t levels_offset(int64_t n) {
  return (static_cast<size_t>(n) * (Layout<B>::kMin ? 4 : 2) * kRows + 63) / 64 * 64;
}

// The blocks of block b's group among nb: kGroup, fewer in a panel's last group, which takes only the bytes of its
// blocks (a whole last group would cost memory for nothing).
template <class B>
int64_t group_size(int64_t nb, int64_t b) {
  const int64_t first = b / kGroup<B> * kGroup<B>;
  return nb - first < kGroup<B> ? nb - first : kGroup<B>;
}

template <class B>
size_t group_bytes(int64_t k) {
  const int64_t nb = k / kQK;
  const size_t bytes =
      static_cast<size_t>(nb / kGroup<B>) * kGroupBytes<B> + static_cast<size_t>(nb % kGroup<B>) * kBlockBytes<B>;
  return (bytes + 63) / 64 * 64;
}

template <class B>
void pack(const uint8_t* w, size_t w_stride, int64_t n_rows, int64_t k, uint8_t* out) {
  const int64_t nb = k / kQK;
  const size_t panel_bytes = group_bytes<B>(k);
  for (int64_t p = 0; p * kRows < n_rows; ++p) {
    uint8_t* panel = out + static_cast<size_t>(p) * panel_bytes;
    std::memset(panel, 0, panel_bytes);
    for (int64_t b = 0; b < nb; ++b) {
      uint8_t* group = panel + static_cast<size_t>(b / kGroup<B>) * kGroupBytes<B>;
      const size_t h = static_cast<size_t>(b % kGroup<B>);
      const int64_t n = group_size<B>(nb, b);
      uint8_t* levels = group + levels_offset<B>(n) + h * kLevelBytes<B>;
      for (int r = 0; r < kRows && p * kRows + r < n_rows; ++r) {
        const B& src = reinterpret_cast<const B*>(w + static_cast<size_t>(p * kRows + r) * w_stride)[b];
        for (int c = 0; c < Layout<B>::kChunks; ++c) {
          for (int i = 0; i < 4; ++i) levels[c * 64 + 4 * r + i] = Layout<B>::byte(src, c, i);
        }
        if constexpr (Layout<B>::kFive) {
          for (int i = 0; i < 4; ++i) levels[kPlaneOffset<B> + 4 * r + i] = Layout<B>::fifth_bits(src, i);
        }
        std::memcpy(group + h * 2 * kRows + 2 * r, &src.d, 2);
        if constexpr (Layout<B>::kMin) std::memcpy(group + m_offset(n) + h * 2 * kRows + 2 * r, &src.m, 2);
      }
    }
  }
}

// The activation blocks a format's dots take (ggml's vec_dot_type): Q8_1, with its s, for the formats with a
// minimum.
template <class B>
using ActBlock = std::conditional_t<Layout<B>::kMin, BlockQ8_1, BlockQ8_0>;

// An activation block's d, its levels' sum times the weights' offset, and (Q8_1) its s = d * that sum.
struct LegacyAct {
  float d;
  int32_t offset_sum;
  float s;
};

template <class B>
LegacyAct legacy_act(const ActBlock<B>& x) {
  LegacyAct a{half_at(&x.d), 0, 0.0f};
  if constexpr (Layout<B>::kOffset != 0) {
    const __m256i q = _mm256_cvtepi8_epi16(load128(x.qs));
    const __m256i q2 = _mm256_cvtepi8_epi16(load128(x.qs + 16));
    a.offset_sum = Layout<B>::kOffset * hsum_i32(_mm256_madd_epi16(_mm256_add_epi16(q, q2), _mm256_set1_epi16(1)));
  }
  if constexpr (Layout<B>::kMin) a.s = half_at(&x.s);
  return a;
}

template <class B, int T, Reach R>
void panel_tokens(const uint8_t* panel, int64_t nb, const uint8_t* x, size_t xs, const LegacyAct* act, float* y,
                  int64_t ldy, int n_valid) {
  using Act = ActBlock<B>;
  constexpr int kChunks = Layout<B>::kChunks;
  constexpr bool kNibbles = kChunks == 4;
  constexpr bool kFive = Layout<B>::kFive;
  constexpr bool kWhole = kFive || Layout<B>::kTable;  // the high nibbles' levels as they are, not 16 x
  const __m512i table = iq4nl_table_u8();
  const __m512i m_lo = _mm512_set1_epi8(0x0f);
  const __m512i m_hi = _mm512_set1_epi8(static_cast<char>(0xf0));
  __m512 acc[T];
#pragma GCC unroll 8
  for (int t = 0; t < T; ++t) acc[t] = _mm512_setzero_ps();
  // Block b, the h-th of its group of n.
  const auto block = [&](const uint8_t* group, size_t h, int64_t n, int64_t b) __attribute__((always_inline)) {
    const uint8_t* blk = group + levels_offset<B>(n) + h * kLevelBytes<B>;
    __m512i lv[8];
    if constexpr (kNibbles) {
      for (int c = 0; c < 4; ++c) {
        __m512i v = load512(blk + 64 * c);
        in_register(v);
        lv[c] = _mm512_and_si512(v, m_lo);
        // 16 x level, shifted back once per block; with a fifth bit or a table the level itself, as 16 x would
        // overflow or miss the table.
        lv[4 + c] = kWhole ? _mm512_and_si512(_mm512_srli_epi16(v, 4), m_lo) : _mm512_and_si512(v, m_hi);
        if constexpr (Layout<B>::kTable) {
          lv[c] = _mm512_shuffle_epi8(table, lv[c]);
          lv[4 + c] = _mm512_shuffle_epi8(table, lv[4 + c]);
        }
      }
      if constexpr (kFive) {
        __m512i plane = load512(blk + kPlaneOffset<B>);
        in_register(plane);
        merge_fifth_bits(plane, lv, lv + 4);
      }
    } else {
      for (int c = 0; c < 8; ++c) lv[c] = load512(blk + 64 * c);
    }
    const __m512 d = _mm512_cvtph_ps(load256(group + h * 2 * kRows));
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) {
      const auto& xb = reinterpret_cast<const Act*>(x + t * xs)[b];
      __m512i s0 = _mm512_setzero_si512(), s1 = _mm512_setzero_si512();
      // lv[c] and lv[4 + c] hold elements 4c + i and 16 + 4c + i in both layouts.
      for (int c = 0; c < 4; ++c) {
        s0 = dpbusd_bcast(s0, lv[c], xb.qs + 4 * c);
        s1 = dpbusd_bcast(s1, lv[4 + c], xb.qs + 16 + 4 * c);
      }
      if constexpr (kNibbles && !kWhole) s1 = _mm512_srai_epi32(s1, 4);
      const LegacyAct& a = act[t * nb + b];
      const __m512i dot = _mm512_sub_epi32(_mm512_add_epi32(s0, s1), _mm512_set1_epi32(a.offset_sum));
      acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot), _mm512_mul_ps(d, _mm512_set1_ps(a.d)), acc[t]);
      if constexpr (Layout<B>::kMin) {
        acc[t] =
            _mm512_fmadd_ps(_mm512_cvtph_ps(load256(group + m_offset(n) + h * 2 * kRows)), _mm512_set1_ps(a.s), acc[t]);
      }
    }
  };
  // A lone token's whole groups: the group's lines asked for at once, its blocks unrolled, which ran faster than the
  // same blocks in a loop over the group; asking into L2, the loop below is faster (docs/perf-log/decode-prefetch.md).
  int64_t b = 0;
  if constexpr (T == 1 && R != Reach::L2) {
    for (; nb - b >= kGroup<B>; b += kGroup<B>) {
      const uint8_t* group = panel + static_cast<size_t>(b / kGroup<B>) * kGroupBytes<B>;
      prefetch_stream<kGroupBytes<B>, kPrefetchFarBytes, R>(group);
#pragma GCC unroll 16
      for (int h = 0; h < kGroup<B>; ++h) block(group, static_cast<size_t>(h), kGroup<B>, b + h);
    }
  }
  // Several tokens, and a lone token's last part of a group: one block at a time, asking for a block's share of
  // lines (in bursts, or in the loop above, several tokens ran slower: docs/perf-log/decode-prefetch.md).
  for (; b < nb; ++b) {
    const uint8_t* group = panel + static_cast<size_t>(b / kGroup<B>) * kGroupBytes<B>;
    const auto h = static_cast<size_t>(b % kGroup<B>);
    prefetch_stream<kBlockBytes<B>, kPrefetchFarBytes, R>(group + h * kBlockBytes<B>);
    block(group, h, group_size<B>(nb, b), b);
  }
  const auto mask = static_cast<__mmask16>((1u << n_valid) - 1);
#pragma GCC unroll 8
  for (int t = 0; t < T; ++t) _mm512_mask_storeu_ps(y + t * ldy, mask, acc[t]);
}

// Each layout has a kernel whose lone token asks for no lines ahead (Reach::None) as its gemm_unprefetched: which
// is faster changes with the machine's state, so matmul times both (PrefetchChoice). Several tokens per pass keep
// the prefetch, as they re-read each line (docs/perf-log/decode-prefetch.md).
template <class B, Reach R = Reach::L1>
void gemm(const uint8_t* p, int64_t n_rows, const uint8_t* x, size_t xs, int64_t n_tok, int64_t k, float* y,
          int64_t ldy) {
  using Fn = void (*)(const uint8_t*, int64_t, const uint8_t*, size_t, const LegacyAct*, float*, int64_t, int);
  constexpr auto kTokens =
      token_kernels<kPanelTokenChunk, Fn>([]<int T>() { return &panel_tokens<B, T, reach_for(R, T)>; });
  // Q8_0's re-reads from L2 go faster without the prefetch; the other formats' do not (docs/perf-log/prefill.md).
  constexpr auto kAgain = token_kernels<kPanelTokenChunk, Fn>([]<int T>() { return &panel_tokens<B, T, Reach::None>; });
  panel_gemm<kRows, kPanelTokenChunk, LegacyAct>(
      p, group_bytes<B>(k), n_rows, x, xs, n_tok, k / kQK, y, ldy,
      [](const uint8_t* xt, int64_t b) { return legacy_act<B>(reinterpret_cast<const ActBlock<B>*>(xt)[b]); },
      kTokens.data(), std::is_same_v<B, BlockQ8_0> ? kAgain.data() : nullptr);
}

// Above these the plain gemm's tiles (built per call) win without --repack (docs/perf-log/prefill.md).
// Each layout's gemm_l2: the same kernels asking for lines into L2 (stream_prefetch.h's Reach); matmul times
// them against gemm and runs the faster.
template <class B, int kMaxTokens>
constexpr PackedGemm kPanels{kRows,    1,          &group_bytes<B>,       &pack<B>,
                             &gemm<B>, kMaxTokens, &gemm<B, Reach::None>, &gemm<B, Reach::L2>};
const PackedGemm& kQ4_0Panels = kPanels<BlockQ4_0, 256>;
const PackedGemm& kQ4_1Panels = kPanels<BlockQ4_1, 256>;
const PackedGemm& kQ5_0Panels = kPanels<BlockQ5_0, 128>;
const PackedGemm& kQ5_1Panels = kPanels<BlockQ5_1, 128>;
const PackedGemm& kQ8_0Panels = kPanels<BlockQ8_0, 96>;
const PackedGemm& kIQ4NLPanels = kPanels<BlockIQ4_NL, 256>;

}  // namespace

const PackedGemm* legacy_panels(GgmlType weight) {
  switch (weight) {
    case GgmlType::Q4_0:
      return &kQ4_0Panels;
    case GgmlType::Q4_1:
      return &kQ4_1Panels;
    case GgmlType::Q5_0:
      return &kQ5_0Panels;
    case GgmlType::Q5_1:
      return &kQ5_1Panels;
    case GgmlType::Q8_0:
      return &kQ8_0Panels;
    case GgmlType::IQ4_NL:
      return &kIQ4NLPanels;
    default:
      return nullptr;
  }
}

}  // namespace tessera::kernels::avx512
