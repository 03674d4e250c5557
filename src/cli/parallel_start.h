// Under mpirun --tp/--ep, on every rank before the weights are cut: what the collectives cost over the real
// communicator (a short all-reduce sweep, shown on rank 0 as "collectives: ..."), and, when a plan will be printed,
// each rank's profile, for the planner's prediction of the run (plan::ParallelRun).
#pragma once

#include <memory>
#include <vector>

#include "collective/communicator.h"
#include "plan/plan_cli.h"

namespace tessera {

struct ParallelStartOptions {
  plan::ParallelMode mode = plan::ParallelMode::Tensor;
  std::vector<double> shares;  // --tp-shares; empty: equal
  double ep_redundancy = 0;    // --ep-redundancy, as the run holds the experts
  int threads = 1;             // each rank's compute threads
  bool profile = false;        // also probe every rank (about probe_seconds, all ranks at once)
  double probe_seconds = 0.5;
  const char* backend = "MPI";  // what the collectives run over, for the figures' source
};

// A collective: every rank calls it. Rank 0 gets the ranks' profiles (when asked) and the fitted collectives; the
// others get the collectives only.
std::shared_ptr<const plan::ParallelRun> start_parallel(collective::Communicator& comm, const ParallelStartOptions& o);

}  // namespace tessera
