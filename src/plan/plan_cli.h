// The plan that `run`, `bench` and `serve` print at start: the nodes the user chose (this machine and its --workers,
// profiled live), the user's split (or the runtime's even default) against the planner's choice and against one
// machine, as the same table `tessera plan` prints.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "plan/cluster.h"
#include "plan/live_cluster.h"
#include "plan/model_shape.h"
#include "plan/planner.h"

namespace tessera::plan {

// A run under mpirun with --tp/--ep: what the ranks measured at start (src/cli/parallel_start.h).
struct ParallelRun {
  ParallelMode mode = ParallelMode::Tensor;
  std::vector<double> shares;                   // --tp-shares; empty: equal
  double ep_redundancy = kDefaultEpRedundancy;  // --ep-redundancy
  std::vector<NodeProfile> ranks;               // rank 0 first; empty: not profiled (rank 0 probes and stands for all)
  CollectiveProfile collectives;  // the all-reduce sweep over the real communicator (under --pp: in rank 0's stage)
  // --pp P: P stages of collectives.ranks ranks each (world rank r is rank r % N of stage P - 1 - r / N), holding
  // these layers (first, last; stage 0 first); `p2p` is one message between peers of adjacent stages, measured at
  // start (its latency and cost per byte, as an all-reduce's), and `split` how the layers were cut and why.
  int pp = 1;
  std::vector<std::pair<int64_t, int64_t>> stage_layers;
  CollectiveProfile p2p;
  std::string split;
};

struct CliPlanRequest {
  std::string model_path;
  std::string workers;  // --workers text; empty: this machine alone
  std::string split;    // --split text; empty: the runtime's default, an even split over the workers
  std::string place;    // --place text: a pipeline of groups (as typed, for the row's name)
  std::vector<PlaceStage> place_stages;
  std::string plan_cluster;  // --plan-cluster: plan with this cluster.json's nodes and links instead of probing  //
                             // --place parsed (cli's place_for_plan); the plan cuts their layers
  std::string key_file;      // --key-file; without one the tensor/expert-parallel rows over --workers cannot run
  std::string wire_type = "f16";  // --wire-type: also the partial sums' type of a group over the workers
  int threads = 0;                // the head's compute threads (-t); 0: all cores
  int64_t prompt_tokens = 512;
  int64_t n_gen = 128;
  int64_t concurrency = 1;
  int64_t n_ctx = 0;  // 0: the model's training context, at most 4096 (and never shorter than the request)
  int64_t n_batch = 512;
  int64_t micro_batch = 0;  // --micro-batch; 0: the runtime's own rule for the split that runs
  std::string kv_type = "f16";
  bool repack = false;  // the head's --repack: its own stage also holds the packed copy (workers pack by their flag)
  double probe_seconds = 1.0;  // each node's measuring time when it keeps no recent probe
  // Under mpirun --tp/--ep: the plan is over the ranks, and the run's layout is the row that runs.
  std::shared_ptr<const ParallelRun> parallel;
};

// Everything a caller may want to read besides the text (bench --check-plan takes its predictions from here).
struct CliPlan {
  ModelCost model;
  std::optional<Cluster> cluster;
  Plan plan;
  std::optional<size_t> user;  // the row that will run: the user's split, the even default, local, or --tp/--ep
  std::string text;
};

// Throws Error when the model cannot be read or a worker cannot be profiled. With `cluster` the nodes are not
// profiled again (bench --check-plan plans several workloads on one set of profiles).
CliPlan make_cli_plan(const CliPlanRequest& request, const Cluster* cluster = nullptr);

// The plan as text for standard error; never throws: when planning fails the text says why in one line, and the
// run goes on as asked. One line to add to a command: log_info("{}", plan::plan_for_cli({...}));
std::string plan_for_cli(const CliPlanRequest& request);

}  // namespace tessera::plan
