// The tiling loop of the float formats' gemm (F32, F16, BF16 weights, f32 activations), written once for every
// vector width. Included only by the ISA folders' float.cpp, each instantiating it with its own tile type, so every
// path gets its own code compiled with its own flags.
#pragma once

#include <cstddef>
#include <cstdint>

namespace tessera::kernels::x86 {

// Tile: the path's width traits for this loop: kRows x kTokens tiles, and Tile::template run<W, R, T>(w, ws, xt,
// xs, kc, y, ldy, first), R weight rows against T tokens over kc elements (first: y is written, else added to).
// W: the weight format (kBytes per element).
// k is cut into chunks and rows into blocks of kBlockRows so that a chunk of a row block (weights) and of a token
// tile (activations) both stay in L1 while every token tile meets every row tile of the block
// (docs/perf-log/prefill.md).
template <class Tile, class W>
void gemm_float(const uint8_t* w, size_t ws, int64_t n_rows, const uint8_t* x, size_t xs, int64_t n_tok, int64_t k,
                float* y, int64_t ldy) {
  constexpr int kR = Tile::kRows;
  constexpr int kT = Tile::kTokens;
  constexpr int64_t kChunk = 512;
  constexpr int64_t kBlockRows = 16;
  for (int64_t k0 = 0; k0 < k; k0 += kChunk) {
    const int64_t kc = k - k0 < kChunk ? k - k0 : kChunk;
    const bool first = k0 == 0;
    for (int64_t rb = 0; rb < n_rows; rb += kBlockRows) {
      const int64_t rb_end = n_rows - rb < kBlockRows ? n_rows : rb + kBlockRows;
      for (int64_t t = 0; t < n_tok;) {
        const bool full_t = n_tok - t >= kT;
        const uint8_t* xt = x + static_cast<size_t>(t) * xs + static_cast<size_t>(k0) * sizeof(float);
        for (int64_t r = rb; r < rb_end;) {
          const bool full_r = rb_end - r >= kR;
          const uint8_t* wr = w + static_cast<size_t>(r) * ws + static_cast<size_t>(k0) * W::kBytes;
          float* yt = y + t * ldy + r;
          if (full_r && full_t) {
            Tile::template run<W, kR, kT>(wr, ws, xt, xs, kc, yt, ldy, first);
          } else if (full_r) {
            Tile::template run<W, kR, 1>(wr, ws, xt, xs, kc, yt, ldy, first);
          } else if (full_t) {
            Tile::template run<W, 1, kT>(wr, ws, xt, xs, kc, yt, ldy, first);
          } else {
            Tile::template run<W, 1, 1>(wr, ws, xt, xs, kc, yt, ldy, first);
          }
          r += full_r ? kR : 1;
        }
        t += full_t ? kT : 1;
      }
    }
  }
}

}  // namespace tessera::kernels::x86
