// Process-wide settings of the C allocator, chosen once at start so that memory freed goes back to the system.
#pragma once

namespace tessera {

// Blocks of 1 MiB and more always come from mmap and go back to the system when freed. glibc's default raises
// that threshold to the largest block freed so far (up to 32 MiB), so after one load-time buffer of 8 MiB (a link
// measurement) every later block of that size comes from the heap, which shrinks only from its top: a long-running
// server's resident memory then swings by tens of MiB with the order of frees (docs/perf-log/recovery.md).
void tune_allocator();

}  // namespace tessera
