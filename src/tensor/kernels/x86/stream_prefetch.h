// Software prefetch for a weight stream read once (decode), shared by the SIMD paths' kernels. It uses only SSE's
// prefetch instructions and is always inlined, so each ISA's file gets its own copy and no out-of-line instance
// compiled with one path's flags can stand in for another's.
#pragma once

#include <xmmintrin.h>

namespace tessera::kernels {

// For a loop that consumes kStep bytes from p per iteration: each line is asked for this far ahead with prefetchnta,
// which brings it into L1 without displacing L2 (the next matmul's first rows, ThreadPool's read-ahead) with bytes
// read once; lines asked for much earlier than they are used are partly gone again by then. The Q4_K panels' lone
// token asks farther (Layout::kLoneFar in x86/avx512/panels_q4k.cpp). Distances and hints tried:
// docs/perf-log/decode-prefetch.md.
constexpr int kPrefetchFarBytes = 4736;

// Which cache the lines go to: L1 (prefetchnta) or L2 as well (prefetcht1). Which streams faster depends on the
// CPU, so the AVX-512 panels have a kernel of each, and matmul runs the one that streams faster (PrefetchChoice).
// None: no software prefetch for a lone token, the hardware prefetcher alone, which follows a stream read front to
// back (every panel layout: docs/perf-log/panels.md); several tokens a pass keep L1's (reach_for), as they re-read
// each line. docs/perf-log/decode-prefetch.md.
enum class Reach { L1, L2, None };

// The reach a kernel of T tokens a pass takes from its layout's choice R.
constexpr Reach reach_for(Reach r, int tokens) { return r == Reach::None && tokens > 1 ? Reach::L1 : r; }

template <int kStep, int kFar = kPrefetchFarBytes, Reach kReach = Reach::L1>
[[gnu::always_inline]] inline void prefetch_stream(const void* p) {
  if constexpr (kReach != Reach::None) {
    const char* far = static_cast<const char*>(p) + kFar;
    for (int o = 0; o <= kStep; o += 64) _mm_prefetch(far + o, kReach == Reach::L1 ? _MM_HINT_NTA : _MM_HINT_T1);
  }
}

// The lines asked for at once by a lone token's kernel over small blocks (the 32-element formats' AVX-512 panels,
// whose groups are asked for together: x86/avx512/panels_legacy.cpp's kGroup), and by the probe's burst loop
// (x86/<isa>/stream_probe.cpp) as they do. Larger blocks (the K-quants', the AVX2 path's) keep asking for each step's
// lines. docs/perf-log/decode-prefetch.md.
constexpr int kPrefetchBurstBytes = 4608;

}  // namespace tessera::kernels
