// LocalStageEndpoint: a job queue drained by one thread; sequence edits wait until the queue is idle so they
// never race a forward pass over the same cache.
#include "cluster/local_stage_endpoint.h"

#include <algorithm>

#include "cluster/micro_batches.h"
#include "engine/grammar_vocab.h"
#include "tokenizer/tokenizer.h"
#include "util/error.h"

namespace tessera::cluster {

void CompletionQueue::push(StageDone done) {
  {
    std::lock_guard lock(mutex_);
    items_.push_back(std::move(done));
  }
  cv_.notify_one();
}

StageDone CompletionQueue::pop() {
  std::unique_lock lock(mutex_);
  cv_.wait(lock, [&] { return !items_.empty(); });
  StageDone d = std::move(items_.front());
  items_.pop_front();
  return d;
}

std::optional<StageDone> CompletionQueue::pop_until(std::chrono::steady_clock::time_point deadline) {
  std::unique_lock lock(mutex_);
  if (!cv_.wait_until(lock, deadline, [&] { return !items_.empty(); })) return std::nullopt;
  StageDone d = std::move(items_.front());
  items_.pop_front();
  return d;
}

LocalStageEndpoint::LocalStageEndpoint(std::string node, int stage_index, std::shared_ptr<const ModelWeights> weights,
                                       const StageOptions& options, int threads, CompletionQueue& done, bool pin,
                                       std::shared_ptr<collective::Communicator> group)
    : node_(std::move(node)),
      index_(stage_index),
      stage_(weights, options, threads, pin, std::move(group)),
      batch_times_(stage_.time_batches(kTimedBatchTokens, stage_.communicator() ? 1 : kBatchTimingRounds,
                                       kBatchTimingBudgetSeconds)),
      sampler_(static_cast<int32_t>(stage_.config().n_vocab),
               std::clamp<size_t>(static_cast<size_t>(options.n_slots), 1, 64)),
      done_(done),
      thread_([this] { run(); }) {
  sampler_.set_trie_source(
      [weights] { return make_token_trie(*Tokenizer::from_metadata(weights->source().metadata())); });
}

LocalStageEndpoint::~LocalStageEndpoint() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void LocalStageEndpoint::submit(StageJob job) {
  {
    std::lock_guard lock(mutex_);
    jobs_.push_back(std::move(job));
  }
  cv_.notify_all();
}

void LocalStageEndpoint::run() {
  StageOutput out;
  for (;;) {
    StageJob job;
    {
      std::unique_lock lock(mutex_);
      cv_.wait(lock, [&] { return stopping_ || !jobs_.empty(); });
      if (stopping_) return;
      job = std::move(jobs_.front());
      jobs_.pop_front();
      busy_ = true;
    }
    StageDone done;
    done.stage = index_;
    done.id = job.id;
    try {
      forward_and_sample(stage_, job.batch, job.hidden.empty() ? nullptr : job.hidden.data(), job.sampling, sampler_,
                         out, done.sampled);
      done.hidden = std::move(out.hidden);
      done.logits = std::move(out.logits);
    } catch (const std::exception& e) {  // anything (bad_alloc included) fails the job, not the thread
      done.error = fmt::format("{}: {}", node_, e.what());
      note_group_failure();  // before the pipeline sees the error, so it reads the stage as failed
    }
    {
      std::lock_guard lock(mutex_);
      busy_ = false;
    }
    cv_.notify_all();
    done_.push(std::move(done));
  }
}

void LocalStageEndpoint::note_group_failure() {
  const collective::Communicator* group = stage_.communicator();
  if (group != nullptr && group->failed()) broken_.store(true);
}

// A group stage tells its members of the edit, which fails when the group broke: the stage is then failed too.
void LocalStageEndpoint::clear_sequence(int64_t seq) {
  std::unique_lock lock(mutex_);
  cv_.wait(lock, [&] { return jobs_.empty() && !busy_; });
  try {
    stage_.clear_sequence(seq);
  } catch (const Error&) {
    note_group_failure();
    throw;
  }
}

void LocalStageEndpoint::truncate_sequence(int64_t seq, int64_t n) {
  std::unique_lock lock(mutex_);
  cv_.wait(lock, [&] { return jobs_.empty() && !busy_; });
  try {
    stage_.truncate_sequence(seq, n);
  } catch (const Error&) {
    note_group_failure();
    throw;
  }
}

}  // namespace tessera::cluster
