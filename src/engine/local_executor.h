// The local Executor: one Stage holding every layer, with its own thread pool.
#pragma once

#include <memory>

#include "engine/executor.h"
#include "model/stage.h"
#include "util/thread_pool.h"

namespace tessera {

class LocalExecutor : public Executor {
 public:
  // pin: ThreadPool's (each thread bound to its own CPU).
  LocalExecutor(std::shared_ptr<const ModelWeights> weights, const StageOptions& options, int n_threads,
                bool pin = false);

  const ModelConfig& config() const override { return stage_.config(); }
  int64_t n_ctx() const override { return stage_.n_ctx(); }
  int64_t n_slots() const override { return stage_.n_slots(); }
  void decode(const Batch& batch, std::vector<float>& logits) override;
  void clear_sequence(int64_t seq) override { stage_.clear_sequence(seq); }
  void truncate_sequence(int64_t seq, int64_t n) override { stage_.truncate_sequence(seq, n); }
  int64_t sequence_length(int64_t seq) const override { return stage_.sequence_length(seq); }
  std::span<const uint8_t> weight_memory() const override { return stage_.copied_memory(); }

  const Stage& stage() const { return stage_; }
  int threads() const { return pool_.size(); }

 private:
  ThreadPool pool_;
  Stage stage_;
  StageOutput out_;
};

}  // namespace tessera
