// An Executor whose layers are split into stages on several nodes. A batch is cut into micro-batches that flow
// through the stages at the same time: while stage 2 works on micro-batch 1, stage 1 works on micro-batch 2.
// The head relays activations between stages (a star), so workers never need to reach each other.
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "cluster/stage_endpoint.h"
#include "cluster/step_deadline.h"
#include "engine/executor.h"

namespace tessera::cluster {

struct PipelineOptions {
  // Prefill micro-batch size in tokens; 0 picks one that gives each stage several micro-batches.
  int64_t micro_batch = 0;
  // Steps on watched stages (workers) that overrun these are faults: the worker is abandoned.
  DeadlineOptions deadline{};
  // Tokens per replayed micro-batch when a replaced stage's KV cache is rebuilt (what the stages are sized for).
  int64_t replay_chunk = 512;
  std::chrono::milliseconds recovery_timeout{60000};  // the whole attempt: replacements and replay
};

// Makes a loaded stage in place of a failed one (stage `index`, same layers), or throws Error by `deadline`.
using StageFactory = std::function<std::unique_ptr<StageEndpoint>(int index, const StageEndpoint& failed, bool first,
                                                                  bool last, CompletionQueue& done,
                                                                  std::chrono::steady_clock::time_point deadline)>;

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
  // Recovery by replay: when a stage fails (its worker died or missed a deadline) the steps it touched wait, the
  // factory replaces it, every sequence's tokens are replayed to rebuild the KV caches, and the steps run again
  // with the same sampler states, so callers see a delay instead of an error. Without a factory they fail.
  void set_recovery(StageFactory factory) { factory_ = std::move(factory); }
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
  // With no step in flight and a stage failed: recovers now (bounded by 5 s or --recovery-timeout), so a replica
  // is up again before a request finds it down; after a failed try, the next waits longer (up to a minute).
  void heal() override;

  size_t n_stages() const { return stages_.size(); }
  // Bytes every link to a worker has carried so far, both ways (weights included).
  uint64_t wire_bytes() const {
    uint64_t n = 0;
    for (const auto& s : stages_) n += s->wire_bytes();
    return n;
  }
  // The caller's thread only; other threads use visit_stages (a recovery may replace a stage).
  const StageEndpoint& stage(size_t i) const { return *stages_[i]; }
  void visit_stages(const std::function<void(size_t, const StageEndpoint&)>& f) const;
  // Stages replaced, tokens replayed, and whether a recovery runs now (any thread).
  uint64_t failovers() const { return failovers_.load(); }
  uint64_t replayed_tokens() const { return replayed_tokens_.load(); }
  bool recovering() const { return recovering_.load(); }
  // The last step that overran its deadline: how long it had taken when the head gave up, and its limit.
  struct DeadlineMiss {
    double took_seconds = 0;
    double limit_seconds = 0;
  };
  DeadlineMiss last_deadline_miss() const { return last_miss_; }
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
    bool fault = false;    // a part failed because its stage broke: the step can run again after a recovery
    bool waiting = false;  // done with a fault, waiting for the recovery
  };
  // A watched stage's jobs in submission order: the oldest one's deadline runs from when it could start (sent,
  // and the one before it done), since a stage runs its jobs one at a time.
  struct Watch {
    struct Job {
      uint64_t id = 0;
      int64_t tokens = 0;
      std::chrono::steady_clock::time_point start;
    };
    std::deque<Job> jobs;
    StepDeadline times;
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
  void pump();                            // waits for one stage completion and moves its part on
  void send(size_t stage, StageJob job);  // submits, watched
  // The next completion; nullopt when a watched stage overran its deadline and was abandoned instead.
  std::optional<StageDone> next_completion();
  void watch_done(const StageDone& d);
  // Replaces failed stages and replays within `budget`, then runs the waiting steps again (or fails them).
  bool recover(std::chrono::milliseconds budget);
  void replace_failed(std::chrono::steady_clock::time_point deadline);
  void replay();
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
  std::vector<std::vector<int32_t>> history_;             // per sequence: its tokens, for replay (= lengths_)
  std::vector<Watch> watch_;                              // per stage
  StageFactory factory_;
  mutable std::mutex stages_mutex_;  // stages_ is replaced under it; other threads read it under it
  bool replaying_ = false;
  DeadlineMiss last_miss_;
  std::chrono::steady_clock::time_point next_heal_{};
  std::chrono::milliseconds heal_backoff_{1000};
  size_t waiting_ = 0;  // steps waiting for a recovery
  std::atomic<uint64_t> failovers_{0};
  std::atomic<uint64_t> replayed_tokens_{0};
  std::atomic<bool> recovering_{false};
  uint64_t last_ticket_ = 0;
  uint64_t last_job_ = 0;
};

}  // namespace tessera::cluster
