// The loop order of the panel gemms (kernels_avx512_panels.cpp, kernels_avx512_legacy_panels.cpp,
// kernels_avx2_panels.cpp): rows in blocks of 64, whose panels come from memory once and stay in L2 while every
// chunk of tokens passes over them; panels innermost, so a chunk's activations stay in L1 across the block's panels.
#pragma once

#include <cstdint>

namespace tessera::kernels {

constexpr int64_t kPanelBlockRows = 64;

// Calls fn(first_row, first_token, n_tokens, n_rows_valid) for every panel of kRows rows and chunk of up to kChunk
// tokens of an n_rows x n_tok product, in the order above.
template <int kRows, int kChunk, class Fn>
inline void for_each_panel_chunk(int64_t n_rows, int64_t n_tok, Fn&& fn) {
  for (int64_t r0 = 0; r0 < n_rows; r0 += kPanelBlockRows) {
    const int64_t r1 = n_rows - r0 < kPanelBlockRows ? n_rows : r0 + kPanelBlockRows;
    for (int64_t t0 = 0; t0 < n_tok; t0 += kChunk) {
      const int n = static_cast<int>(n_tok - t0 < kChunk ? n_tok - t0 : kChunk);
      for (int64_t r = r0; r < r1; r += kRows) {
        fn(r, t0, n, static_cast<int>(r1 - r < kRows ? r1 - r : kRows));
      }
    }
  }
}

}  // namespace tessera::kernels
