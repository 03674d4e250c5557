// Keys and values of past tokens for the layers one Stage holds, for many sequences at once.
// Each sequence owns a slot per layer: n_ctx positions, or on a sliding-window layer a ring that keeps the window
// (and room for one batch's tokens). Layers may differ in KV heads and head sizes (Gemma); a layer that reads an
// earlier layer's K/V has no entry of its own.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "model/model_config.h"
#include "tensor/ggml_type.h"
#include "tensor/vec_ops.h"

namespace tessera {

// A sliding-window layer's ring keeps window - 1 + kWindowBatch positions: a batch stores at most kWindowBatch
// tokens of a sequence before they attend, so none overwrites a key an earlier token of the batch still sees.
constexpr int64_t kWindowBatch = 512;

struct KvLayer {
  int64_t model_layer = 0;  // the model's layer index whose K/V this entry keeps
  int64_t n_head_kv = 1;
  int64_t head_dim_k = 0;
  int64_t head_dim_v = 0;
  int64_t window = 0;   // sliding window (0: global)
  int64_t n_cells = 0;  // positions kept per sequence: n_ctx, or the ring's size on a sliding layer
  int64_t n_embd_k() const { return n_head_kv * head_dim_k; }
  int64_t n_embd_v() const { return n_head_kv * head_dim_v; }
  bool is_ring(int64_t n_ctx) const { return n_cells < n_ctx; }
};

struct KvCacheConfig {
  std::vector<KvLayer> layers;
  int64_t n_slots = 1;                  // sequences that can be live at once
  int64_t n_ctx = 0;                    // positions per sequence
  GgmlType type = GgmlType::F16;        // F16 or F32
  int64_t window_batch = kWindowBatch;  // new tokens of a sequence a forward pass stores before they attend

  // n_layers alike, each keeping every position (tests, and models without sliding layers).
  static KvCacheConfig uniform(int64_t n_layers, int64_t n_slots, int64_t n_ctx, int64_t n_head_kv, int64_t head_dim_k,
                               int64_t head_dim_v, GgmlType type);
  // Bytes of keys and values over every layer and slot.
  uint64_t bytes() const;
  // The entry that keeps model layer `layer`'s K/V, or -1.
  int64_t index_of(int64_t model_layer) const;
};

// The cache for model layers [begin, end): an entry per layer with K/V of its own, plus one per earlier layer whose
// K/V a layer in the range reads (a pipeline carries those rows across the boundary).
// shape: each layer's shape as the stage holds it (a tensor-parallel rank keeps only its KV heads); by default the
// model's.
KvCacheConfig kv_cache_config(const ModelConfig& c, int64_t begin, int64_t end, int64_t n_slots, int64_t n_ctx,
                              GgmlType type, int64_t window_batch = kWindowBatch,
                              const std::function<LayerShape(int64_t)>& shape = {});

class KvCache {
 public:
  explicit KvCache(KvCacheConfig config);

  const KvCacheConfig& config() const { return config_; }
  uint64_t bytes() const { return static_cast<uint64_t>(k_.size() + v_.size()); }
  const KvLayer& layer(int64_t entry) const { return config_.layers.at(static_cast<size_t>(entry)); }

  // Stores one token's k and v (f32) for entry `entry` of sequence `slot` at position `pos`.
  void store(int64_t entry, int64_t slot, int64_t pos, const float* k, const float* v,
             const VecOps& ops = VecOps::get(Isa::Scalar));
  // One KV head's cells in one entry of one sequence, in config().type: position p's head_dim_k elements (or
  // head_dim_v) start at element (p mod n_cells) times that many. Head by head, so that attention reads each
  // head's keys and values as one stream rather than a row's slice every n_embd_k elements.
  const uint8_t* k_head(int64_t entry, int64_t slot, int64_t head) const {
    return k_.data() + k_offset_[static_cast<size_t>(entry)] + head_offset(entry, slot, head, true);
  }
  const uint8_t* v_head(int64_t entry, int64_t slot, int64_t head) const {
    return v_.data() + v_offset_[static_cast<size_t>(entry)] + head_offset(entry, slot, head, false);
  }

  // Number of positions stored for a sequence (its next position).
  // Throws Error for a slot outside the cache (a sequence id from a peer is checked here, not trusted).
  int64_t length(int64_t slot) const {
    check_slot(slot);
    return lengths_[static_cast<size_t>(slot)];
  }
  void set_length(int64_t slot, int64_t n);  // after a batch; n <= n_ctx
  void clear(int64_t slot) { set_length(slot, 0); }
  // Whether the sequence can go back to n positions: a ring has overwritten positions a token at n would see when
  // it holds more than its spare cells beyond n.
  bool can_truncate(int64_t slot, int64_t n) const;

 private:
  void check_slot(int64_t slot) const;
  size_t head_offset(int64_t entry, int64_t slot, int64_t head, bool keys) const;

  KvCacheConfig config_;
  size_t elem_size_;
  std::vector<size_t> k_offset_, v_offset_;  // each entry's first byte
  std::vector<uint8_t> k_;
  std::vector<uint8_t> v_;
  std::vector<int64_t> lengths_;
};

}  // namespace tessera
