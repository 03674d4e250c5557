// bench --shard-alone: one rank's share of a --tp/--ep group timed alone, in this process, as it would run on a
// machine of its own (docs/parallel.md, "Machines with their own memory"). Each rank in turn (or one) loads only its
// share (ModelWeights::sharded, as that rank would) and runs its Stage over a collective::SoloCommunicator, which
// exchanges nothing but counts what the real rank would send; beside the measured times, the planner's prediction
// of that rank's shard at this machine's read rate and the collectives the real group would make per token.
#pragma once

#include <optional>
#include <string>

#include "cli/model_options.h"
#include "engine/benchmark.h"

namespace tessera {

struct ShardAloneRun {
  ModelOptions model;       // --tp/--ep/--tp-shares/--ep-redundancy give the layout; threads from config
  BenchConfig config;       // the tests and thread counts (probe off: the planner's probe stands for it)
  std::optional<int> rank;  // --shard-alone R: this rank only; none: every rank in turn
  std::string output = "md";
  double probe_seconds = 1.0;
  std::string plan_cluster;  // --plan-cluster FILE: the collectives predicted over its links (else not timed)
};

// "all" (the flag alone) or a rank number; throws Error for anything else.
std::optional<int> parse_shard_alone(const std::string& text);

// Throws Error for a layout it cannot stand in for (no --tp/--ep, --pp, a rank outside the group).
int run_shard_alone(const ShardAloneRun& run);

}  // namespace tessera
