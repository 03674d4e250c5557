// The loop both AVX2 gemms share (x86/avx2/gemm.cpp, x86/avx2/gemm_kquants.cpp): rows in passes of 8 panels of
// 8 rows built per call, each pass against all tokens in steps of kTokens, so a step's tokens are read once per
// 64 rows; and the vec_dot loop that serves calls too small to pay for building panels.
#pragma once

#include <cstdint>
#include <type_traits>

#include "tensor/kernels/x86/avx2/common.h"

namespace tessera::kernels::avx2 {

constexpr int kPanelRows = 8;
constexpr int kPanelsPerPass = 8;

// y[t * ldy + r] = dot(row r, token t) for every row and token.
inline void vec_dot_rows(VecDotFn dot, const uint8_t* w, size_t ws, int64_t n_rows, const uint8_t* x, size_t xs,
                         int64_t n_tok, int64_t k, float* y, int64_t ldy) {
  for (int64_t r = 0; r < n_rows; ++r) {
    for (int64_t t = 0; t < n_tok; ++t) y[t * ldy + r] = dot(w + r * ws, x + t * xs, k);
  }
}

// fn(std::integral_constant<int, n>) for the runtime n in [1, N]: the micro-kernels take their token count as a
// template argument, so their accumulators stay in registers.
template <int N, class Fn>
void with_tokens(int n, Fn&& fn) {
  if constexpr (N > 0) {
    if (n == N) return fn(std::integral_constant<int, N>{});
    with_tokens<N - 1>(n, fn);
  }
}

// A panel's T outputs: y[t * ldy + r] for its rows (all 8 but for the matrix's last panel).
template <int T>
void store_panel(const __m256 (&acc)[T], float* y, int64_t ldy, int rows) {
  const __m256i mask = _mm256_cmpgt_epi32(_mm256_set1_epi32(rows), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
  for (int t = 0; t < T; ++t) {
    if (rows == kPanelRows) {
      _mm256_storeu_ps(y + t * ldy, acc[t]);
    } else {
      _mm256_maskstore_ps(y + t * ldy, mask, acc[t]);
    }
  }
}

// build(first_row, rows, panel) writes one panel of up to 8 rows (panel_bytes each); micro(n, first_token, panel,
// first_row, rows) runs one panel against n <= kTokens tokens.
template <int kTokens, class Build, class Micro>
void panel_passes(int64_t n_rows, int64_t n_tok, size_t panel_bytes, Build&& build, Micro&& micro) {
  Scratch panels(panel_bytes * kPanelsPerPass);
  const auto rows_left = [&](int64_t r) { return static_cast<int>(n_rows - r < kPanelRows ? n_rows - r : kPanelRows); };
  for (int64_t r0 = 0; r0 < n_rows; r0 += kPanelRows * kPanelsPerPass) {
    int np = 0;
    for (; np < kPanelsPerPass && r0 + np * kPanelRows < n_rows; ++np) {
      const int64_t r = r0 + np * kPanelRows;
      build(r, rows_left(r), panels.get() + np * panel_bytes);
    }
    for (int64_t t0 = 0; t0 < n_tok; t0 += kTokens) {
      const int n = static_cast<int>(n_tok - t0 < kTokens ? n_tok - t0 : kTokens);
      for (int p = 0; p < np; ++p) {
        const int64_t r = r0 + p * kPanelRows;
        micro(n, t0, panels.get() + p * panel_bytes, r, rows_left(r));
      }
    }
  }
}

}  // namespace tessera::kernels::avx2
