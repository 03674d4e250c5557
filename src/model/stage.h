// A Stage: the forward pass over a contiguous range of layers (plus the embedding if first, the output head if
// last) and the KV cache of those layers. A local run is one Stage with every layer; a pipeline runs the same
// code on every node.
#pragma once

#include <memory>
#include <span>
#include <vector>

#include "collective/communicator.h"
#include "model/attention.h"
#include "model/batch.h"
#include "model/ffn.h"
#include "model/kv_cache.h"
#include "model/model_weights.h"
#include "tensor/matmul.h"
#include "tensor/tensor_ops.h"
#include "util/thread_pool.h"

namespace tessera {

struct StageOptions {
  int64_t n_slots = 1;  // sequences live at once
  int64_t n_ctx = 0;    // positions per sequence (0: the model's training context)
  GgmlType kv_type = GgmlType::F16;
  // Pack the weight matrices at load for the CPU's gemm (ModelWeights::packed): faster prefill and batched
  // decode, for about 1.3 bytes per weight more memory.
  bool repack = false;
  // Copy the weights into huge pages at load (ModelWeights::copied) instead of reading them from the mapped file.
  bool copy_weights = true;
  // Gemma's GELU evaluated exactly in f32, instead of through llama.cpp's fp16 table (GeluTable), which the
  // reference logits and llama.cpp's outputs come from.
  bool exact_gelu = false;
  // A sliding-window layer's cache keeps window - 1 + window_batch positions per sequence (see KvCacheConfig).
  int64_t window_batch = kWindowBatch;
  // This stage's share of each layer under tensor/expert parallelism (the Stage then needs a Communicator with
  // one rank per share).
  ShardSpec shard{};
};

struct StageOutput {
  std::vector<float> hidden;  // [n_tokens][out_width()] when the stage has no head
  std::vector<float> logits;  // [n_outputs][n_vocab] for the batch's want_logits tokens, in batch order
};

class Stage {
 public:
  // comm: the ranks that hold the other shares of each layer, when options.shard splits the layers.
  Stage(std::shared_ptr<const ModelWeights> weights, const StageOptions& options, ThreadPool& pool,
        collective::Communicator* comm = nullptr);

  const ModelConfig& config() const { return weights_->config(); }
  // Memory of the weights packed at load (StageOptions::repack); 0 when none were.
  uint64_t packed_bytes() const { return weights_->packed_bytes(); }
  // The kernels whose packed layouts StageOptions::repack builds: this CPU's path (AVX-512 packs the quantized
  // types; other paths pack nothing). The planner sizes the packed copy with the same kernels.
  static const Kernels& packing_kernels();
  // What packed_bytes() will be for a stage of these weights and options, before it is built (memory checks).
  static uint64_t packed_bytes_for(const ModelWeights& weights, const StageOptions& options);
  // Private memory of the weights copied at load (StageOptions::copy_weights); 0 when they stay mapped.
  uint64_t copied_bytes() const { return weights_->copied_bytes(); }
  std::span<const uint8_t> copied_memory() const { return weights_->copied_memory(); }
  LayerRange layers() const { return weights_->layers(); }
  const ShardSpec& shard() const { return weights_->shard(); }
  bool is_first() const { return weights_->has_embedding(); }
  bool is_last() const { return weights_->has_head(); }
  const KvCache& cache() const { return cache_; }
  int64_t n_ctx() const { return cache_.config().n_ctx; }
  int64_t n_slots() const { return cache_.config().n_slots; }

  // Floats per token this stage reads from the stage before it and hands to the next (ModelConfig::boundary_width):
  // n_embd, and for Gemma 4 the per-layer inputs of later layers and the K/V rows later layers reuse.
  int64_t in_width() const { return config().boundary_width(layers().begin); }
  int64_t out_width() const { return config().boundary_width(layers().end); }

  // Runs the batch. The first stage reads batch.tokens; later stages read `hidden_in` ([n_tokens][in_width()]).
  // Each sequence's tokens must continue it: positions length, length + 1, ... in batch order.
  void forward(const Batch& batch, const float* hidden_in, StageOutput& out);
  // The same, with a tensor-parallel head's logits left as this rank's vocabulary range ([n_outputs][rows of
  // vocab_range()]) instead of gathered on rank 0: for picking from each rank's candidates.
  void forward_ungathered(const Batch& batch, const float* hidden_in, StageOutput& out);
  // The vocabulary rows this stage's head computes: [first, first + count).
  std::pair<int64_t, int64_t> vocab_range() const { return {weights_->vocab0(), weights_->output().rows()}; }

  // Times a pass of each batch size (sizes above the context are left out) through the first layer, `rounds`
  // times with the sizes interleaved (no new round once `budget_s` seconds have passed: a big model's layer is
  // slow, and one round is enough for it), keeps each size's fastest and scales it by the layer count: what a
  // prompt micro-batch of that size costs here. Uses sequence 0, which must be empty, and leaves it empty. Empty
  // for a stage without layers.
  std::vector<BatchTime> time_batches(std::span<const int64_t> sizes, int rounds, double budget_s);

  // Forgets a sequence (its slot can be reused) or keeps only its first n positions.
  void clear_sequence(int64_t seq) { cache_.clear(seq); }
  void truncate_sequence(int64_t seq, int64_t n);
  // Whether truncate_sequence(seq, n) keeps every key position n will see (a sliding layer's ring may have
  // overwritten them): otherwise the caller recomputes the sequence from the start.
  bool can_truncate(int64_t seq, int64_t n) const { return cache_.can_truncate(seq, n); }
  int64_t sequence_length(int64_t seq) const { return cache_.length(seq); }

 private:
  // The cos/sin of a step's tokens for one rope configuration (Gemma's sliding and global layers differ).
  struct RopeSet {
    int64_t n_rot;
    float base, freq_scale;
    bool factors;
    std::vector<float> cs;
  };

  void check_batch(const Batch& batch) const;
  bool has_rings() const;  // a sliding-window layer keeps fewer cells than the context
  // forward for a batch in which no sequence has more than kWindowBatch tokens when the cache has rings.
  void forward_part(const Batch& batch, const float* hidden_in, StageOutput& out);
  void embed(const Batch& batch);
  void read_boundary(const Batch& batch, const float* hidden_in);
  void write_boundary(int64_t n_tokens, std::vector<float>& out) const;
  void per_layer_inputs(const Batch& batch);  // Gemma 4, on the first stage: ple_ from the tokens and embedding
  const float* rope_for(const LayerShape& s, const Batch& batch);
  void layer_forward(int64_t layer, const Batch& batch);
  void attention_inputs(int64_t layer, const LayerShape& s, const Batch& batch);
  void gemma_ffn(int64_t layer, const LayerShape& s, int64_t n_tokens, NextWeights after);
  void add_residual(int64_t n_tokens, int64_t n_embd);                                    // x += proj, row by row
  void norm_rows(float* rows, const std::vector<float>& w, int64_t n_tokens, int64_t n);  // in place
  void dense_ffn(const LayerWeights& w, int64_t n_ff, GatedActivation act, int64_t n_tokens, std::vector<float>& out,
                 NextWeights after);
  // The sum over the ranks of each rank's partial output (tensor/expert parallelism); nothing on one rank.
  void reduce(std::vector<float>& v, int64_t n);
  void gather_logits(int64_t n_out, std::vector<float>& logits);
  bool gather_ = true;  // forward_ungathered clears it for one call

  std::shared_ptr<const ModelWeights> weights_;
  ThreadPool& pool_;
  collective::Communicator* comm_;
  std::vector<float> gathered_;
  const VecOps& vec_;
  KvCache cache_;
  FeedForward ffn_;
  AttentionScratch attention_scratch_;
  MatmulScratch scratch_;
  std::vector<float> x_, norm_, q_, k_, v_, attn_, proj_;
  std::vector<float> mlp_, router_in_, experts_in_, ple_in_, gate_pl_;  // Gemma 4's MoE and per-layer input buffers
  std::vector<RopeSet> rope_sets_;                                      // this step's angles, by rope configuration
  std::unique_ptr<GeluTable> gelu_table_;                               // Gemma without StageOptions::exact_gelu
  // Gemma 4: each token's per-layer inputs for layers [ple_base_, n_layer), n_embd_per_layer each.
  std::vector<float> ple_;
  int64_t ple_base_ = 0;
  // Gemma 4: the K/V rows of this step's tokens for layers whose K/V the next stage carries on, by model layer.
  std::vector<std::pair<int64_t, std::vector<float>>> carried_;
};

}  // namespace tessera
