// Where a failed pipeline stage goes: a spare worker (--spare), the failed worker again once it is back (it may
// have been restarted), or the head's own memory (--spare local) when the stage fits. The pool of workers is
// shared by every replica's pipeline, so two replicas never take the same spare.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "cluster/remote_stage_endpoint.h"
#include "cluster/stage_endpoint.h"
#include "model/model_weights.h"
#include "model/stage.h"
#include "net/keys.h"

namespace tessera::cluster {

inline constexpr const char* kLocalSpare = "local";

// Worker addresses (and "local") and whether a stage uses each now. Thread-safe.
class WorkerPool {
 public:
  // A worker a stage uses now (added busy).
  void add_busy(const std::string& address);
  // A spare (added free): a worker address, or "local" for the head's memory.
  void add_spare(const std::string& address);
  // Free entries in the order to try them: never failed first (in the order added), then the longest ago failed.
  std::vector<std::string> candidates() const;
  bool try_claim(const std::string& address);
  // A stage stopped using it; `failed`: because it broke (tried last for a while).
  void release(const std::string& address, bool failed);

 private:
  struct Entry {
    std::string address;
    bool busy = false;
    std::chrono::steady_clock::time_point failed_at{};  // epoch: never failed
  };
  Entry& entry(const std::string& address);
  mutable std::mutex mutex_;
  std::vector<Entry> entries_;
};

// A --place group stage: its nodes (the leader first) and layout, so a replacement can re-form it.
struct StageGroupPlan {
  std::vector<net::GroupMember> nodes;  // name and address, the leader first ("local" with no address: the head)
  bool tp = true;
  bool ep = false;
  std::string shares;
  float ep_redundancy = 0.0f;
  float timeout_s = 30.0f;
  net::Hash128 model_hash{};
  // A group the head leads (tp(local,a)): the join its members were sent, which a re-formed group is sent again.
  std::optional<net::GroupJoin> head_join;
};

struct ReplacementOptions {
  RemoteStageOptions remote;  // how a stage loads on a worker (the connect timeout is capped by the recovery's)
  std::optional<net::ClusterKey> key;
  StageOptions local_stage;  // a stage on the head (--spare local)
  int local_threads = 1;
  bool local_pin = false;                       // the head's stage threads bound to CPUs (--pin)
  std::chrono::milliseconds max_backoff{2000};  // between rounds over every candidate
  std::map<int, StageGroupPlan> groups;         // by stage index: the group stages
};

// Makes a loaded, ready stage in place of a failed one, from the pool's candidates.
class StageReplacer {
 public:
  StageReplacer(std::shared_ptr<const ModelWeights> model, std::shared_ptr<WorkerPool> pool,
                ReplacementOptions options);
  // Tries every free candidate, then again with backoff, until `deadline`. Releases the failed stage's worker.
  // Throws Error naming each candidate's last failure when none took the stage in time.
  std::unique_ptr<StageEndpoint> replace(int index, const StageEndpoint& failed, bool first, bool last,
                                         CompletionQueue& done, std::chrono::steady_clock::time_point deadline);

 private:
  std::unique_ptr<StageEndpoint> make(const std::string& address, int index, LayerRange layers, bool first, bool last,
                                      CompletionQueue& done, std::chrono::steady_clock::time_point deadline) const;
  uint64_t stage_bytes(LayerRange layers, bool first, bool last) const;
  // The group stage `index` again, each dead node's place taken by a free spare worker; nullptr when it has no
  // group, no node died, or too few spares are free (the caller then replaces it with one node).
  std::unique_ptr<StageEndpoint> reform(int index, LayerRange layers, bool first, bool last, CompletionQueue& done,
                                        std::chrono::steady_clock::time_point deadline);
  // The re-formed group of `plan` when the head leads it: the head's share of the layers over a new communicator.
  std::unique_ptr<StageEndpoint> lead_group(int index, LayerRange layers, bool first, bool last,
                                            const StageGroupPlan& plan, CompletionQueue& done) const;
  // A group the head led that cannot re-form: the head takes its layers whole when they fit; nullptr otherwise.
  std::unique_ptr<StageEndpoint> take_on_head(int index, LayerRange layers, bool first, bool last,
                                              CompletionQueue& done, std::chrono::steady_clock::time_point deadline);

  std::shared_ptr<const ModelWeights> model_;
  std::shared_ptr<WorkerPool> pool_;
  ReplacementOptions options_;
};

}  // namespace tessera::cluster
