// Process-wide settings of the C allocator, chosen once at start so that memory freed goes back to the system.
#pragma once

namespace tessera {

// Blocks of 1 MiB and more always come from mmap and go back to the system when freed. glibc's default raises
// that threshold to the largest block freed so far (up to 32 MiB), so after one load-time buffer of 8 MiB (a link
// measurement) every later block of that size comes from the heap, which shrinks only from its top: a long-running
// server's resident memory then swings by tens of MiB with the order of frees (docs/perf-log/recovery.md).
void tune_allocator();

// Hands the pages of every free block back to the system (glibc: malloc_trim), in the heap's middle too. For after
// a burst of short-lived allocations between long-lived ones (a failed stage replaced: weights sent in chunks while
// the new link's buffers and threads are made), which otherwise leaves resident holes that add up over failovers.
void release_free_memory();

}  // namespace tessera
