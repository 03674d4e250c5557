// Data parallel serving: a replica is one complete copy of the model (an Executor: one local Stage, or a
// pipeline over workers) with its own scheduler; the router sends each request to the least loaded one.
// A replica also describes its nodes (which layers and experts each holds, memory) for /health and the web page.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "collective/communicator.h"
#include "engine/executor.h"
#include "engine/local_executor.h"
#include "engine/scheduler.h"
#include "model/model_weights.h"
#include "tokenizer/tokenizer.h"

namespace tessera::server {

// What a node holds; fixed for the replica's life.
struct NodeInfo {
  std::string name;     // "local" for the serving process itself, else the worker's name
  std::string address;  // empty for the serving process
  LayerRange layers;    // blocks [begin, end)
  bool embedding = false;
  bool head = false;
  std::vector<int64_t> experts;  // MoE: the experts of each of its layers that it holds; empty: all
  uint64_t weight_bytes = 0;
  uint64_t kv_bytes = 0;
  uint64_t memory_capacity = 0;  // the node's RAM (0: unknown), the scale of its memory bar
};

// What a node is doing now. A remote executor reports its links; a local node has none.
struct NodeLive {
  bool up = true;
  std::string on;  // where the stage runs now (a replacement's address after a failover); empty: unknown
  double link_rtt_seconds = 0;
  uint64_t bytes_sent = 0;
  uint64_t bytes_received = 0;
};

// Faults a pipeline recovered from (cluster::PipelineExecutor::set_recovery).
struct RecoveryStats {
  uint64_t failovers = 0;        // failed stages replaced
  uint64_t replayed_tokens = 0;  // tokens run again to rebuild KV caches
  bool recovering = false;       // a recovery runs now
};

struct ReplicaSpec {
  std::unique_ptr<Executor> executor;
  std::vector<NodeInfo> nodes;  // in pipeline order
  // Live figures per node (same order); absent: every node up with no links (a local executor).
  std::function<std::vector<NodeLive>()> live;
  std::function<RecoveryStats()> recovery;  // absent: nothing to recover from (a local executor)
};

// The node description of a local executor holding every layer of `weights`.
NodeInfo local_node_info(const ModelWeights& weights, const LocalExecutor& executor);

class Replica {
 public:
  Replica(int id, ReplicaSpec spec, const Tokenizer& tokenizer, const SchedulerOptions& options);
  Replica(const Replica&) = delete;
  Replica& operator=(const Replica&) = delete;

  int id() const { return id_; }
  Scheduler& scheduler() { return *scheduler_; }
  const Scheduler& scheduler() const { return *scheduler_; }
  const std::vector<NodeInfo>& nodes() const { return spec_.nodes; }
  std::vector<NodeLive> live() const;
  RecoveryStats recovery() const { return spec_.recovery ? spec_.recovery() : RecoveryStats{}; }
  // Under --tp/--ep: what this rank has spent in collectives so far (absent for any other replica).
  std::optional<collective::CollectiveStats> collectives() const;
  // False once forward passes keep failing or a node is down: the router then prefers the others.
  bool healthy() const;

 private:
  int id_;
  ReplicaSpec spec_;                      // the executor lives here and must outlive the scheduler below
  std::unique_ptr<Scheduler> scheduler_;  // declared after spec_: destroyed (thread joined) first
};

class Router {
 public:
  Router() = default;
  // Moves that start while the replicas stop would meet a scheduler shutting down: from here on none is made.
  ~Router();
  Router(const Router&) = delete;
  Router& operator=(const Router&) = delete;

  // Adds a replica; a request whose steps fail there for good (a node lost and not replaced) moves to a healthy
  // other replica with what it generated so far (Scheduler::adopt).
  void add(std::shared_ptr<Replica> replica);
  std::vector<std::shared_ptr<Replica>> replicas() const;
  size_t size() const;

  struct Routed {
    std::shared_ptr<SequenceHandle> handle;  // null: every replica's queue is full
    int replica = -1;
  };
  // Tries the healthy replicas from the least loaded up (equal loads take turns), then the unhealthy ones.
  // Errors for requests that can never run propagate from the scheduler (Error).
  Routed submit(const SequenceRequest& request, const SequenceCallbacks& callbacks);

 private:
  // The mover of replica `from`: the healthy others from the least loaded up.
  bool move(int from, std::unique_ptr<Scheduler::Sequence>& s);

  mutable std::mutex mutex_;  // held while a request moves: the replicas stay while one is adopted
  bool closing_ = false;
  std::vector<std::shared_ptr<Replica>> replicas_;
  // Held from reading the loads to queueing the request: concurrent arrivals that read the same loads would
  // pile onto one replica (four at once went 3 and 1 over two idle replicas).
  std::mutex submit_mutex_;
  uint64_t turn_ = 0;
};

}  // namespace tessera::server
