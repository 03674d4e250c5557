// A short sweep of all-reduces over a communicator, to measure what the collectives cost on the machines and links
// that will run (the planner's collective model takes its latency and bandwidth from it).
#pragma once

#include <cstddef>
#include <span>
#include <vector>

#include "collective/communicator.h"

namespace tessera::collective {

struct SweepPoint {
  size_t bytes = 0;    // each rank's buffer
  double seconds = 0;  // median time of one all-reduce of it, on this rank
};

// Sizes (in floats) a start-up sweep uses: 4 B, 4 KiB, 32 KiB (a decode step of an 8192-wide model), 1 MiB, 4 MiB.
std::vector<size_t> default_sweep_floats();

// Every rank calls it with the same sizes and repeats: for each size, two untimed all-reduces, then `repeats` timed
// ones (fewer for the large sizes, at least 3); the median on this rank. The communicator's stats are restored, so
// the sweep does not count as the run's traffic.
std::vector<SweepPoint> sweep_all_reduce(Communicator& comm, std::span<const size_t> floats, int repeats = 20);

// Sizes (in bytes) of the point-to-point sweep: 4 B, 4 KiB, 16 KiB (a decode step's activations of a 4096-wide
// model), 256 KiB, 1 MiB (a prompt micro-batch's).
std::vector<size_t> default_p2p_bytes();

// One message between peers of adjacent pipeline stages (--pp), as ping-pongs: a rank in block b of `block` ranks
// pairs with the one in the same place of block b ^ 1 (when there is one); the lower block sends first. Returns the
// median one-way time (half a round trip) per size, on both of a pair; nothing on a rank without a partner. Every rank
// calls it with the same sizes; the communicator's stats are restored.
std::vector<SweepPoint> sweep_point_to_point(Communicator& comm, int block, std::span<const size_t> bytes,
                                             int repeats = 20);

}  // namespace tessera::collective
