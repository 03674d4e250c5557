// The Executor: runs batches through a whole model, wherever its Stages are (one local Stage, or a pipeline of
// Stages on several nodes). The generation loop and the server talk only to this interface.
#pragma once

#include <cstdint>
#include <deque>
#include <span>
#include <string>
#include <vector>

#include "engine/sampler.h"
#include "model/batch.h"
#include "model/model_config.h"
#include "util/error.h"

namespace tessera {

// One output token to sample: the sequence's own Sampler (whose state says how), and whether to report logprobs.
struct SampleRequest {
  Sampler* sampler = nullptr;
  int32_t top_logprobs = -1;  // -1: no logprobs; n >= 0: the sampled token's logprob and the n most likely
};

// A finished step of submit_step: its picks in request order, or the error that failed it (the step's sequences
// are then as they were before it).
struct StepResult {
  uint64_t ticket = 0;
  std::vector<SampledToken> sampled;
  std::string error;
};

class Executor {
 public:
  virtual ~Executor() = default;

  virtual const ModelConfig& config() const = 0;
  virtual int64_t n_ctx() const = 0;    // positions per sequence
  virtual int64_t n_slots() const = 0;  // sequences live at once

  // Evaluates the batch; logits gets [n_outputs][n_vocab] for the tokens that want them, in batch order.
  virtual void decode(const Batch& batch, std::vector<float>& logits) = 0;

  // Evaluates the batch and samples each output token: requests[i] belongs to the i-th token that wants output,
  // and out[i] gets its pick. The samplers end as if each had sampled the token itself (not accepted: the
  // caller accepts what it keeps). A pipeline samples on the node that holds the output head, so only token ids
  // travel; the result is identical to sampling here.
  virtual void decode_sampled(const Batch& batch, std::span<const SampleRequest> requests,
                              std::vector<SampledToken>& out) {
    if (requests.size() != static_cast<size_t>(batch.n_outputs())) {
      fail("{} sampling requests for a batch with {} output tokens", requests.size(), batch.n_outputs());
    }
    decode(batch, sample_logits_);
    const auto n_vocab = static_cast<size_t>(config().n_vocab);
    out.resize(requests.size());
    for (size_t i = 0; i < requests.size(); ++i) {
      out[i] = sample_row(requests[i], {sample_logits_.data() + i * n_vocab, n_vocab});
    }
  }

  // One request's pick from its row of logits.
  static SampledToken sample_row(const SampleRequest& r, std::span<const float> row) {
    if (r.top_logprobs >= 0) return r.sampler->sample_with_logprobs(row, r.top_logprobs);
    return SampledToken{r.sampler->sample(row), 0.0f, {}};
  }

  // Steps in flight. A pipeline keeps every stage busy only with several steps over disjoint sequences at once
  // (while stage 2 works on one group's tokens, stage 1 works on the next group's), so concurrent decoding asks
  // how many groups to form. One executor that works on a step at a time answers 1.
  virtual int64_t lanes() const { return 1; }

  // Starts a decode_sampled step without waiting for it and returns its ticket. No sequence may be in two steps in
  // flight, and the requests' samplers must stay untouched until collect_step returns the step. A batch found
  // invalid may throw Error at once; other failures come back in StepResult::error. By default the step runs
  // here and now, which is what an executor with one lane does anyway.
  virtual uint64_t submit_step(const Batch& batch, std::span<const SampleRequest> requests) {
    StepResult r;
    r.ticket = ++last_ticket_;
    try {
      decode_sampled(batch, requests, r.sampled);
    } catch (const std::exception& e) {
      r.error = e.what();
    }
    finished_.push_back(std::move(r));
    return finished_.back().ticket;
  }
  // Waits for a step in flight to finish and returns it (in completion order). Throws Error when none is.
  virtual StepResult collect_step() {
    if (finished_.empty()) fail("no step is in flight");
    StepResult r = std::move(finished_.front());
    finished_.pop_front();
    return r;
  }

  virtual void clear_sequence(int64_t seq) = 0;
  virtual void truncate_sequence(int64_t seq, int64_t n) = 0;
  virtual int64_t sequence_length(int64_t seq) const = 0;
  // Called now and then by an idle caller (no step in flight): an executor whose node failed while nothing ran
  // repairs itself here instead of on the next request (PipelineExecutor: recovery by replay).
  virtual void heal() {}

  // The memory in this process that a decode step streams its weights from, so that a roofline can be measured on
  // those very pages (a virtual machine's pages differ in read bandwidth); empty when the weights live elsewhere
  // (other nodes) or in no one buffer.
  virtual std::span<const uint8_t> weight_memory() const { return {}; }

 private:
  std::vector<float> sample_logits_;  // decode_sampled's buffer, reused between calls
  uint64_t last_ticket_ = 0;
  std::deque<StepResult> finished_;  // the default submit_step's results, waiting for collect_step
};

}  // namespace tessera
