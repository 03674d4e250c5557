// AVX2 path: Q4_K, Q5_K and IQ4_XS weights as 8-row panels, written at load in place of the rows' copy (3%,
// 2% and 1.5% more than the rows). One vpmaddubsw multiplies 4 levels of 8 rows by 4 broadcast activations and a
// 32-element group's products sum in 16 bits, so a group of 8 rows costs 8 multiplies, 7 adds and one widening with
// the scales, where the row kernels widen, scale and add after every multiply, and a few tokens at once share each
// unpacked group with no per-call repacking. IQ4_XS's looked-up values (up to 127 in size) widen every product.
#include <type_traits>

#include "tensor/kernels/panel_loops.h"
#include "tensor/kernels/q4k_panel_row.h"
#include "tensor/kernels/x86/avx2/common.h"
#include "tensor/quant_blocks.h"

namespace tessera::kernels::avx2 {
namespace {

using quant::BlockIQ4_XS;
using quant::BlockQ4_K;
using quant::BlockQ5_K;
using quant::BlockQ8_K;
using quant::kQKK;

constexpr int kRows = 8;        // one row per 32-bit lane
constexpr int kTokenChunk = 4;  // a chunk's 16-bit sums, its accumulators and the levels fit the 16 registers

// ---- Q4_K ----

// One panel block: 8 rows x 256 elements, 1184 bytes (37 x 32, so every load is aligned). First sc: group g's 6-bit
// scale of row r at 8g + r; mn: the mins of groups 2p, 2p + 1 of row r at 16p + 2r (+1); the rows' d and dmin as
// fp16. Then qs: per group g and chunk c, 32 bytes whose byte 4r + i holds element 32g + 4c + i of row r in its low
// nibble, 32g + 16 + 4c + i in its high one. The scales come first so that the block is read front to back: with
// them behind the levels, reading a group's scale ahead of its levels slowed the stream from memory by a sixth.
constexpr size_t kQ4KSc = 0;
constexpr size_t kQ4KMn = kQ4KSc + 64;
constexpr size_t kQ4KD = kQ4KMn + 64;
constexpr size_t kQ4KDmin = kQ4KD + 16;
constexpr size_t kQ4KQs = kQ4KDmin + 16;
// Q5_K: then per group g 32 bytes of fifth bits, byte 4r + i of row r holding bit c for element 32g + 4c + i and
// bit 4 + c for element 32g + 16 + 4c + i (1440 bytes, 2% more than the rows).
constexpr size_t kQ5KHigh = kQ4KQs + 1024;
template <class B>
constexpr size_t kQ4KBytes = kQ5KHigh + (std::is_same_v<B, BlockQ5_K> ? 256 : 0);
static_assert(kQ4KBytes<BlockQ4_K> % 32 == 0 && kQ4KBytes<BlockQ5_K> % 32 == 0 && kQ4KQs % 32 == 0);

template <class B>
size_t q4_k_group_bytes(int64_t k) {
  return (static_cast<size_t>(k / kQKK) * kQ4KBytes<B> + 63) / 64 * 64;
}

template <class B>
void q4_k_pack(const uint8_t* w, size_t w_stride, int64_t n_rows, int64_t k, uint8_t* out) {
  const int64_t nb = k / kQKK;
  const size_t panel_bytes = q4_k_group_bytes<B>(k);
  for (int64_t p = 0; p * kRows < n_rows; ++p) {
    uint8_t* panel = out + static_cast<size_t>(p) * panel_bytes;
    std::memset(panel, 0, panel_bytes);  // rows past n_rows: d = dmin = 0
    for (int64_t b = 0; b < nb; ++b) {
      uint8_t* blk = panel + static_cast<size_t>(b) * kQ4KBytes<B>;
      for (int r = 0; r < kRows && p * kRows + r < n_rows; ++r) {
        const auto& src = reinterpret_cast<const B*>(w + static_cast<size_t>(p * kRows + r) * w_stride)[b];
        const Q4KPanelRow row = q4k_panel_row(src);
        for (int g = 0; g < 8; ++g) {
          for (int c = 0; c < 4; ++c) std::memcpy(blk + kQ4KQs + (4 * g + c) * 32 + 4 * r, row.qs + 16 * g + 4 * c, 4);
          blk[kQ4KSc + 8 * g + r] = row.scales[g];
          blk[kQ4KMn + 16 * (g / 2) + 2 * r + g % 2] = row.mins[g];
          if constexpr (std::is_same_v<B, BlockQ5_K>) std::memcpy(blk + kQ5KHigh + 32 * g + 4 * r, row.high + 4 * g, 4);
        }
        std::memcpy(blk + kQ4KD + 2 * r, &src.d, 2);
        std::memcpy(blk + kQ4KDmin + 2 * r, &src.dmin, 2);
      }
    }
  }
}

// The activation side of a Q8_K block: its eight 32-element group sums as int16 pairs (g0, g1) ... (g6, g7), and d.
struct Q4KAct {
  int32_t gsum_pairs[4];
  float d;
};

template <class B, int T>
void q4_k_tokens(const uint8_t* panel, int64_t nb, const uint8_t* x, size_t xs, const Q4KAct* act, float* y,
                 int64_t ldy, int n_valid) {
  constexpr bool kFive = std::is_same_v<B, BlockQ5_K>;
  const __m256i m4 = _mm256_set1_epi8(0x0f);
  // Row r's scale byte (at r of the group's 8) into both 16-bit words of lane r, for vpmaddwd.
  const __m256i spread = _mm256_setr_epi8(0, -1, 0, -1, 1, -1, 1, -1, 2, -1, 2, -1, 3, -1, 3, -1, 4, -1, 4, -1, 5, -1,
                                          5, -1, 6, -1, 6, -1, 7, -1, 7, -1);
  __m256 acc[T];
  for (int t = 0; t < T; ++t) acc[t] = _mm256_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* blk = panel + static_cast<size_t>(b) * kQ4KBytes<B>;
    prefetch_stream<kQ4KQs>(blk);
    const int8_t* xq[T];
    __m256i isum[T];
    for (int t = 0; t < T; ++t) {
      xq[t] = reinterpret_cast<const BlockQ8_K*>(x + t * xs)[b].qs;
      isum[t] = _mm256_setzero_si256();
    }
    for (int g = 0; g < 8; ++g) {
      prefetch_stream<64>(blk + kQ4KQs + 128 * g);  // a group's 2 lines at a time, not the block's 19 at once
      if constexpr (kFive) prefetch_stream<0>(blk + kQ5KHigh + 32 * g);
      uint64_t sc8;
      std::memcpy(&sc8, blk + kQ4KSc + 8 * g, 8);
      const __m256i sc = _mm256_shuffle_epi8(_mm256_set1_epi64x(static_cast<int64_t>(sc8)), spread);
      for (int t = 0; t < T; ++t) {
        const __m256i dot =
            kFive ? five_bit_group_dot(blk + kQ4KQs + 128 * g, blk + kQ5KHigh + 32 * g, xq[t] + 32 * g, m4, sc)
                  : _mm256_madd_epi16(group_products(blk + kQ4KQs + 128 * g, xq[t] + 32 * g, m4), sc);
        isum[t] = _mm256_add_epi32(isum[t], dot);
      }
    }
    const __m256 d = _mm256_cvtph_ps(load128(blk + kQ4KD));
    const __m256 dmin = _mm256_cvtph_ps(load128(blk + kQ4KDmin));
    for (int t = 0; t < T; ++t) {
      const Q4KAct& a = act[t * nb + b];
      __m256i m = _mm256_setzero_si256();
      for (int p = 0; p < 4; ++p) {
        m = _mm256_add_epi32(m, _mm256_madd_epi16(_mm256_cvtepu8_epi16(load128(blk + kQ4KMn + 16 * p)),
                                                  _mm256_set1_epi32(a.gsum_pairs[p])));
      }
      const __m256 xd = _mm256_set1_ps(a.d);
      acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum[t]), _mm256_mul_ps(d, xd), acc[t]);
      acc[t] = _mm256_fnmadd_ps(_mm256_cvtepi32_ps(m), _mm256_mul_ps(dmin, xd), acc[t]);
    }
  }
  const __m256i mask = _mm256_cmpgt_epi32(_mm256_set1_epi32(n_valid), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
  for (int t = 0; t < T; ++t) _mm256_maskstore_ps(y + t * ldy, mask, acc[t]);
}

template <class B>
void q4_k_gemm(const uint8_t* p, int64_t n_rows, const uint8_t* x, size_t xs, int64_t n_tok, int64_t k, float* y,
               int64_t ldy) {
  using Fn = void (*)(const uint8_t*, int64_t, const uint8_t*, size_t, const Q4KAct*, float*, int64_t, int);
  constexpr Fn kTokens[kTokenChunk + 1] = {nullptr, &q4_k_tokens<B, 1>, &q4_k_tokens<B, 2>, &q4_k_tokens<B, 3>,
                                           &q4_k_tokens<B, 4>};
  const int64_t nb = k / kQKK;
  Scratch scratch(sizeof(Q4KAct) * static_cast<size_t>(nb * n_tok) + 64);
  auto* act = reinterpret_cast<Q4KAct*>(scratch.get());  // [token][block]
  for (int64_t t = 0; t < n_tok; ++t) {
    const auto* xt = reinterpret_cast<const BlockQ8_K*>(x + t * xs);
    for (int64_t b = 0; b < nb; ++b) {
      _mm_storeu_si128(reinterpret_cast<__m128i*>(act[t * nb + b].gsum_pairs),
                       _mm_hadd_epi16(load128(xt[b].bsums), load128(xt[b].bsums + 8)));
      act[t * nb + b].d = xt[b].d;
    }
  }
  const size_t panel_bytes = q4_k_group_bytes<B>(k);
  for_each_panel_chunk<kRows, kTokenChunk>(n_rows, n_tok, [&](int64_t r, int64_t t0, int n, int valid) {
    kTokens[n](p + static_cast<size_t>(r / kRows) * panel_bytes, nb, x + t0 * xs, xs, act + t0 * nb, y + t0 * ldy + r,
               ldy, valid);
  });
}

// ---- IQ4_XS ----

// One panel block: 8 rows x 256 elements, 1104 bytes (the rows' plus 1.5%): group g's signed scale (ls - 32) of row
// r at 8g + r, the rows' d as fp16, then qs as Q4_K's (its rows already keep element 32g + j in the low nibble of
// byte 16g + j and 32g + 16 + j in the high one).
constexpr size_t kIQ4XSSc = 0;
constexpr size_t kIQ4XSD = kIQ4XSSc + 64;
constexpr size_t kIQ4XSQs = kIQ4XSD + 16;
constexpr size_t kIQ4XSBytes = kIQ4XSQs + 1024;

size_t iq4_xs_group_bytes(int64_t k) { return (static_cast<size_t>(k / kQKK) * kIQ4XSBytes + 63) / 64 * 64; }

void iq4_xs_pack(const uint8_t* w, size_t w_stride, int64_t n_rows, int64_t k, uint8_t* out) {
  const int64_t nb = k / kQKK;
  const size_t panel_bytes = iq4_xs_group_bytes(k);
  for (int64_t p = 0; p * kRows < n_rows; ++p) {
    uint8_t* panel = out + static_cast<size_t>(p) * panel_bytes;
    std::memset(panel, 0, panel_bytes);  // rows past n_rows: d = 0
    for (int64_t b = 0; b < nb; ++b) {
      uint8_t* blk = panel + static_cast<size_t>(b) * kIQ4XSBytes;
      for (int r = 0; r < kRows && p * kRows + r < n_rows; ++r) {
        const auto& src = reinterpret_cast<const BlockIQ4_XS*>(w + static_cast<size_t>(p * kRows + r) * w_stride)[b];
        for (int g = 0; g < 8; ++g) {
          for (int c = 0; c < 4; ++c)
            std::memcpy(blk + kIQ4XSQs + (4 * g + c) * 32 + 4 * r, src.qs + 16 * g + 4 * c, 4);
          blk[kIQ4XSSc + 8 * g + r] = static_cast<uint8_t>(quant::iq4xs_scale(src, g));
        }
        std::memcpy(blk + kIQ4XSD + 2 * r, &src.d, 2);
      }
    }
  }
}

template <int T>
void iq4_xs_tokens(const uint8_t* panel, int64_t nb, const uint8_t* x, size_t xs, float* y, int64_t ldy, int n_valid) {
  const __m256i m4 = _mm256_set1_epi8(0x0f);
  const __m256i table = iq4nl_table();
  // Row r's scale byte (at r of the group's 8) into the high byte of both 16-bit words of lane r; an arithmetic
  // shift then sign-extends it for vpmaddwd.
  const __m256i spread = _mm256_setr_epi8(-1, 0, -1, 0, -1, 1, -1, 1, -1, 2, -1, 2, -1, 3, -1, 3, -1, 4, -1, 4, -1, 5,
                                          -1, 5, -1, 6, -1, 6, -1, 7, -1, 7);
  __m256 acc[T];
  for (int t = 0; t < T; ++t) acc[t] = _mm256_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* blk = panel + static_cast<size_t>(b) * kIQ4XSBytes;
    prefetch_stream<kIQ4XSQs>(blk);
    __m256i isum[T];
    for (int t = 0; t < T; ++t) isum[t] = _mm256_setzero_si256();
    for (int g = 0; g < 8; ++g) {
      prefetch_stream<64>(blk + kIQ4XSQs + 128 * g);
      uint64_t sc8;
      std::memcpy(&sc8, blk + kIQ4XSSc + 8 * g, 8);
      const __m256i sc =
          _mm256_srai_epi16(_mm256_shuffle_epi8(_mm256_set1_epi64x(static_cast<int64_t>(sc8)), spread), 8);
      for (int t = 0; t < T; ++t) {
        const int8_t* xq = reinterpret_cast<const BlockQ8_K*>(x + t * xs)[b].qs + 32 * g;
        isum[t] = _mm256_add_epi32(isum[t], table_group_dot(blk + kIQ4XSQs + 128 * g, xq, table, m4, sc));
      }
    }
    const __m256 d = _mm256_cvtph_ps(load128(blk + kIQ4XSD));
    for (int t = 0; t < T; ++t) {
      const __m256 xd = _mm256_set1_ps(reinterpret_cast<const BlockQ8_K*>(x + t * xs)[b].d);
      acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum[t]), _mm256_mul_ps(d, xd), acc[t]);
    }
  }
  const __m256i mask = _mm256_cmpgt_epi32(_mm256_set1_epi32(n_valid), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
  for (int t = 0; t < T; ++t) _mm256_maskstore_ps(y + t * ldy, mask, acc[t]);
}

void iq4_xs_gemm(const uint8_t* p, int64_t n_rows, const uint8_t* x, size_t xs, int64_t n_tok, int64_t k, float* y,
                 int64_t ldy) {
  using Fn = void (*)(const uint8_t*, int64_t, const uint8_t*, size_t, float*, int64_t, int);
  constexpr Fn kTokens[kTokenChunk + 1] = {nullptr, &iq4_xs_tokens<1>, &iq4_xs_tokens<2>, &iq4_xs_tokens<3>,
                                           &iq4_xs_tokens<4>};
  const int64_t nb = k / kQKK;
  const size_t panel_bytes = iq4_xs_group_bytes(k);
  for_each_panel_chunk<kRows, kTokenChunk>(n_rows, n_tok, [&](int64_t r, int64_t t0, int n, int valid) {
    kTokens[n](p + static_cast<size_t>(r / kRows) * panel_bytes, nb, x + t0 * xs, xs, y + t0 * ldy + r, ldy, valid);
  });
}

// Above these the plain gemm on the rows is as fast or faster; Q5_K's two widenings per group cost it more
// (docs/perf-log/prefill.md).
constexpr int kQ4KMaxTokens = 64;
constexpr int kQ5KMaxTokens = 24;
constexpr int kIQ4XSMaxTokens = 24;
const PackedGemm kQ4KPanels{kRows,        1, &q4_k_group_bytes<BlockQ4_K>, &q4_k_pack<BlockQ4_K>, &q4_k_gemm<BlockQ4_K>,
                            kQ4KMaxTokens};
const PackedGemm kQ5KPanels{kRows,        1, &q4_k_group_bytes<BlockQ5_K>, &q4_k_pack<BlockQ5_K>, &q4_k_gemm<BlockQ5_K>,
                            kQ5KMaxTokens};
const PackedGemm kIQ4XSPanels{kRows, 1, &iq4_xs_group_bytes, &iq4_xs_pack, &iq4_xs_gemm, kIQ4XSMaxTokens};

}  // namespace

const PackedGemm* q4k_panels(GgmlType weight) {
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

}  // namespace tessera::kernels::avx2
