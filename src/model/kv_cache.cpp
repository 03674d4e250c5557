// Layout: [layer][slot][pos][n_embd_k] so one sequence's history of one layer is contiguous for attention.
#include "model/kv_cache.h"

#include <cstring>

#include "util/error.h"

namespace tessera {

KvCache::KvCache(const KvCacheConfig& config) : config_(config) {
  if (config.type != GgmlType::F16 && config.type != GgmlType::F32) {
    fail("KV cache type must be f16 or f32, got {}", type_name(config.type));
  }
  elem_size_ = type_traits(config.type).type_size;
  const auto cells = static_cast<size_t>(config.n_layers * config.n_slots * config.n_ctx);
  k_.resize(cells * static_cast<size_t>(config.n_embd_k) * elem_size_);
  v_.resize(cells * static_cast<size_t>(config.n_embd_v) * elem_size_);
  lengths_.assign(static_cast<size_t>(config.n_slots), 0);
}

size_t KvCache::offset(int64_t layer, int64_t slot, int64_t pos, int64_t row_elems) const {
  const int64_t cell = (layer * config_.n_slots + slot) * config_.n_ctx + pos;
  return static_cast<size_t>(cell * row_elems) * elem_size_;
}

void KvCache::store(int64_t layer, int64_t slot, int64_t pos, const float* k, const float* v, const VecOps& ops) {
  uint8_t* kd = k_.data() + offset(layer, slot, pos, config_.n_embd_k);
  uint8_t* vd = v_.data() + offset(layer, slot, pos, config_.n_embd_v);
  if (config_.type == GgmlType::F32) {
    std::memcpy(kd, k, static_cast<size_t>(config_.n_embd_k) * sizeof(float));
    std::memcpy(vd, v, static_cast<size_t>(config_.n_embd_v) * sizeof(float));
    return;
  }
  auto* k16 = reinterpret_cast<uint16_t*>(kd);
  auto* v16 = reinterpret_cast<uint16_t*>(vd);
  ops.f32_to_f16(k, k16, config_.n_embd_k);
  ops.f32_to_f16(v, v16, config_.n_embd_v);
}

void KvCache::set_length(int64_t slot, int64_t n) {
  if (slot < 0 || slot >= config_.n_slots) fail("sequence {} is outside the cache's {} slots", slot, config_.n_slots);
  if (n < 0 || n > config_.n_ctx) fail("sequence length {} exceeds the context of {} tokens", n, config_.n_ctx);
  lengths_[static_cast<size_t>(slot)] = n;
}

}  // namespace tessera
