// Software prefetch for a weight stream read once (decode), shared by the SIMD paths' kernels. It uses only SSE's
// prefetch instructions and is always inlined, so each ISA's file gets its own copy and no out-of-line instance
// compiled with one path's flags can stand in for another's.
#pragma once

#include <xmmintrin.h>

namespace tessera::kernels {

// For a loop that consumes kStep bytes from p per iteration: each line is asked for ~4.6 KB ahead with prefetchnta,
// which brings it into L1 without displacing L2 (the next matmul's first rows, ThreadPool's read-ahead) with bytes
// read once. Measured on an AMD EPYC Zen 5 at -t 2 (docs/benchmarks.md), 1b decode: no prefetch -16%; prefetcht1
// 18.5 KB ahead plus prefetcht0 1 KB ahead (what an Intel Xeon liked) 85 t/s Q4_K_M; the prefetcht1 alone 95 (the
// near one held load slots and L1 fill buffers); prefetchnta 9.3 KB ahead 99-101 Q4_K_M, 102-107 Q4_0. Then, once
// every format read panels, 4.6 KB against 9.3 KB: Q4_0 +19%, moe-small +10%, Q4_K_M +4.5%, Q8_0 +4% (alternated
// rounds); 2.3, 3.5 and 5.8 KB were no better than 4.6, prefetcht0 and prefetcht2 at 4.6 KB 4-17% slower. Lines
// asked for much earlier than they are used are partly gone again by then. (The Q4_K panels' lone token asks 1.5x as
// far: Layout::kLoneFar in x86/avx512/panels_q4k.cpp.)
constexpr int kPrefetchFarBytes = 4736;

// Which cache the lines go to. L1 (prefetchnta) is what the Zen 5 VM liked; on an AMD EPYC Zen 4 VM (~33 GB/s, one
// core reading 30 of them) it held the AVX-512 panels' decode to 57-82% of the roofline, and with prefetcht1 (into
// L2 as well) the same steps took 2-22% less time (Q4_K most, Q6_K least), while prefetcht1 was 4-17% slower than
// it on the Zen 5.
// So the AVX-512 panels have a kernel of each, and matmul runs the one that streams faster (PrefetchChoice).
// None: no software prefetch for a lone token, the hardware prefetcher alone, which follows a stream read front to
// back (every panel layout since "Panels read front to back" in docs/benchmarks.md); several tokens a pass keep L1's
// (reach_for), as they re-read each line and Q8_0's batched decode ran at half speed without.
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

// The lines the probe's burst loop asks for at once (engine/probe_avx512.cpp): as a lone token's kernel over small
// blocks (the 32-element formats' AVX-512 panels, 288-544 bytes a block) did, whose groups were of this size and asked
// for a group's lines together, the same distance ahead. Their groups are 2.3 KB since their d come first
// (x86/avx512/panels_legacy.cpp's kGroup), each still asked for at once. Measured with the 1b decode's matmuls
// alternating step by step between two builds on the Zen 5 VM, with the blocks as they were: Q4_0 5-13% faster than
// each block asking for its own 5 lines (also when each line was asked for exactly once, so not the repeats), Q4_1 9%,
// Q5_0 5%, Q5_1 and IQ4_NL 4%; 9.2 KB bursts 10% slower. The K-quants' 2.2-2.9 KB blocks ran 2-4% slower in bursts of
// two, and the AVX2 path's 8-row Q4_0 blocks 4-10% slower in bursts of 32: they keep asking for each step's lines.
constexpr int kPrefetchBurstBytes = 4608;

}  // namespace tessera::kernels
