// Layout: [layer][slot][head][pos][n_embd_k / n_head_kv] so one head's history of one layer and sequence is
// contiguous for attention.
#include "model/kv_cache.h"

#include <cstring>

#include "util/error.h"

namespace tessera {

KvCache::KvCache(const KvCacheConfig& config) : config_(config) {
  if (config.type != GgmlType::F16 && config.type != GgmlType::F32) {
    fail("KV cache type must be f16 or f32, got {}", type_name(config.type));
  }
  if (config.n_head_kv <= 0 || config.n_embd_k % config.n_head_kv != 0 || config.n_embd_v % config.n_head_kv != 0) {
    fail("KV cache: {} heads do not divide rows of {} and {} elements", config.n_head_kv, config.n_embd_k,
         config.n_embd_v);
  }
  elem_size_ = type_traits(config.type).type_size;
  const auto cells = static_cast<size_t>(config.n_layers * config.n_slots * config.n_ctx);
  k_.resize(cells * static_cast<size_t>(config.n_embd_k) * elem_size_);
  v_.resize(cells * static_cast<size_t>(config.n_embd_v) * elem_size_);
  lengths_.assign(static_cast<size_t>(config.n_slots), 0);
}

size_t KvCache::offset(int64_t layer, int64_t slot, int64_t head, int64_t pos, int64_t row_elems) const {
  const int64_t head_elems = row_elems / config_.n_head_kv;
  const int64_t sequence = (layer * config_.n_slots + slot) * config_.n_ctx * row_elems;
  return static_cast<size_t>(sequence + (head * config_.n_ctx + pos) * head_elems) * elem_size_;
}

void KvCache::store(int64_t layer, int64_t slot, int64_t pos, const float* k, const float* v, const VecOps& ops) {
  const int64_t hk = config_.n_embd_k / config_.n_head_kv;
  const int64_t hv = config_.n_embd_v / config_.n_head_kv;
  for (int64_t h = 0; h < config_.n_head_kv; ++h) {
    uint8_t* kd = k_.data() + offset(layer, slot, h, pos, config_.n_embd_k);
    uint8_t* vd = v_.data() + offset(layer, slot, h, pos, config_.n_embd_v);
    if (config_.type == GgmlType::F32) {
      std::memcpy(kd, k + h * hk, static_cast<size_t>(hk) * sizeof(float));
      std::memcpy(vd, v + h * hv, static_cast<size_t>(hv) * sizeof(float));
    } else {
      ops.f32_to_f16(k + h * hk, reinterpret_cast<uint16_t*>(kd), hk);
      ops.f32_to_f16(v + h * hv, reinterpret_cast<uint16_t*>(vd), hv);
    }
  }
}

void KvCache::set_length(int64_t slot, int64_t n) {
  if (slot < 0 || slot >= config_.n_slots) fail("sequence {} is outside the cache's {} slots", slot, config_.n_slots);
  if (n < 0 || n > config_.n_ctx) fail("sequence length {} exceeds the context of {} tokens", n, config_.n_ctx);
  lengths_[static_cast<size_t>(slot)] = n;
}

}  // namespace tessera
