// Software prefetch for a weight stream read once (decode), shared by the SIMD paths' kernels. It uses only SSE's
// prefetch instructions and is always inlined, so each ISA's file gets its own copy and no out-of-line instance
// compiled with one path's flags can stand in for another's.
#pragma once

#include <xmmintrin.h>

namespace tessera::kernels {

// For a loop that consumes kStep bytes from p per iteration. Each line is asked for twice: far ahead into L2
// (prefetcht1) so that enough lines are in flight to cover DRAM latency at the core's full bandwidth, and shortly
// ahead into L1 so that the loads hit. A prefetcht0 alone a few KB ahead holds one of the core's few L1 fill buffers
// for the whole DRAM latency: on 2 threads over 512 MB of AVX-512 Q4_0 panels in huge pages it read 22 GB/s against
// 28-29 with both distances (the plain read loop 25-28); in the engine, 1b Q4_0 decode at -t 2 rose 15-20%. On the
// AVX2 panels (AMD EPYC, 1b Q4_0 decode, one thread): 13.5-15.7 t/s with 4 KB ahead only, 15.6-16.3 with this.
constexpr int kPrefetchFarBytes = 18944;
constexpr int kPrefetchNearBytes = 1152;

template <int kStep>
[[gnu::always_inline]] inline void prefetch_stream(const void* p) {
  const char* far = static_cast<const char*>(p) + kPrefetchFarBytes;
  const char* near = static_cast<const char*>(p) + kPrefetchNearBytes;
  for (int o = 0; o <= kStep; o += 64) {
    _mm_prefetch(far + o, _MM_HINT_T1);
    _mm_prefetch(near + o, _MM_HINT_T0);
  }
}

}  // namespace tessera::kernels
