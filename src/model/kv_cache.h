// Keys and values of past tokens for the layers one Stage holds, for many sequences at once.
// Each sequence owns a slot of n_ctx positions; the cache lives beside the forward pass that fills it.
#pragma once

#include <cstdint>
#include <vector>

#include "tensor/ggml_type.h"
#include "tensor/vec_ops.h"

namespace tessera {

struct KvCacheConfig {
  int64_t n_layers = 0;  // layers of this stage
  int64_t n_slots = 1;   // sequences that can be live at once
  int64_t n_ctx = 0;     // positions per sequence
  int64_t n_embd_k = 0;  // n_head_kv * head_dim
  int64_t n_embd_v = 0;
  GgmlType type = GgmlType::F16;  // F16 or F32
  int64_t n_head_kv = 1;          // the rows are kept head by head (see KvCache::k_head); divides n_embd_k and v
};

class KvCache {
 public:
  explicit KvCache(const KvCacheConfig& config);

  const KvCacheConfig& config() const { return config_; }
  uint64_t bytes() const { return static_cast<uint64_t>(k_.size() + v_.size()); }

  // Stores one token's k and v (f32) for layer `layer` (0-based within the stage) of sequence `slot` at `pos`.
  void store(int64_t layer, int64_t slot, int64_t pos, const float* k, const float* v,
             const VecOps& ops = VecOps::get(Isa::Scalar));
  // One KV head's history in one layer of one sequence, in config().type: position p's n_embd_k / n_head_kv
  // elements (or n_embd_v / n_head_kv) start at element p times that many. Head by head, so that attention reads
  // each head's keys and values as one stream rather than a row's slice every n_embd_k elements.
  const uint8_t* k_head(int64_t layer, int64_t slot, int64_t head) const {
    return k_.data() + offset(layer, slot, head, 0, config_.n_embd_k);
  }
  const uint8_t* v_head(int64_t layer, int64_t slot, int64_t head) const {
    return v_.data() + offset(layer, slot, head, 0, config_.n_embd_v);
  }

  // Number of positions stored for a sequence (its next position).
  int64_t length(int64_t slot) const { return lengths_.at(static_cast<size_t>(slot)); }
  void set_length(int64_t slot, int64_t n);  // after a batch; n <= n_ctx
  void clear(int64_t slot) { set_length(slot, 0); }

 private:
  size_t offset(int64_t layer, int64_t slot, int64_t head, int64_t pos, int64_t row_elems) const;

  KvCacheConfig config_;
  size_t elem_size_;
  std::vector<uint8_t> k_;
  std::vector<uint8_t> v_;
  std::vector<int64_t> lengths_;
};

}  // namespace tessera
