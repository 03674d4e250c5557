// An Executor whose layers are split into stages on several nodes. A batch is cut into micro-batches that flow
// through the stages at the same time: while stage 2 works on micro-batch 1, stage 1 works on micro-batch 2.
// The head relays activations between stages (a star), so workers never need to reach each other.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "dist/stage_endpoint.h"
#include "engine/executor.h"

namespace tessera {

struct PipelineOptions {
  // Prefill micro-batch size in tokens; 0 picks one that gives each stage several micro-batches.
  int64_t micro_batch = 0;
};

class PipelineExecutor : public Executor {
 public:
  // Stages must cover the model's layers in order without gaps; the first holds the embedding, the last the head.
  PipelineExecutor(ModelConfig config, int64_t n_ctx, int64_t n_slots, PipelineOptions options);

  // The pipeline's completion queue: endpoints are created against it, then added in layer order.
  CompletionQueue& completions() { return done_; }
  void add_stage(std::unique_ptr<StageEndpoint> stage);
  void check_complete() const;  // throws Error when the stages do not cover every layer exactly once

  const ModelConfig& config() const override { return config_; }
  int64_t n_ctx() const override { return n_ctx_; }
  int64_t n_slots() const override { return n_slots_; }
  void decode(const Batch& batch, std::vector<float>& logits) override;
  // Samples on the last stage (see Executor): only token ids come back, never logits.
  void decode_sampled(const Batch& batch, std::span<const SampleRequest> requests,
                      std::vector<SampledToken>& out) override;
  void clear_sequence(int64_t seq) override;
  void truncate_sequence(int64_t seq, int64_t n) override;
  int64_t sequence_length(int64_t seq) const override { return lengths_.at(static_cast<size_t>(seq)); }

  size_t n_stages() const { return stages_.size(); }
  // Bytes every link to a worker has carried so far, both ways (weights included).
  uint64_t wire_bytes() const {
    uint64_t n = 0;
    for (const auto& s : stages_) n += s->wire_bytes();
    return n;
  }
  const StageEndpoint& stage(size_t i) const { return *stages_[i]; }

  // How a batch is cut: runs of whole sequences for mixed batches (decode of many streams), chunks of tokens for
  // a single sequence's prompt. Exposed for tests and the cost model.
  std::vector<Batch> split(const Batch& batch) const;

 private:
  std::vector<Batch> split_parts(const Batch& batch) const;
  std::vector<Batch> cap(std::vector<Batch> parts) const;
  void check_batch(const Batch& batch, std::vector<int64_t>& next) const;  // next: lengths after the batch
  // Runs the parts through every stage (sampling[j] goes to the last stage with part j); on success the
  // sequence lengths become `next`, on failure every stage is rolled back and Error is thrown.
  std::vector<StageDone> run(const std::vector<Batch>& parts, std::vector<std::vector<StageSample>> sampling,
                             const Batch& batch, const std::vector<int64_t>& next);
  static std::vector<std::vector<size_t>> output_rows(const Batch& batch, const std::vector<Batch>& parts);

  ModelConfig config_;
  int64_t n_ctx_;
  int64_t n_slots_;
  PipelineOptions options_;
  CompletionQueue done_;
  std::vector<std::unique_ptr<StageEndpoint>> stages_;
  std::vector<int64_t> lengths_;
};

}  // namespace tessera
