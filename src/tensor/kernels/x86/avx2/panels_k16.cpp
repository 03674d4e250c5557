// AVX2 path: the K-quants with a scale per 16 elements (Q2_K, Q3_K, Q6_K) as 8-row panels written at load
// in place of the rows' copy, the AVX-512 path's k16 panels at half the width. vpmaddubsw multiplies a vector's
// levels (4 of each of 8 rows) by 4 broadcast activations; a group's products sum in 16 bits and one vpmaddwd
// applies the rows' scales, so a group costs a handful of instructions where the row kernels spend tens on bit
// planes, per-row horizontal sums and float scales.
#include "tensor/kernels/k16_panel_rows.h"
#include "tensor/kernels/panel_loops.h"
#include "tensor/kernels/x86/avx2/common.h"
#include "tensor/kernels/x86/k16_unpack.h"
#include "tensor/quant_blocks.h"

namespace tessera::kernels::avx2 {
namespace {

using quant::BlockQ2_K;
using quant::BlockQ3_K;
using quant::BlockQ6_K;
using quant::BlockQ8_K;
using quant::kQKK;

constexpr int kRows = 8;  // one row per 32-bit lane
constexpr int kTokenChunk = 4;

// Each format turns a unit's kVectors vectors into 4 * kGroupsPerUnit level vectors: vector c of a group holds
// elements 4c..4c+3 of each row (byte 4r + i: element 4c + i of row r). Bit layouts: k16_panel_rows.h. kSum16: how
// many vpmaddubsw results of one group add up in 16 bits before vpmaddwd (|activation| <= 127: a product pair of
// Q6_K's levels + 32 reaches 2 * 63 * 127 = 16002, Q3_K's 2 * 7 * 127).
struct Q6Format : K16Base<K16Format::Q6_K> {
  using Block = BlockQ6_K;
  static constexpr int kSum16 = 2;
  [[gnu::always_inline]] static void unpack(const __m256i* v, __m256i* lv) { x86::K16Unpack<Width>::q6(v, lv); }
};

struct Q3Format : K16Base<K16Format::Q3_K> {
  using Block = BlockQ3_K;
  static constexpr int kSum16 = 4;
  [[gnu::always_inline]] static void unpack(const __m256i* v, __m256i* lv) { x86::K16Unpack<Width>::q3(v, lv); }
};

struct Q2Format : K16Base<K16Format::Q2_K> {
  using Block = BlockQ2_K;
  static constexpr int kSum16 = 4;
  [[gnu::always_inline]] static void unpack(const __m256i* v, __m256i* lv) { x86::K16Unpack<Width>::q2(v, lv); }
};

// One panel block: 8 rows x 256 elements: the scales in pairs of groups (byte 16p + 2r + h: group 2p + h of row r,
// so one sign or zero extension gives each row's lane the words of both), then the units, then the rows' d (and
// Q2_K's dmin) as fp16: front to back in the order the kernel reads, so the hardware prefetcher keeps up
// (docs/perf-log/panels.md). Q6_K's and Q2_K's blocks are exactly the rows' bytes, Q3_K's 4% more.
template <class F>
struct Layout {
  static constexpr size_t kUnitBytes = 32 * F::kVectors;
  static constexpr size_t kScOffset = 0;
  static constexpr size_t kLevelOffset = kScOffset + 128;
  static constexpr size_t kDOffset = kLevelOffset + 16 / F::kGroupsPerUnit * kUnitBytes;
  static constexpr size_t kDminOffset = kDOffset + 2 * kRows;
  static constexpr size_t kBlockBytes = kDminOffset + (F::kMins ? 2 * kRows : 0);
  static_assert(kBlockBytes == kRows * sizeof(typename F::Block) + (F::kOffset == 4 ? 32 : 0));
};

template <class F>
size_t group_bytes(int64_t k) {
  return (static_cast<size_t>(k / kQKK) * Layout<F>::kBlockBytes + 63) / 64 * 64;
}

// Rows past n_rows (the last panel of a matrix whose row count is not a multiple of 8) are zero: d = 0.
template <class F>
void pack(const uint8_t* w, size_t w_stride, int64_t n_rows, int64_t k, uint8_t* out) {
  using L = Layout<F>;
  constexpr int kUnitElements = 16 * F::kGroupsPerUnit;
  const int64_t nb = k / kQKK;
  const size_t panel_bytes = group_bytes<F>(k);
  for (int64_t p = 0; p * kRows < n_rows; ++p) {
    uint8_t* panel = out + static_cast<size_t>(p) * panel_bytes;
    std::memset(panel, 0, panel_bytes);
    for (int64_t b = 0; b < nb; ++b) {
      uint8_t* blk = panel + static_cast<size_t>(b) * L::kBlockBytes;
      for (int r = 0; r < kRows && p * kRows + r < n_rows; ++r) {
        const auto& src =
            reinterpret_cast<const typename F::Block*>(w + static_cast<size_t>(p * kRows + r) * w_stride)[b];
        uint8_t u[kQKK];
        uint8_t scales[16];
        k16_row(F::kFormat, &src, u, scales);
        for (int m = 0; m < kQKK / kUnitElements; ++m) {
          k16_place(F::kFormat, u + kUnitElements * m, r, 32, blk + L::kLevelOffset + L::kUnitBytes * m);
        }
        for (int j = 0; j < 16; ++j) blk[L::kScOffset + 16 * (j / 2) + 2 * r + j % 2] = scales[j];
        std::memcpy(blk + L::kDOffset + 2 * r, &src.d, 2);
        if constexpr (F::kMins) std::memcpy(blk + L::kDminOffset + 2 * r, &src.dmin, 2);
      }
    }
  }
}

// A group's 16-bit sums of products of its 4 level vectors with activations xq, times the rows' scale words sc.
template <class F>
[[gnu::always_inline]] inline __m256i group_dot(const __m256i* lv, const int8_t* xq, __m256i sc) {
  __m256i p[4];
  for (int c = 0; c < 4; ++c) p[c] = _mm256_maddubs_epi16(lv[c], bcast4(xq + 4 * c));
  if constexpr (F::kSum16 == 4) {
    return _mm256_madd_epi16(_mm256_add_epi16(_mm256_add_epi16(p[0], p[1]), _mm256_add_epi16(p[2], p[3])), sc);
  } else {
    return _mm256_add_epi32(_mm256_madd_epi16(_mm256_add_epi16(p[0], p[1]), sc),
                            _mm256_madd_epi16(_mm256_add_epi16(p[2], p[3]), sc));
  }
}

// T tokens (T <= 4) against one panel over all nb blocks; y[t * ldy + r] for the panel's rows r < n_valid. Per row
// and block: isum = sum over groups of scale x dot of the stored levels, off = sum over groups of scale (Q2_K: min)
// x the activations' group sum; the block adds d x xd x (isum - kOffset x off), Q2_K's d x xd x isum - dmin x xd x
// off.
template <class F, int T>
void panel_tokens(const uint8_t* panel, int64_t nb, const uint8_t* x, size_t xs, float* y, int64_t ldy, int n_valid) {
  using L = Layout<F>;
  constexpr int G = F::kGroupsPerUnit;
  // Word h of each row's lane (group 2p + h's scale) into both of its words, for vpmaddwd.
  const __m256i dup0 = _mm256_setr_epi8(0, 1, 0, 1, 4, 5, 4, 5, 8, 9, 8, 9, 12, 13, 12, 13, 0, 1, 0, 1, 4, 5, 4, 5, 8,
                                        9, 8, 9, 12, 13, 12, 13);
  const __m256i dup1 = _mm256_add_epi8(dup0, _mm256_set1_epi8(2));
  __m256 acc[T];
  for (int t = 0; t < T; ++t) acc[t] = _mm256_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* blk = panel + static_cast<size_t>(b) * L::kBlockBytes;
    prefetch_stream<L::kLevelOffset>(blk);  // the scales (and the line after them)
    prefetch_stream<L::kBlockBytes - L::kDOffset>(blk + L::kDOffset);
    const BlockQ8_K* xb[T];
    __m256i isum[T], off[T];
    for (int t = 0; t < T; ++t) {
      xb[t] = reinterpret_cast<const BlockQ8_K*>(x + t * xs) + b;
      isum[t] = _mm256_setzero_si256();
      off[t] = _mm256_setzero_si256();
    }
    for (int p = 0; p < 8; ++p) {
      __m256i lv[8];
      for (int h = 0; h < 2 / G; ++h) {
        const uint8_t* unit = blk + L::kLevelOffset + L::kUnitBytes * static_cast<size_t>(2 / G * p + h);
        prefetch_stream<L::kUnitBytes - 32>(unit);  // every line of 96- and 32-byte units
        __m256i v[F::kVectors];
        for (int k = 0; k < F::kVectors; ++k) v[k] = load256(unit + 32 * k);
        F::unpack(v, lv + 4 * G * h);
      }
      const __m128i raw = load128(blk + L::kScOffset + 16 * p);
      __m256i scw, offw;
      if constexpr (F::kMins) {
        const __m256i both = _mm256_cvtepu8_epi16(raw);
        scw = _mm256_and_si256(both, _mm256_set1_epi16(0x0f));
        offw = _mm256_srli_epi16(both, 4);
      } else {
        scw = offw = _mm256_cvtepi8_epi16(raw);
      }
      const __m256i sc0 = _mm256_shuffle_epi8(scw, dup0), sc1 = _mm256_shuffle_epi8(scw, dup1);
      for (int t = 0; t < T; ++t) {
        const int8_t* xq = xb[t]->qs + 32 * p;
        isum[t] =
            _mm256_add_epi32(isum[t], _mm256_add_epi32(group_dot<F>(lv, xq, sc0), group_dot<F>(lv + 4, xq + 16, sc1)));
        off[t] = _mm256_add_epi32(
            off[t], _mm256_madd_epi16(offw, _mm256_set1_epi32(static_cast<int>(load_u32(xb[t]->bsums + 2 * p)))));
      }
    }
    const __m256 d = _mm256_cvtph_ps(load128(blk + L::kDOffset));
    for (int t = 0; t < T; ++t) {
      const __m256 xd = _mm256_set1_ps(xb[t]->d);
      if constexpr (F::kMins) {
        const __m256 dmin = _mm256_cvtph_ps(load128(blk + L::kDminOffset));
        acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum[t]), _mm256_mul_ps(d, xd), acc[t]);
        acc[t] = _mm256_fnmadd_ps(_mm256_cvtepi32_ps(off[t]), _mm256_mul_ps(dmin, xd), acc[t]);
      } else {
        const __m256i dot = _mm256_sub_epi32(isum[t], _mm256_mullo_epi32(off[t], _mm256_set1_epi32(F::kOffset)));
        acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dot), _mm256_mul_ps(d, xd), acc[t]);
      }
    }
  }
  const __m256i mask = _mm256_cmpgt_epi32(_mm256_set1_epi32(n_valid), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
  for (int t = 0; t < T; ++t) _mm256_maskstore_ps(y + t * ldy, mask, acc[t]);
}

template <class F>
void gemm(const uint8_t* p, int64_t n_rows, const uint8_t* x, size_t xs, int64_t n_tok, int64_t k, float* y,
          int64_t ldy) {
  using Fn = void (*)(const uint8_t*, int64_t, const uint8_t*, size_t, float*, int64_t, int);
  constexpr Fn kTokens[kTokenChunk + 1] = {nullptr, &panel_tokens<F, 1>, &panel_tokens<F, 2>, &panel_tokens<F, 3>,
                                           &panel_tokens<F, 4>};
  const int64_t nb = k / kQKK;
  const size_t panel_bytes = group_bytes<F>(k);
  for_each_panel_chunk<kRows, kTokenChunk>(n_rows, n_tok, [&](int64_t r, int64_t t0, int n, int valid) {
    kTokens[n](p + static_cast<size_t>(r / kRows) * panel_bytes, nb, x + t0 * xs, xs, y + t0 * ldy + r, ldy, valid);
  });
}

// Above 24 tokens the plain gemm is as fast or faster (docs/perf-log/prefill.md).
const PackedGemm kQ2KPanels{kRows, 1, &group_bytes<Q2Format>, &pack<Q2Format>, &gemm<Q2Format>, 24};
const PackedGemm kQ3KPanels{kRows, 1, &group_bytes<Q3Format>, &pack<Q3Format>, &gemm<Q3Format>, 24};
const PackedGemm kQ6KPanels{kRows, 1, &group_bytes<Q6Format>, &pack<Q6Format>, &gemm<Q6Format>, 24};

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

}  // namespace tessera::kernels::avx2
