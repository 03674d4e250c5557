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

}  // namespace tessera::collective
