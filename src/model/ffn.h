// Feed-forward blocks: dense SwiGLU and mixture-of-experts (router, top-k, renormalised weights).
#pragma once

#include <cstdint>
#include <vector>

#include "model/model_config.h"
#include "model/model_weights.h"
#include "tensor/matmul.h"
#include "util/thread_pool.h"

namespace tessera {

class FeedForward {
 public:
  // x: [n_tokens][n_embd] normalised input; out: [n_tokens][n_embd] (overwritten).
  void dense(const LayerWeights& w, const ModelConfig& c, const float* x, int64_t n_tokens, float* out,
             ThreadPool& pool);
  void moe(const LayerWeights& w, const ModelConfig& c, const float* x, int64_t n_tokens, float* out, ThreadPool& pool);

 private:
  void swiglu_rows(int64_t n_ff, int64_t n_rows, ThreadPool& pool);  // hidden = swiglu(gate, up), row by row
  MatmulScratch scratch_;
  std::vector<float> gate_, up_, hidden_, router_, gathered_, expert_out_;
};

}  // namespace tessera
