// Flags that split a model over worker daemons (`--workers`, `--split`, `--key-file`, `--wire-type`) and building
// the pipeline executor from them.
#pragma once

#include <CLI/CLI.hpp>
#include <memory>
#include <string>
#include <vector>

#include "cli/model_options.h"
#include "engine/executor.h"
#include "plan/live_cluster.h"

namespace tessera {
namespace cluster {
class WorkerPool;
}

struct ClusterOptions {
  std::string workers;  // "a=host:port,b=host:port" or "host:port,..."
  std::string split;    // "0-10@local,11-21@b" or "a:1,b:2"; default: even over the workers (or the --place stages)
  std::string place;    // "local,tp(a,b)": the stages in order, each a node or a group of nodes (cli/place_spec.h)
  std::string key_file;
  std::string wire_type = "f16";
  int64_t micro_batch = 0;
  // --plan-cluster: the planner's nodes and links from a cluster.json instead of probing the workers (the run still
  // uses the live workers).
  std::string plan_cluster;
  // Faults: where a failed stage goes, when a step is a fault, how long a recovery may take (0: none).
  std::vector<std::string> spares;  // HOST:PORT of spare workers, or "local"
  double deadline_factor = 4.0;
  double deadline_slack = 2.0;     // seconds
  double recovery_timeout = 30.0;  // seconds
  // The workers and spares every pipeline of this process draws from (replicas share it); made when absent.
  std::shared_ptr<cluster::WorkerPool> pool;
  bool enabled() const { return !workers.empty(); }
};

void add_cluster_options(CLI::App& app, ClusterOptions& o);

// The planner's parser (plan/live_cluster.h): one set of rules for the runtime and the plan.
using WorkerAddress = plan::WorkerEndpoint;
// Throws Error for an empty list or entry, a missing port, a duplicate name, or the reserved name "local".
std::vector<WorkerAddress> parse_workers(const std::string& text);
// The names --workers gives ("a=10.0.0.2:50052,b=..." -> a, b).
std::vector<std::string> worker_names(const std::string& text);

// --workers with --tp/--ep: the workers are ranks 1..N-1 of one tensor/expert-parallel group (docs/parallel.md, "Over
// worker links"), not pipeline stages: moves the list, the key file and the wire type into the model options and
// empties co.workers. Throws Error for the pipeline's flags that do not apply (--split, --spare).
void use_workers_as_ranks(ModelOptions& mo, ClusterOptions& co);

// Connects to the workers, loads each stage (sending only weights a worker lacks) and prints the memory table.
std::unique_ptr<Executor> build_pipeline(const LoadedModel& model, const ModelOptions& mo, const ClusterOptions& co,
                                         int64_t n_slots);

}  // namespace tessera
