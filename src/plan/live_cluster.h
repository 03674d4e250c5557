// Profiles of live nodes for the planner: the head probed here, each worker asked over the wire (ProbeRequest,
// answered from the worker's own probe, which it keeps a few minutes) and each head-worker link measured.
#pragma once

#include <chrono>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "plan/cluster.h"
#include "plan/local_node.h"

namespace tessera::plan {

struct WorkerEndpoint {
  std::string name;     // as typed in --workers ("b", or "host:port" when no name was given)
  std::string address;  // host:port
};

// "--workers" text: "name=host:port,..." or "host:port,...". Throws Error for an empty entry, a missing port, a
// duplicate name, or the reserved name "local" (the same rules as the runtime's parser). Empty text: no workers.
std::vector<WorkerEndpoint> parse_worker_list(std::string_view text);

// A name the planner accepts (letters, digits, '.', '_', '-', not starting with a digit) for what the user typed:
// "b" stays "b", "127.0.0.1:5555" becomes "w127.0.0.1_5555".
std::string plan_node_name(std::string_view typed);

struct LiveProbeOptions {
  LocalProbeOptions local;                   // the head
  double worker_seconds = 1.0;               // a worker's measuring time when it keeps nothing fresh
  double worker_max_age_s = 300;             // a worker reuses its own measurement younger than this
  std::string key_file;                      // the cluster key; empty: loopback without encryption
  std::chrono::milliseconds timeout{20000};  // connect, and each answer
  bool measure_links = true;  // RTT and bandwidth of each head-worker and worker-worker link (else loopback defaults)
  // The partial sums' bytes a float on the wire when the workers form a tensor/expert-parallel group (--wire-type:
  // 4 f32, 2 f16 or bf16).
  int group_wire_bytes = 2;
};

// A worker's profile and its link to the head, from one connection; with `peers`, also the worker's own links to
// them (it dials each as a group member would and measures: a few pings and a 4 MiB burst each way). Throws Error
// naming the worker when it cannot be reached, refuses (busy with another head), or answers with anything but a
// profile; a peer it cannot reach is reported in `unreachable`, not thrown.
struct WorkerProbe {
  NodeProfile node;
  LinkProfile link;
  std::vector<LinkProfile> peer_links;  // measured, named as the planner names the nodes
  struct Unreachable {
    std::string peer, why;
  };
  std::vector<Unreachable> unreachable;
};
WorkerProbe probe_worker(const WorkerEndpoint& worker, const LiveProbeOptions& options,
                         std::span<const WorkerEndpoint> peers = {});

// The head ("local") and every worker, with the measured links: the head's to each worker, and each pair of workers'
// (Cluster::group_links, the links a group's collectives take; pipeline hops between workers are relayed by the
// head). The workers are asked one after another, each measuring its links to those after it: each closes its
// connection before the next, so a worker is free again for the run that follows.
Cluster probe_live_cluster(std::span<const WorkerEndpoint> workers, const LiveProbeOptions& options);
// The same with the head's profile given (loaded from a file, or probed by the caller).
Cluster live_cluster(NodeProfile head, std::span<const WorkerEndpoint> workers, const LiveProbeOptions& options);

}  // namespace tessera::plan
