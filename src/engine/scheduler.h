// Continuous batching over one Executor: up to n_parallel sequences decode together, a new request joins at the
// next step (its prompt in chunks, so running sequences keep streaming), and a finished or cancelled one frees
// its cache slot at once. An executor with several lanes (a pipeline) gets that many steps in flight, each over
// its own group of sequences. One scheduler thread per Executor, owned by this object; submitters only enqueue.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "engine/executor.h"
#include "engine/request.h"
#include "grammar/token_trie.h"
#include "tokenizer/tokenizer.h"

namespace tessera {

struct SchedulerOptions {
  int64_t n_parallel = 0;          // sequences decoded together; 0: every slot of the executor
  int64_t max_queue = 64;          // requests waiting for a slot; more are refused
  int64_t max_batch_tokens = 512;  // tokens per forward pass (decode tokens plus prompt chunks)
  // Prompt tokens per pass while other sequences are decoding: a long prompt must not stall their streams for
  // a whole prefill. With nobody decoding, a prompt takes max_batch_tokens per pass.
  int64_t prefill_chunk = 128;
  double stats_window_seconds = 10;  // the window of the tokens/s and step-latency figures
};

struct SchedulerStats {
  int64_t n_parallel = 0;
  int64_t max_queue = 0;
  int64_t active = 0;  // sequences holding a slot
  int64_t queued = 0;
  // Requests taken. Each ends with exactly one of the finish reasons below or moves to another scheduler:
  // accepted + moved_in = sum(finished) + moved_out + active + queued.
  uint64_t accepted = 0;
  uint64_t rejected = 0;          // refused because the queue was full
  uint64_t moved_out = 0;         // running requests handed to another scheduler after a step failed here
  uint64_t moved_in = 0;          // requests taken over from another scheduler (adopt)
  uint64_t finished[6] = {};      // by FinishReason
  uint64_t prompt_tokens = 0;     // evaluated prompt tokens
  uint64_t generated_tokens = 0;  // sampled tokens
  uint64_t steps = 0;
  uint64_t failed_steps = 0;
  int64_t consecutive_failures = 0;  // failed forward passes since the last good one
  double busy_seconds = 0;           // time spent in forward passes and sampling
  // Over the last stats_window_seconds (or since the start when that is shorter):
  double prompt_tokens_per_second = 0;
  double decode_tokens_per_second = 0;
  double mean_step_seconds = 0;  // mean forward-pass time of the steps in the window (0 when none)
  double last_step_seconds = 0;
  std::string last_error;
};

class Scheduler {
 public:
  // The executor and tokenizer must outlive the scheduler. Starts the scheduler thread.
  Scheduler(Executor& executor, const Tokenizer& tokenizer, SchedulerOptions options);
  // Stops the thread; requests still queued or running end with FinishReason::Cancelled.
  ~Scheduler();
  Scheduler(const Scheduler&) = delete;
  Scheduler& operator=(const Scheduler&) = delete;

  // Queues a request. Throws Error for one that can never run (empty prompt, prompt longer than the context,
  // bad sampler values); returns nullptr when the queue is full.
  std::shared_ptr<SequenceHandle> submit(SequenceRequest request, SequenceCallbacks callbacks);

  // A request as the scheduler holds it: its prompt, what it generated so far, its sampler and stream state.
  struct Sequence;
  // Where a running request goes when a step over it fails (its executor lost a node it could not replace): a
  // mover hands it to another scheduler's adopt() and returns true (taking it), or returns false and the request
  // ends here with the error. Called on this scheduler's thread, with none of its locks held.
  using Mover = std::function<bool(std::unique_ptr<Sequence>&)>;
  void set_mover(Mover mover);
  // Takes over a request moved from another scheduler over the same model and tokenizer: it joins the front of the
  // queue, runs its prompt and the tokens it generated so far again to rebuild its cache, and continues with the
  // sampler state it carried, so the client sees a delay and the same tokens. False (leaving `s`) when stopping.
  bool adopt(std::unique_ptr<Sequence>& s);

  SchedulerStats stats() const;
  // Active plus queued requests relative to n_parallel: what a router compares.
  double load() const;
  const SchedulerOptions& options() const { return options_; }
  Executor& executor() const { return executor_; }

 private:
  using Clock = std::chrono::steady_clock;
  // One step in flight over a group of sequences (an executor has Executor::lanes() of them).
  struct Lane {
    bool busy = false;
    uint64_t ticket = 0;
    Clock::time_point start;
    std::vector<Sequence*> decoding;                   // sequences that put their pending token in the step
    std::vector<Sequence*> wants;                      // the sequences that sample a token, in batch order
    std::vector<std::pair<Sequence*, size_t>> chunks;  // prompt tokens each prefilling sequence put in the step
    int64_t n_prompt = 0;
  };
  struct StepRecord {
    Clock::time_point end;
    int64_t prompt_tokens;
    int64_t sampled_tokens;
    double seconds;
  };

  void loop();
  void admit(std::unique_ptr<Sequence> s);
  void launch(Lane& lane);                    // builds and submits the lane's next step, if it has work
  void land(Lane& lane, StepResult& result);  // a step came back: tokens taken, streams fed
  void fail_lane(Lane& lane, const std::string& error);
  bool move_elsewhere(Sequence& s);  // true: another scheduler took it (s is gone from here)
  void drain();                      // waits for every step in flight (shutting down)
  bool any_busy() const;
  void retire();                                 // drops finished sequences from active_
  void take(Sequence& s, SampledToken& picked);  // a sampled token: accept, stream, maybe finish
  void emit(Sequence& s, SequenceDelta& delta);
  void finish(Sequence& s, FinishReason reason, std::string error = {});
  void record_step(Clock::time_point start, int64_t prompt_tokens, int64_t sampled_tokens, bool ok,
                   const std::string& error);

  Executor& executor_;
  const Tokenizer& tokenizer_;
  SchedulerOptions options_;
  // The vocabulary's byte trie, built by the first request with a grammar.
  std::once_flag trie_once_;
  std::shared_ptr<const grammar::TokenTrie> trie_;
  const Clock::time_point started_ = Clock::now();

  // Shared with submitters.
  mutable std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<std::unique_ptr<Sequence>> queue_;
  int64_t n_active_ = 0;  // mirrors active_.size() for load() and stats()
  bool stopping_ = false;
  Mover mover_;

  // Statistics (their own lock: stats() must not wait for a forward pass).
  mutable std::mutex stats_mutex_;
  SchedulerStats totals_;
  std::deque<StepRecord> window_;

  // Scheduler thread only.
  std::vector<std::unique_ptr<Sequence>> active_;
  std::vector<int64_t> free_slots_;
  std::vector<Lane> lanes_;
  Batch batch_;

  std::thread thread_;  // last: started once everything above exists
};

}  // namespace tessera
