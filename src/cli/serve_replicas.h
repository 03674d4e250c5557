// The replicas `tessera serve` runs: each a complete copy of the model, either in this process or a pipeline over
// its own group of workers, described node by node for /health, /metrics and the web page.
#pragma once

#include <string>
#include <vector>

#include "cli/cluster_options.h"
#include "cli/model_options.h"
#include "server/replica.h"

namespace tessera {

// The workers of each replica: `--workers` groups separated by ';' (one group per replica), or a plain list cut
// into `replicas` equal groups in order. Empty `workers`: every replica is local (an empty group each).
// Throws Error when the groups and the replica count disagree.
std::vector<std::string> group_workers(const std::string& workers, int replicas);

// One copy of the model in this process, with `n_slots` sequences.
server::ReplicaSpec local_replica(const ModelOptions& o, int64_t n_slots);

// A pipeline over the workers of `cluster` (its `workers` is one group), with `n_slots` sequences.
server::ReplicaSpec pipeline_replica(const ModelOptions& o, const ClusterOptions& cluster, int64_t n_slots);

}  // namespace tessera
