// Handing memory freed back to the system (the C allocator keeps freed pages resident otherwise).
#pragma once

namespace tessera {

// Hands the pages of every free block back to the system (glibc: malloc_trim), in the heap's middle too. For after
// a burst of short-lived allocations between long-lived ones (a failed stage replaced: weights sent in chunks while
// the new link's buffers and threads are made), which otherwise leaves resident holes that add up over failovers.
void release_free_memory();

}  // namespace tessera
