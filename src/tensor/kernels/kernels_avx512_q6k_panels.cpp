// AVX-512 path, part 7: Q6_K weights as 16-row panels written at load in place of the rows' copy (the same bytes
// plus 1%), as kernels_avx512_panels.cpp does for Q4_K. The row kernel spends ~15 instructions per cache line on
// nibble and bit-plane shuffles and a horizontal sum per row; here three loads and nine logic ops give the four
// vpdpbusd operands of a 16-element group of 16 rows, so decode keeps up with the memory.
#include "tensor/kernels/avx512_common.h"
#include "tensor/kernels/panel_loops.h"
#include "tensor/quant_blocks.h"
#include "tensor/quant_internal.h"

namespace tessera::kernels::avx512 {
namespace {

using quant::BlockQ6_K;
using quant::BlockQ8_K;

// One panel block: 16 rows x 256 elements. Group j (16 elements, the span of one scale) takes three 64-byte
// vectors v0..v2: byte 4r + i of vk holds the unsigned level (0..63) of element 16j + 4k + i of row r in its low 6
// bits and bits 2k, 2k + 1 of element 16j + 12 + i's level in its top 2 bits. Then the scales, 16 bytes per group
// (byte r: row r's), then the rows' d as fp16, then padding.
constexpr int kRows = kPanelRowCount;
constexpr size_t kLevelBytes = 16 * 192;
constexpr size_t kScOffset = kLevelBytes;
constexpr size_t kDOffset = kScOffset + 256;
constexpr size_t kBlockBytes = 3392;  // 53 * 64 (3360 used): blocks stay 64-byte aligned
static_assert(kDOffset + 2 * kRows <= kBlockBytes && kBlockBytes % 64 == 0);

size_t group_bytes(int64_t k) { return static_cast<size_t>(k / quant::kQKK) * kBlockBytes; }

// Rows past n_rows (the last panel of a matrix whose row count is not a multiple of 16) are zero: d = 0.
void pack(const uint8_t* w, size_t w_stride, int64_t n_rows, int64_t k, uint8_t* out) {
  const int64_t nb = k / quant::kQKK;
  for (int64_t p = 0; p * kRows < n_rows; ++p) {
    for (int64_t b = 0; b < nb; ++b) {
      uint8_t* blk = out + static_cast<size_t>(p * nb + b) * kBlockBytes;
      std::memset(blk, 0, kBlockBytes);
      for (int r = 0; r < kRows && p * kRows + r < n_rows; ++r) {
        const auto& src = reinterpret_cast<const BlockQ6_K*>(w + static_cast<size_t>(p * kRows + r) * w_stride)[b];
        int8_t levels[quant::kQKK];
        quant::q6k_levels(src, levels);
        for (int j = 0; j < 16; ++j) {
          for (int i = 0; i < 4; ++i) {
            const int top = levels[16 * j + 12 + i] + 32;
            for (int kv = 0; kv < 3; ++kv) {
              const int level = levels[16 * j + 4 * kv + i] + 32;
              blk[192 * j + 64 * kv + 4 * r + i] = static_cast<uint8_t>(level | ((top >> (2 * kv)) & 3) << 6);
            }
          }
          blk[kScOffset + 16 * j + r] = static_cast<uint8_t>(src.scales[j]);
        }
        std::memcpy(blk + kDOffset + 2 * r, &src.d, 2);
      }
    }
  }
}

// The activation side of one Q8_K block: each group's sum times the levels' offset 32, negated (a group's dot
// starts from it), and d.
struct PanelAct {
  int32_t neg_offset[16];
  float d;
};

// T tokens (T <= 4) against one panel over all nb blocks; y[t * ldy + r] for the panel's rows r < n_valid.
template <int T>
void panel_tokens(const uint8_t* panel, int64_t nb, const uint8_t* x, size_t xs, const PanelAct* act, float* y,
                  int64_t ldy, int n_valid) {
  const __m512i m6 = _mm512_set1_epi8(0x3f);
  const __m512i m01 = _mm512_set1_epi8(0x03);
  const __m512i m23 = _mm512_set1_epi8(0x0c);
  const __m512i m45 = _mm512_set1_epi8(0x30);
  __m512 acc[T];
#pragma GCC unroll 4
  for (int t = 0; t < T; ++t) acc[t] = _mm512_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* blk = panel + static_cast<size_t>(b) * kBlockBytes;
    prefetch_stream<kBlockBytes - kLevelBytes - 64>(blk + kLevelBytes);
    const int8_t* xq[T];
    __m512 blk_sum[T];
#pragma GCC unroll 4
    for (int t = 0; t < T; ++t) {
      xq[t] = reinterpret_cast<const BlockQ8_K*>(x + t * xs)[b].qs;
      blk_sum[t] = _mm512_setzero_ps();
    }
    for (int j = 0; j < 16; ++j) {
      const uint8_t* g = blk + 192 * j;
      prefetch_stream<192 - 64>(g);
      __m512i v[3];
      for (int kv = 0; kv < 3; ++kv) {
        v[kv] = _mm512_load_si512(g + 64 * kv);
        in_register(v[kv]);
      }
      __m512i top = _mm512_and_si512(_mm512_srli_epi16(v[0], 6), m01);
      top = or_and(top, _mm512_srli_epi16(v[1], 4), m23);
      top = or_and(top, _mm512_srli_epi16(v[2], 2), m45);
      const __m512i lv[4] = {_mm512_and_si512(v[0], m6), _mm512_and_si512(v[1], m6), _mm512_and_si512(v[2], m6), top};
      // The scale as f32: a convert and an FMA per token rather than vpmulld's two uops; the product of a group's
      // exact dot (|dot| <= 2^16) and its scale stays exact.
      const __m512 sc = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(load128(blk + kScOffset + 16 * j)));
#pragma GCC unroll 4
      for (int t = 0; t < T; ++t) {
        __m512i dot = _mm512_set1_epi32(act[t * nb + b].neg_offset[j]);
        for (int c = 0; c < 4; ++c) dot = dpbusd_bcast(dot, lv[c], xq[t] + 16 * j + 4 * c);
        blk_sum[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot), sc, blk_sum[t]);
      }
    }
    const __m512 d = _mm512_cvtph_ps(_mm256_load_si256(reinterpret_cast<const __m256i*>(blk + kDOffset)));
#pragma GCC unroll 4
    for (int t = 0; t < T; ++t) {
      acc[t] = _mm512_fmadd_ps(blk_sum[t], _mm512_mul_ps(d, _mm512_set1_ps(act[t * nb + b].d)), acc[t]);
    }
  }
  const auto mask = static_cast<__mmask16>((1u << n_valid) - 1);
#pragma GCC unroll 4
  for (int t = 0; t < T; ++t) _mm512_mask_storeu_ps(y + t * ldy, mask, acc[t]);
}

using PanelFn = void (*)(const uint8_t*, int64_t, const uint8_t*, size_t, const PanelAct*, float*, int64_t, int);
constexpr PanelFn kPanelTokens[kPanelTokenChunk + 1] = {nullptr, &panel_tokens<1>, &panel_tokens<2>, &panel_tokens<3>,
                                                        &panel_tokens<4>};

void gemm(const uint8_t* p, int64_t n_rows, const uint8_t* x, size_t xs, int64_t n_tok, int64_t k, float* y,
          int64_t ldy) {
  const int64_t nb = k / quant::kQKK;
  Scratch scratch(sizeof(PanelAct) * static_cast<size_t>(nb * n_tok) + 64);
  auto* act = reinterpret_cast<PanelAct*>(scratch.get());  // [token][block]
  for (int64_t t = 0; t < n_tok; ++t) {
    const auto* xt = reinterpret_cast<const BlockQ8_K*>(x + t * xs);
    for (int64_t b = 0; b < nb; ++b) {
      PanelAct& a = act[t * nb + b];
      const __m512i sums = _mm512_cvtepi16_epi32(load256(xt[b].bsums));
      _mm512_storeu_si512(a.neg_offset, _mm512_sub_epi32(_mm512_setzero_si512(), _mm512_slli_epi32(sums, 5)));
      a.d = xt[b].d;
    }
  }
  const size_t panel_bytes = group_bytes(k);
  for_each_panel_chunk<kRows, kPanelTokenChunk>(n_rows, n_tok, [&](int64_t r, int64_t t0, int n, int valid) {
    kPanelTokens[n](p + static_cast<size_t>(r / kRows) * panel_bytes, nb, x + t0 * xs, xs, act + t0 * nb,
                    y + t0 * ldy + r, ldy, valid);
  });
}

constexpr int kPanelMaxTokens = 0;  // every token count, as the Q4_K panels
const PackedGemm kQ6KPanels{kRows, 1, &group_bytes, &pack, &gemm, kPanelMaxTokens};

}  // namespace

const PackedGemm* q6k_panels(GgmlType weight) { return weight == GgmlType::Q6_K ? &kQ6KPanels : nullptr; }

}  // namespace tessera::kernels::avx512
