// A pipeline stage computed on the head itself, on a thread this object owns, so the head's layers overlap
// with the remote stages' work; alone, or as rank 0 of a group of workers that hold the other shares of its layers.
#pragma once

#include <atomic>
#include <memory>
#include <thread>

#include "cluster/stage_endpoint.h"
#include "cluster/stage_sampler.h"
#include "engine/local_executor.h"

namespace tessera::cluster {

class LocalStageEndpoint : public StageEndpoint {
 public:
  // group: the ranks of options.shard when it splits the stage's layers (this endpoint is their rank 0).
  LocalStageEndpoint(std::string node, int stage_index, std::shared_ptr<const ModelWeights> weights,
                     const StageOptions& options, int threads, CompletionQueue& done, bool pin = false,
                     std::shared_ptr<collective::Communicator> group = nullptr);
  ~LocalStageEndpoint() override;

  const std::string& node() const override { return node_; }
  LayerRange layers() const override { return stage_.stage().layers(); }
  void submit(StageJob job) override;
  void clear_sequence(int64_t seq) override;
  void truncate_sequence(int64_t seq, int64_t n) override;
  const std::vector<BatchTime>& batch_times() const override { return batch_times_; }
  // A group stage whose links broke (a member died, stopped or timed out): the pipeline replaces it
  // (StageReplacer re-forms the group or gives the head the layers whole).
  bool failed() const override { return broken_.load(); }
  uint64_t kv_bytes() const { return stage_.stage().cache().bytes(); }
  uint64_t packed_bytes() const { return stage_.stage().packed_bytes(); }  // --repack's copy (0 without it)
  uint64_t weight_bytes() const { return stage_.stage().copied_bytes(); }

 private:
  void run();
  // After an operation failed: whether it broke the group's links (not a fault of the job itself).
  void note_group_failure();

  std::string node_;
  int index_;
  LocalExecutor stage_;
  std::vector<BatchTime> batch_times_;
  StageSampler sampler_;  // used by the job thread only
  CompletionQueue& done_;
  std::mutex mutex_;
  std::condition_variable cv_;
  std::deque<StageJob> jobs_;
  bool busy_ = false;
  bool stopping_ = false;
  std::atomic<bool> broken_{false};
  std::thread thread_;
};

}  // namespace tessera::cluster
