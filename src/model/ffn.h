// Feed-forward blocks: dense gated MLPs (SwiGLU, GeGLU) and mixture-of-experts (router, top-k, renormalised
// weights; Gemma 4's fused gate/up experts and per-expert output scales).
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "model/model_config.h"
#include "model/model_weights.h"
#include "tensor/matmul.h"
#include "tensor/tensor_ops.h"
#include "util/thread_pool.h"

namespace tessera {

// The gate's activation: SiLU, or GELU through llama.cpp's fp16 table (gelu_table set) or exactly.
struct GatedActivation {
  FfnActivation act = FfnActivation::Silu;
  const GeluTable* gelu_table = nullptr;
};

// Gemma 4's dense MLP beside the experts, run inside the experts' two passes of the thread pool (a decode step's
// fork/joins are a visible share of a small MoE's time): its own input and n_tokens outputs.
struct DenseBeside {
  const float* x;
  int64_t n_ff;
  float* out;
};

class FeedForward {
 public:
  // x: [n_tokens][n_embd] normalised input; out: [n_tokens][n_embd] (overwritten). next: the weights of the
  // matmul after this block (see matmul).
  void dense(const LayerWeights& w, int64_t n_ff, GatedActivation act, const float* x, int64_t n_tokens, float* out,
             ThreadPool& pool, NextWeights next = {});
  // router_x: the router's input, when it is not x (Gemma 4 routes on another normalisation of the stream).
  // The experts w holds are w.expert0 .. + w.shape.n_expert (all of them, or a rank's under expert parallelism),
  // or pieces of experts (w.pieces_of, tensor parallelism), each with w.shape.n_ff_exp rows; tokens routed to other
  // experts get nothing from them here.
  void moe(const LayerWeights& w, const ModelConfig& c, GatedActivation act, const float* x, const float* router_x,
           int64_t n_tokens, float* out, ThreadPool& pool, NextWeights next = {}, const DenseBeside* dense = nullptr);

 private:
  // Per expert: the tokens routed to it and their gate weights.
  using Routing = std::vector<std::vector<std::pair<int64_t, float>>>;
  // Up to this many tokens (decode, a few sequences) the threads share every expert's row chunks; above it each
  // thread takes whole expert matrices (EachSplit).
  static constexpr int64_t kBatchedExpertTokens = 16;

  void experts_together(const LayerWeights& w, const ModelConfig& c, GatedActivation act, const float* x,
                        const Routing& routed, float* out, ThreadPool& pool, EachSplit split, NextWeights next,
                        const DenseBeside* dense, int64_t n_tokens);
  // out[t] += weight * expert_out_ row (row0 + i) for the i-th (t, weight) of tokens.
  void add_expert_out(const std::vector<std::pair<int64_t, float>>& tokens, int64_t row0, int64_t n_embd,
                      float* out) const;
  // hidden = act(gate) * up, row by row; gate and up rows are `stride` floats apart.
  void glu_rows(GatedActivation act, const float* gate, const float* up, int64_t stride, int64_t n_ff, int64_t n_rows,
                ThreadPool& pool, float* hidden = nullptr);
  MatmulScratch scratch_;
  std::vector<float> gate_, up_, hidden_, router_, gathered_, expert_out_;
  std::vector<float> dense_gate_, dense_up_, dense_hidden_;  // DenseBeside's
  Routing routed_;
  std::vector<int64_t> order_;
  std::vector<double> deal_load_;  // --ep with copies: each rank's picks so far in this batch
  std::vector<int> dealt_;         // the rank of each of a token's picks
  std::vector<std::pair<int64_t, int64_t>> active_;
  std::vector<TensorView> views_;
  std::vector<const TensorView*> downs_;
  std::vector<MatmulJob> jobs_;
};

}  // namespace tessera
