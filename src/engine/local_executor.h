// The local Executor: one Stage holding every layer, with its own thread pool. Under tensor/expert parallelism the
// Stage holds this rank's share of every layer: rank 0's executor sends each operation to the other ranks first
// (follow() runs them there), so every rank runs the same batches and meets the same collectives. With pipeline
// ranks (--pp under mpirun) each group of ranks holds a range of layers, and a batch's activations go from one
// group to the next in micro-batches, so the groups work on a prompt at the same time.
#pragma once

#include <memory>

#include "collective/communicator.h"
#include "engine/executor.h"
#include "engine/sharded_sampling.h"
#include "model/stage.h"
#include "util/thread_pool.h"

namespace tessera {

// Where this rank's stage sits in a pipeline of rank groups. World rank 0 holds a share of the last stage: it
// sends every operation to all ranks and samples where the logits are, so no token travels back.
struct PipelineRanks {
  std::shared_ptr<collective::Communicator> world;  // all ranks of all stages
  int prev = -1;  // the world rank of this rank's peer in the stage before (-1: the first stage)
  int next = -1;  // ... in the stage after (-1: the last stage)
  int n_stages = 1;
  bool enabled() const { return world != nullptr; }
};

class LocalExecutor : public Executor {
 public:
  // pin: ThreadPool's (each thread bound to its own CPU). comm: the ranks of options.shard, when it splits the
  // layers; this executor must then be rank 0's, and the others run follow(). pipe: this rank's stage in a pipeline
  // of such groups (then the world's rank 0 is the one that does not follow).
  LocalExecutor(std::shared_ptr<const ModelWeights> weights, const StageOptions& options, int n_threads,
                bool pin = false, std::shared_ptr<collective::Communicator> comm = nullptr, PipelineRanks pipe = {});
  ~LocalExecutor() override;
  LocalExecutor(const LocalExecutor&) = delete;
  LocalExecutor& operator=(const LocalExecutor&) = delete;

  const ModelConfig& config() const override { return stage_.config(); }
  int64_t n_ctx() const override { return stage_.n_ctx(); }
  int64_t n_slots() const override { return stage_.n_slots(); }
  void decode(const Batch& batch, std::vector<float>& logits) override;
  // Under tensor parallelism every rank samples from its own vocabulary range and the ranks exchange a few numbers a
  // row (ShardedSampler), never the rows; the picks equal one node's.
  void decode_sampled(const Batch& batch, std::span<const SampleRequest> requests,
                      std::vector<SampledToken>& out) override;
  void clear_sequence(int64_t seq) override;
  void truncate_sequence(int64_t seq, int64_t n) override;
  int64_t sequence_length(int64_t seq) const override { return stage_.sequence_length(seq); }
  std::span<const uint8_t> weight_memory() const override { return stage_.copied_memory(); }

  // Rank 0 of a group that is one stage of a pipeline over worker links (cluster/stage_group.h): the batch through
  // the stage from `hidden_in` (the stage before's activations; null on the first stage), the members running the
  // same pass; out.logits gathered here on the last stage. Without a group, just the Stage's forward pass.
  void forward_stage(const Batch& batch, const float* hidden_in, StageOutput& out);
  // Stage::time_batches, every rank timing the same passes (a fixed number of rounds, no budget: the ranks must
  // agree on what they run).
  std::vector<BatchTime> time_batches(std::span<const int64_t> sizes, int rounds, double budget_s);

  const Stage& stage() const { return stage_; }
  int threads() const { return pool_.size(); }
  const collective::Communicator* communicator() const { return comm_.get(); }
  // Under --pp: seconds this rank has waited for the stage before it (its activations), for bench's split of a
  // token's time. Read on the thread that runs the executor.
  bool pipelined() const { return pipe_.enabled(); }
  double pipeline_wait_seconds() const { return wait_s_; }

  // A rank other than 0: runs the operations rank 0's executor sends until it is destroyed. Errors of an operation
  // are rank 0's to report (every rank meets the same ones); the loop goes on.
  void follow();

 private:
  void send(std::vector<uint8_t> op);  // rank 0: the operation to the other ranks
  collective::Communicator* op_comm() const { return pipe_.enabled() ? pipe_.world.get() : comm_.get(); }
  // The batch through this rank's stage: alone, or as its part of the pipeline (activations from the stage before,
  // micro-batch by micro-batch, to the stage after). out.logits only on the last stage.
  void forward(const Batch& batch, bool gather, StageOutput& out);
  // Every rank: the batch through the stage without gathering the logits, then each output row's pick over all
  // ranks (into out on rank 0, which passes the requests; the others pass none).
  void sample_apart(const Batch& batch, std::span<const SampleSpec> specs, std::span<const SampleRequest> requests,
                    std::vector<SampledToken>& out);

  std::shared_ptr<collective::Communicator> comm_;  // before the stage, which uses it
  PipelineRanks pipe_;
  ThreadPool pool_;
  Stage stage_;
  StageOutput out_, part_;
  Batch micro_;
  std::vector<uint8_t> wire_;
  ShardedSampler sharded_;
  double wait_s_ = 0;
};

}  // namespace tessera
