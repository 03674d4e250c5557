// One stage of a pipeline as the head sees it: a layer range on some node that accepts micro-batches and
// reports each one's result, in submission order, on a completion queue shared by all stages of the pipeline.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "engine/sampler.h"
#include "model/batch.h"
#include "model/model_weights.h"

namespace tessera::cluster {

// Sample the output token of sequence `seq` on the last stage, from the head sampler's state.
struct StageSample {
  int32_t seq = 0;
  SamplerState state;
  int32_t top_logprobs = -1;  // -1: no logprobs
};

struct StageJob {
  uint64_t id = 0;
  Batch batch;
  std::vector<float> hidden;          // input activations [n_tokens][n_embd]; empty for the first stage
  std::vector<StageSample> sampling;  // last stage only: at most one per sequence, for its one output token
};

struct StageDone {
  int stage = 0;  // index of the stage in its pipeline
  uint64_t id = 0;
  std::vector<float> hidden;          // output activations, or the last stage's
  std::vector<float> logits;          // logits of the output tokens of sequences without sampling, batch order, and
  std::vector<SampledToken> sampled;  // picks for the sequences with sampling, batch order
  std::string error;                  // non-empty when the stage failed this job (the message names the node)
};

// Completions of every stage of one pipeline, so the head waits on one queue.
class CompletionQueue {
 public:
  void push(StageDone done);
  StageDone pop();
  // The next completion, or nullopt once `deadline` passed without one.
  std::optional<StageDone> pop_until(std::chrono::steady_clock::time_point deadline);

 private:
  std::mutex mutex_;
  std::condition_variable cv_;
  std::deque<StageDone> items_;
};

class StageEndpoint {
 public:
  virtual ~StageEndpoint() = default;
  virtual const std::string& node() const = 0;  // the node name the user typed ("local" for the head)
  virtual LayerRange layers() const = 0;
  // Queues a job; its StageDone arrives on the pipeline's completion queue. Jobs run in submission order.
  virtual void submit(StageJob job) = 0;
  virtual void clear_sequence(int64_t seq) = 0;
  virtual void truncate_sequence(int64_t seq, int64_t n) = 0;
  // Bytes this stage's link has carried both ways (0 for a stage on the head).
  virtual uint64_t wire_bytes() const { return 0; }
  // What prompt batches of a few sizes cost this stage, measured when it was loaded (increasing tokens).
  virtual const std::vector<BatchTime>& batch_times() const = 0;

  // Faults. A stage on another node can break (its worker died, or missed a deadline and was abandoned); the head
  // then replaces it (PipelineExecutor::set_recovery). A stage on the head breaks only when it leads a group of
  // workers whose links broke (a member died).
  virtual bool failed() const { return false; }
  // Stops waiting for this stage: every job in flight, and every later one, fails with `why`.
  virtual void abandon(const std::string& why) { (void)why; }
  // Whether the head holds this stage's steps to deadlines (only where a fault can be recovered from).
  virtual bool watched() const { return false; }
  // Where it runs: the worker's address, empty on the head.
  virtual std::string where() const { return {}; }
};

}  // namespace tessera::cluster
