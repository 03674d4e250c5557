// The loop order of the panel gemms (x86/avx512/panels_q4k.cpp, x86/avx512/panels_legacy.cpp,
// x86/avx2/panels_q4k.cpp): rows in blocks of 64, whose panels come from memory once and stay in L2 while every
// chunk of tokens passes over them; panels innermost, so a chunk's activations stay in L1 across the block's panels.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <utility>

#include "tensor/kernels/scratch_buffer.h"

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

// The kernels of one to kChunk tokens as panel_gemm takes them, index n for n tokens: make.template operator()<n>()
// gives each, e.g. []<int T>() { return &panel_tokens<B, T>; }.
template <int kChunk, class Fn, class Make>
constexpr std::array<Fn, kChunk + 1> token_kernels(Make make) {
  return [&]<int... T>(std::integer_sequence<int, T...>) {
    return std::array<Fn, kChunk + 1>{nullptr, make.template operator()<T + 1>()...};
  }
  (std::make_integer_sequence<int, kChunk>{});
}

// A panel gemm's frame: the activation side of every token and block prepared once (prep(token_row, block) -> Act,
// kept [token][block]), then kernels[n] on each panel with each chunk of n tokens, in the order above. kernels[n]
// takes (panel, blocks, x of its first token, x stride, its Acts, y of its first token and row, ldy, valid rows).
// A block's later token chunks read its panels from L2, not memory: `again`, when given, serves those (kernels
// that ask for no lines ahead; prefetching what is already in L2 only pulls in the next block early).
template <int kRows, int kChunk, class Act, class Prep, class Kernel>
[[gnu::always_inline]] inline void panel_gemm(const uint8_t* p, size_t panel_bytes, int64_t n_rows, const uint8_t* x,
                                              size_t xs, int64_t n_tok, int64_t nb, float* y, int64_t ldy, Prep&& prep,
                                              const Kernel* kernels, const Kernel* again = nullptr) {
  Scratch scratch(sizeof(Act) * static_cast<size_t>(nb * n_tok) + 64);
  auto* act = reinterpret_cast<Act*>(scratch.get());
  for (int64_t t = 0; t < n_tok; ++t) {
    for (int64_t b = 0; b < nb; ++b) act[t * nb + b] = prep(x + t * xs, b);
  }
  for_each_panel_chunk<kRows, kChunk>(n_rows, n_tok, [&](int64_t r, int64_t t0, int n, int valid) {
    const Kernel* fns = t0 > 0 && again != nullptr ? again : kernels;
    fns[n](p + static_cast<size_t>(r / kRows) * panel_bytes, nb, x + t0 * xs, xs, act + t0 * nb, y + t0 * ldy + r, ldy,
           valid);
  });
}

}  // namespace tessera::kernels
