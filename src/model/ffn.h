// Feed-forward blocks: dense SwiGLU and mixture-of-experts (router, top-k, renormalised weights).
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "model/model_config.h"
#include "model/model_weights.h"
#include "tensor/matmul.h"
#include "util/thread_pool.h"

namespace tessera {

class FeedForward {
 public:
  // x: [n_tokens][n_embd] normalised input; out: [n_tokens][n_embd] (overwritten). next: the weights of the
  // matmul after this block (see matmul).
  void dense(const LayerWeights& w, const ModelConfig& c, const float* x, int64_t n_tokens, float* out,
             ThreadPool& pool, NextWeights next = {});
  void moe(const LayerWeights& w, const ModelConfig& c, const float* x, int64_t n_tokens, float* out, ThreadPool& pool,
           NextWeights next = {});

 private:
  // Per expert: the tokens routed to it and their gate weights.
  using Routing = std::vector<std::vector<std::pair<int64_t, float>>>;
  // Up to this many tokens (decode, a few sequences) the threads share every expert's row chunks; above it each
  // thread takes whole expert matrices (EachSplit).
  static constexpr int64_t kBatchedExpertTokens = 16;

  void experts_together(const LayerWeights& w, const ModelConfig& c, const float* x, const Routing& routed, float* out,
                        ThreadPool& pool, EachSplit split, NextWeights next);
  // out[t] += weight * expert_out_ row (row0 + i) for the i-th (t, weight) of tokens.
  void add_expert_out(const std::vector<std::pair<int64_t, float>>& tokens, int64_t row0, int64_t n_embd,
                      float* out) const;
  void swiglu_rows(int64_t n_ff, int64_t n_rows, ThreadPool& pool);  // hidden = swiglu(gate, up), row by row
  MatmulScratch scratch_;
  std::vector<float> gate_, up_, hidden_, router_, gathered_, expert_out_;
};

}  // namespace tessera
