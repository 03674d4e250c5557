// An Executor whose layers are split into stages on several nodes. A batch is cut into micro-batches that flow
// through the stages at the same time: while stage 2 works on micro-batch 1, stage 1 works on micro-batch 2.
// The head relays activations between stages (a star), so workers never need to reach each other.
#pragma once

#include <algorithm>
#include <deque>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "cluster/stage_endpoint.h"
#include "engine/executor.h"

namespace tessera::cluster {

struct PipelineOptions {
  // Prefill micro-batch size in tokens; 0 picks one that gives each stage several micro-batches.
  int64_t micro_batch = 0;
};

class PipelineExecutor : public Executor {
 public:
  // The token counts, in order, of the chunks one sequence's n prompt tokens are cut into for `stages` stages:
  // micro_batch each when > 0, else the automatic rule (the planner predicts what this returns).
  static std::vector<int64_t> prompt_chunks(int64_t n, int64_t stages, int64_t micro_batch);
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
  // One lane per stage: as many steps over disjoint sequences in flight as there are stages keeps each one busy.
  int64_t lanes() const override { return static_cast<int64_t>(std::max<size_t>(1, stages_.size())); }
  uint64_t submit_step(const Batch& batch, std::span<const SampleRequest> requests) override;
  StepResult collect_step() override;
  // Sequences in a step in flight may be neither cleared nor truncated.
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
  // The chunk sizes one sequence's prompt of n tokens is cut into: --micro-batch when set, else the fastest cut
  // the stages' measured batch times predict (micro_batches.h), the automatic rule where a stage has none.
  std::vector<int64_t> prompt_cut(int64_t n) const;

  // How a batch is cut: runs of whole sequences for mixed batches (decode of many streams; by_sequence false
  // keeps them together: submit_step's caller formed its groups already), chunks of tokens for a single
  // sequence's prompt. Exposed for tests and the cost model.
  std::vector<Batch> split(const Batch& batch, bool by_sequence = true) const;

 private:
  // A batch in flight: its parts move through the stages independently of other steps' parts.
  struct Step {
    Batch batch;
    std::vector<Batch> parts;
    std::vector<std::vector<size_t>> rows;           // where each part's output tokens sit among the batch's
    std::vector<std::vector<StageSample>> sampling;  // per part, for the last stage; empty when logits come back
    std::vector<Sampler*> samplers;                  // moved on as if they had drawn, once the step succeeds
    bool sampled = false;
    std::vector<std::pair<int32_t, int64_t>> next;  // each sequence's length once the step is done
    std::vector<StageDone> results;
    size_t outstanding = 0;
    std::string error;
  };
  struct Finished {
    uint64_t ticket = 0;
    std::vector<SampledToken> sampled;
    std::vector<float> logits;
    std::string error;
  };

  std::vector<Batch> split_parts(const Batch& batch, bool by_sequence) const;
  std::vector<Batch> cap(std::vector<Batch> parts) const;
  // Checks the batch against the lengths and steps in flight; returns each sequence's length after it.
  std::vector<std::pair<int32_t, int64_t>> check_batch(const Batch& batch) const;
  static std::vector<std::vector<size_t>> output_rows(const Batch& batch, const std::vector<Batch>& parts);
  // Starts a step (sampled: requests go to the last stage; otherwise logits come back) and returns its ticket.
  // by_sequence: see split().
  uint64_t start(const Batch& batch, std::span<const SampleRequest> requests, bool sampled, bool by_sequence);
  void pump();                         // waits for one stage completion and moves its part on
  void complete(uint64_t ticket);      // every part of the step is back: outputs gathered, or the step rolled back
  Finished wait_for(uint64_t ticket);  // runs the pipeline until that step is done

  ModelConfig config_;
  int64_t n_ctx_;
  int64_t n_slots_;
  PipelineOptions options_;
  CompletionQueue done_;
  std::vector<std::unique_ptr<StageEndpoint>> stages_;
  std::vector<int64_t> lengths_;                          // tokens per sequence, steps in flight not counted
  std::vector<char> in_flight_;                           // per sequence: part of a step in flight
  std::map<uint64_t, Step> steps_;                        // by ticket
  std::map<uint64_t, std::pair<uint64_t, size_t>> jobs_;  // stage job id -> (ticket, part)
  std::deque<Finished> finished_;                         // done, not yet collected
  uint64_t last_ticket_ = 0;
  uint64_t last_job_ = 0;
};

}  // namespace tessera::cluster
