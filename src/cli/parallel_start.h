// Under mpirun --tp/--ep, on every rank before the weights are cut: what the collectives cost over the real
// communicator (a short all-reduce sweep, shown on rank 0 as "collectives: ..."), and, when a plan will be printed,
// each rank's profile, for the planner's prediction of the run (plan::ParallelRun).
#pragma once

#include <cstdint>
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
  bool show = true;             // rank 0 shows the collectives (under --pp only world rank 0, not every stage's)
};

// Every rank's report (its machine, threads, CPUs and, with `probe`, its probe taken while every rank probes), on
// every rank and the same bits everywhere (so that all ranks may decide from it alike). A collective.
struct RankReports {
  std::vector<float> all;  // kFields a rank, in rank order
  bool probed = false;
  int ranks() const;
  uint64_t machine(int rank) const;  // 0: unknown
  double read_gbps(int rank) const;  // as the rank measured it, the others reading too
  // The planner's nodes, "rank0", "rank1", ...: ranks of one machine carry the machine's summed read rate.
  std::vector<plan::NodeProfile> nodes() const;
};
RankReports report_ranks(collective::Communicator& comm, int threads, bool probe, double probe_seconds);

// A collective: every rank calls it. Rank 0 gets the ranks' profiles (when asked) and the fitted collectives; the
// others get the collectives only.
std::shared_ptr<const plan::ParallelRun> start_parallel(collective::Communicator& comm, const ParallelStartOptions& o);

}  // namespace tessera
