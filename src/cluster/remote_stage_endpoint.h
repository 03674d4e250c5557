// A pipeline stage on a worker daemon, as the head sees it: loads the stage (sending only the tensors the worker
// lacks), then sends micro-batches and turns the worker's answers into completions. A lost worker fails every
// job in flight with a message naming it.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "cluster/stage_endpoint.h"
#include "model/stage.h"
#include "net/keys.h"
#include "net/link_measure.h"
#include "net/transport.h"

namespace tessera::cluster {

struct RemoteStageOptions {
  StageOptions stage;
  net::WireType wire = net::WireType::F16;
  int threads = 0;
  std::chrono::milliseconds connect_timeout{5000};
  net::TransportOptions transport;
  int64_t max_batch = 512;  // the most tokens one micro-batch will carry (the worker sizes its buffers for it)
  // The link is measured after the handshake (RTT and bandwidth each way, for the connect report, /health and
  // the planner); 0 bytes skips the bandwidth part.
  uint32_t measure_bytes = 4u << 20;
  // Called while weights stream: (bytes sent, bytes to send).
  std::function<void(uint64_t, uint64_t)> progress;
  // A stage held by a group: the other members (ranks 1..), which the worker links as rank 0 (LoadStage.group),
  // the group's layout and collective deadline, and the model's identity the members check.
  std::vector<net::GroupMember> group;
  bool group_tp = true;
  bool group_ep = false;
  float group_timeout_s = 30.0f;
  std::string group_shares;          // "2,1": the members' shares in rank order; empty: equal
  float group_ep_redundancy = 0.0f;  // an ep group's --ep-redundancy
  net::Hash128 model_hash{};
};

// The LoadStage a head sends for a stage of `model`, and the tensors' bytes by content hash for the chunks the
// worker asks for (views into the model's file).
struct StageRequest {
  net::LoadStage load;
  std::unordered_map<std::string, std::span<const uint8_t>> data_of;
  // Hands the weight chunks of one tensor the worker needs to `send`, one at a time. Throws Error for a hash the
  // stage does not use.
  void for_each_chunk(const net::Hash128& hash, const std::function<void(const net::WeightChunk&)>& send) const;
};
StageRequest stage_request(const ModelWeights& model, LayerRange layers, bool has_embedding, bool has_head,
                           const RemoteStageOptions& options);

struct LoadReport {
  uint64_t weight_bytes_sent = 0;  // tensor bytes streamed to the worker (0 with a warm cache or local file)
  uint64_t weights_bytes = 0;      // the worker's memory table
  uint64_t kv_bytes = 0;
  uint64_t buffer_bytes = 0;
};

class RemoteStageEndpoint : public StageEndpoint {
 public:
  // Connects, handshakes and loads `layers` of the model. Throws Error naming the node on any failure.
  RemoteStageEndpoint(std::string node, const std::string& address, const net::ClusterKey* key, int stage_index,
                      const ModelWeights& model, LayerRange layers, bool has_embedding, bool has_head,
                      const RemoteStageOptions& options, CompletionQueue& done);
  ~RemoteStageEndpoint() override;

  const std::string& node() const override { return node_; }
  LayerRange layers() const override { return layers_; }
  void submit(StageJob job) override;
  void clear_sequence(int64_t seq) override;
  void truncate_sequence(int64_t seq, int64_t n) override;

  uint64_t wire_bytes() const override {
    const net::LinkStats s = conn_->stats();
    return s.bytes_sent + s.bytes_received;
  }

  const LoadReport& load_report() const { return report_; }
  const std::vector<BatchTime>& batch_times() const override { return batch_times_; }
  net::LinkStats link_stats() const { return conn_->stats(); }
  const std::string& address() const { return conn_->address(); }
  const net::LinkMeasurement& link() const { return link_; }
  // False once the link broke (the worker died, went silent or closed): its jobs fail and the replica is degraded.
  bool up() const;
  bool failed() const override { return !up(); }
  void abandon(const std::string& why) override { fail_pending(why); }
  bool watched() const override { return true; }
  std::string where() const override { return target_; }  // the address as given, the key of a WorkerPool
  net::Connection& connection() { return *conn_; }

 private:
  void load(const ModelWeights& model, bool has_embedding, bool has_head, const RemoteStageOptions& options);
  void receive_loop();
  void fail_pending(const std::string& why);

  std::string node_;
  std::string target_;
  int index_;
  LayerRange layers_;
  bool first_;
  bool last_;
  net::WireType wire_;
  int64_t in_width_ = 0;   // floats per token into the stage (ModelConfig::boundary_width)
  int64_t out_width_ = 0;  // and out of it
  int64_t n_vocab_ = 0;
  CompletionQueue& done_;
  std::unique_ptr<net::Connection> conn_;
  LoadReport report_;
  std::vector<BatchTime> batch_times_;
  net::LinkMeasurement link_;
  // What each job in flight must bring back: its id, the logits rows and the sampled sequences (in order).
  struct InFlight {
    uint64_t id = 0;
    size_t logit_rows = 0;
    std::vector<int32_t> sampled_seqs;
  };
  void check_result(const InFlight& job, const net::ForwardResult& r, StageDone& d) const;

  mutable std::mutex mutex_;
  std::deque<InFlight> in_flight_;
  std::atomic<bool> stop_{false};
  std::string broken_;  // set once the link failed (under mutex_)
  std::string broken() const;
  std::thread receiver_;
};

}  // namespace tessera::cluster
