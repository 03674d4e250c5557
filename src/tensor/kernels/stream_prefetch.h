// Software prefetch for a weight stream read once (decode), shared by the SIMD paths' kernels. It uses only SSE's
// prefetch instructions and is always inlined, so each ISA's file gets its own copy and no out-of-line instance
// compiled with one path's flags can stand in for another's.
#pragma once

#include <xmmintrin.h>

namespace tessera::kernels {

// For a loop that consumes kStep bytes from p per iteration: each line is asked for ~9 KB ahead with prefetchnta,
// which keeps enough lines in flight to cover DRAM latency at the core's full bandwidth and brings them into L1
// without displacing L2 (the next matmul's first rows, ThreadPool's read-ahead) with bytes read once. Measured on
// an AMD EPYC Zen 5 at -t 2 (docs/benchmarks.md), 1b decode medians: no prefetch -16%; prefetcht1 18.5 KB ahead
// plus prefetcht0 1 KB ahead (what an Intel Xeon liked) 85 t/s Q4_K_M; the prefetcht1 alone 95 (the near one held
// load slots and L1 fill buffers); prefetchnta instead 99-101 Q4_K_M, 102-107 Q4_0 against 78 with prefetcht1.
// Distances from 5 to 18.5 KB were within noise of each other, 28 KB slower.
constexpr int kPrefetchFarBytes = 9472;

template <int kStep>
[[gnu::always_inline]] inline void prefetch_stream(const void* p) {
  const char* far = static_cast<const char*>(p) + kPrefetchFarBytes;
  for (int o = 0; o <= kStep; o += 64) _mm_prefetch(far + o, _MM_HINT_NTA);
}

}  // namespace tessera::kernels
