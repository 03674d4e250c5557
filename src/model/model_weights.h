// A model's weights as views into the mapped GGUF file, checked against the architecture's expected tensors.
// Small vectors (norms, biases, rope factors) are copied out as f32.
#pragma once

#include <filesystem>
#include <memory>
#include <span>
#include <vector>

#include "gguf/gguf_file.h"
#include "model/model_config.h"
#include "model/shard.h"
#include "tensor/kernels.h"
#include "tensor/packed_weights.h"
#include "tensor/tensor_view.h"
#include "util/huge_buffer.h"
#include "util/thread_pool.h"

namespace tessera {

struct LayerWeights {
  std::vector<float> attn_norm, ffn_norm;
  std::vector<float> q_bias, k_bias, v_bias;  // qwen2
  std::vector<float> q_norm, k_norm;          // qwen3
  TensorView wq, wk, wv, wo;
  TensorView ffn_gate, ffn_up, ffn_down;                 // dense
  TensorView ffn_gate_inp;                               // MoE router [n_embd, n_expert]
  TensorView ffn_gate_exps, ffn_up_exps, ffn_down_exps;  // MoE experts, expert e = rows of slice e
  // Gemma: norms of the attention and FFN outputs before their residual adds.
  std::vector<float> post_attn_norm, post_ffn_norm;
  // Gemma 4 MoE: the shared MLP's and the experts' output norms, the experts' input norm, the router's input
  // scale, the fused gate/up experts (gate rows first) and each expert's output scale.
  std::vector<float> post_ffn_norm_1, pre_ffn_norm_2, post_ffn_norm_2, ffn_gate_inp_scale, ffn_down_exps_scale;
  TensorView ffn_gate_up_exps;
  // Gemma 4 per-layer input: gelu(ple_gate x) * input, projected back by ple_proj and normalised by ple_norm.
  TensorView ple_gate, ple_proj;
  std::vector<float> ple_norm;
  float layer_out_scale = 1.0f;  // Gemma 4: the whole stream times this at the layer's end

  // The layer's shape as these weights hold it: the model's, or a rank's share under tensor or expert parallelism
  // (its query and KV heads, FFN rows, each expert's rows, its experts), with where that share starts.
  LayerShape shape;
  int64_t q_head0 = 0;   // the first query head held
  int64_t kv_head0 = 0;  // the first KV head held
  int64_t expert0 = 0;   // the first expert held (expert parallelism); the experts held are consecutive
  // Under --tp: the pieces held of expert e (expert_pieces) are experts [pieces_of[e], pieces_of[e + 1]) of the
  // matrices here; empty when each expert held is one of them (expert0 on).
  std::vector<int32_t> pieces_of;
  // Pieces every rank holds (ExpertPiece::shared), by piece: -1 for a piece of this rank's own, else which shared
  // block; empty when there are none. A routed token runs a shared piece only where shared_piece_rank says.
  std::vector<int8_t> piece_shared;
  int shared_per_expert = 0;
  // Under --ep with copies of other ranks' experts (--ep-redundancy): who holds what, to deal a token's picks;
  // pieces_of then maps an expert to the matrix here that holds it whole.
  std::shared_ptr<const ExpertHolders> holders;
  int rank = 0, n_ranks = 1;
  bool attn_split = false;  // the attention's heads are split over the ranks (its output is a partial sum)
};

// Bytes of one tensor of the source that a rank's share reads: `count` runs of `bytes`, `stride` apart, from
// `offset` (a row range of a cut matrix, or the whole tensor as one run).
struct ShareExtent {
  std::string tensor;
  uint64_t offset = 0;
  uint64_t bytes = 0;
  uint64_t stride = 0;
  uint64_t count = 1;
};

struct LayerRange {
  int64_t begin = 0;  // first layer
  int64_t end = 0;    // one past the last layer
  bool contains(int64_t l) const { return l >= begin && l < end; }
  int64_t size() const { return end - begin; }
};

class ModelWeights {
 public:
  // Opens the file and loads the tensors the given layers need (all layers by default); the embedding is loaded
  // when with_embedding, the output head when with_head. Throws Error naming the file and tensor.
  static std::shared_ptr<const ModelWeights> load(const std::filesystem::path& path);
  static std::shared_ptr<const ModelWeights> load(const std::filesystem::path& path, LayerRange layers,
                                                  bool with_embedding, bool with_head);
  // The same from any tensor source (a worker's cache or streamed tensors).
  static std::shared_ptr<const ModelWeights> load(std::shared_ptr<const gguf::TensorSource> source, LayerRange layers,
                                                  bool with_embedding, bool with_head);

  // Rank spec.rank's share under tensor/expert parallelism (ShardSpec): its slices of the matrices copied into
  // memory of its own, the rest (norms, embedding, router) kept whole. Throws Error when a layer cannot be split
  // that many ways.
  static std::shared_ptr<const ModelWeights> sharded(const std::shared_ptr<const ModelWeights>& weights,
                                                     const ShardSpec& spec, ThreadPool& pool);
  // What sharded() reads of the source for `spec`, tensor by tensor in the source's order: the rank's slices of
  // the matrices it cuts, every other tensor whole. A member that lacks the file receives just these bytes.
  static std::vector<ShareExtent> share_extents(const std::shared_ptr<const ModelWeights>& weights,
                                                const ShardSpec& spec);
  const ShardSpec& shard() const { return shard_; }
  int64_t vocab0() const { return vocab0_; }  // the output head's first row held (split by vocabulary)

  // The same weights with every matrix the kernels have a packed layout for also packed (PackedWeights): faster
  // prefill and batched decode for packed_bytes() more memory.
  static std::shared_ptr<const ModelWeights> packed(const std::shared_ptr<const ModelWeights>& weights,
                                                    const Kernels& kernels, ThreadPool& pool);
  // The same weights copied out of the mapped file into huge pages (HugeBuffer): every token streams them, and
  // through 4 KiB page-cache pages that costs a TLB miss per page (docs/perf-log/probe-roofline.md). Costs their
  // size in private memory; the file's page cache stays, reclaimable. Matrices the kernels keep as panels
  // (Kernels::panels) are copied as panels instead of rows.
  static std::shared_ptr<const ModelWeights> copied(const std::shared_ptr<const ModelWeights>& weights,
                                                    const Kernels& kernels, ThreadPool& pool);
  uint64_t copied_bytes() const { return copy_ ? copy_->size() : 0; }
  std::span<const uint8_t> copied_memory() const {
    return copy_ ? std::span<const uint8_t>(copy_->data(), copy_->size()) : std::span<const uint8_t>();
  }
  // What copied() with these kernels would hold (panels are up to 10% larger than the rows they replace).
  uint64_t copied_bytes_for(const Kernels& kernels) const;
  uint64_t packed_bytes() const { return packed_ ? packed_->bytes() : 0; }
  // What packed() with these kernels would add: the memory checks count the copy before it is made.
  uint64_t packed_bytes_for(const Kernels& kernels) const;

  const ModelConfig& config() const { return config_; }
  const gguf::TensorSource& source() const { return *source_; }
  // The GGUF file the weights were mapped from; throws Error for weights assembled from another source.
  const gguf::GgufFile& file() const;
  LayerRange layers() const { return layers_; }
  const LayerWeights& layer(int64_t l) const { return layer_weights_.at(static_cast<size_t>(l - layers_.begin)); }
  const TensorView& token_embd() const { return token_embd_; }
  const TensorView& output() const { return output_; }  // token_embd when tied
  const std::vector<float>& output_norm() const { return output_norm_; }
  const std::vector<float>& rope_factors() const { return rope_factors_; }  // empty when absent
  // Gemma 4 per-layer inputs (loaded with the embedding): [n_layer * n_pl] per token.
  const TensorView& per_layer_tok_embd() const { return per_layer_tok_embd_; }
  const TensorView& per_layer_proj() const { return per_layer_proj_; }
  const std::vector<float>& per_layer_proj_norm() const { return per_layer_proj_norm_; }
  bool has_embedding() const { return !token_embd_.empty(); }
  bool has_head() const { return !output_norm_.empty(); }

 private:
  explicit ModelWeights(std::shared_ptr<const gguf::TensorSource> source) : source_(std::move(source)) {}
  ModelWeights(const ModelWeights&) = default;
  // sharded()'s cuts; with `extents`, only what they read is listed and nothing is copied.
  static std::shared_ptr<const ModelWeights> shard_impl(const std::shared_ptr<const ModelWeights>& weights,
                                                        const ShardSpec& spec, ThreadPool* pool,
                                                        std::vector<ShareExtent>* extents);
  // Every matrix view of the weights that packing covers (layers and head), for packing and for its size.
  template <class Self, class Fn>
  static void for_each_matrix(Self& self, Fn&& fn);

  std::shared_ptr<const gguf::TensorSource> source_;
  ModelConfig config_;
  LayerRange layers_;
  std::vector<LayerWeights> layer_weights_;
  TensorView token_embd_, output_, per_layer_tok_embd_, per_layer_proj_;
  std::vector<float> output_norm_, rope_factors_, per_layer_proj_norm_;
  std::shared_ptr<const PackedWeights> packed_;
  std::shared_ptr<const HugeBuffer> copy_;
  std::shared_ptr<const HugeBuffer> shard_copy_;  // sharded(): the rank's slices
  ShardSpec shard_;
  int64_t vocab0_ = 0;
};

}  // namespace tessera
