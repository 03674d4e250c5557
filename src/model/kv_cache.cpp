// Layout per entry: [slot][head][cell][head_dim] so one head's history of one layer and sequence is contiguous for
// attention; a ring's position p lives in cell p mod n_cells.
#include "model/kv_cache.h"

#include <algorithm>
#include <cstring>

#include "util/error.h"

namespace tessera {

uint64_t KvCacheConfig::bytes() const {
  const uint64_t elem = type_traits(type).type_size;
  uint64_t total = 0;
  for (const KvLayer& l : layers) {
    total += static_cast<uint64_t>(n_slots * l.n_cells * (l.n_embd_k() + l.n_embd_v())) * elem;
  }
  return total;
}

KvCacheConfig KvCacheConfig::uniform(int64_t n_layers, int64_t n_slots, int64_t n_ctx, int64_t n_head_kv,
                                     int64_t head_dim_k, int64_t head_dim_v, GgmlType type) {
  KvCacheConfig kv;
  kv.n_slots = n_slots;
  kv.n_ctx = n_ctx;
  kv.type = type;
  for (int64_t l = 0; l < n_layers; ++l) kv.layers.push_back({l, n_head_kv, head_dim_k, head_dim_v, 0, n_ctx});
  return kv;
}

int64_t KvCacheConfig::index_of(int64_t model_layer) const {
  for (size_t i = 0; i < layers.size(); ++i) {
    if (layers[i].model_layer == model_layer) return static_cast<int64_t>(i);
  }
  return -1;
}

KvCacheConfig kv_cache_config(const ModelConfig& c, int64_t begin, int64_t end, int64_t n_slots, int64_t n_ctx,
                              GgmlType type, int64_t window_batch, const std::function<LayerShape(int64_t)>& shape) {
  if (window_batch <= 0) fail("the sliding-window batch must be positive, got {}", window_batch);
  KvCacheConfig kv;
  kv.window_batch = window_batch;
  kv.n_slots = n_slots;
  kv.n_ctx = n_ctx;
  kv.type = type;
  auto entry = [&](int64_t il) {
    const LayerShape s = shape ? shape(il) : c.layer(il);
    KvLayer l;
    l.model_layer = il;
    l.n_head_kv = s.n_head_kv;
    l.head_dim_k = s.head_dim;
    l.head_dim_v = s.head_dim_v;
    l.window = s.window;
    l.n_cells = s.is_swa() ? std::min(n_ctx, s.window - 1 + window_batch) : n_ctx;
    kv.layers.push_back(l);
  };
  for (int64_t src : c.kv_carried_across(begin)) {
    bool used = false;
    for (int64_t il = begin; il < end; ++il) used = used || c.layer(il).kv_source == src;
    if (used) entry(src);
  }
  for (int64_t il = begin; il < end; ++il) {
    if (c.layer(il).kv_source == il) entry(il);
  }
  return kv;
}

KvCache::KvCache(KvCacheConfig config) : config_(std::move(config)) {
  if (config_.type != GgmlType::F16 && config_.type != GgmlType::F32) {
    fail("KV cache type must be f16 or f32, got {}", type_name(config_.type));
  }
  elem_size_ = type_traits(config_.type).type_size;
  size_t k_total = 0;
  size_t v_total = 0;
  if (config_.n_slots <= 0) fail("KV cache: {} slots", config_.n_slots);
  for (const KvLayer& l : config_.layers) {
    if (l.n_head_kv <= 0 || l.head_dim_k <= 0 || l.head_dim_v <= 0 || l.n_cells <= 0) {
      fail("KV cache: layer {} has {} heads of {} and {} elements over {} cells", l.model_layer, l.n_head_kv,
           l.head_dim_k, l.head_dim_v, l.n_cells);
    }
    // Sizes that come from a peer are multiplied with overflow checks before anything is allocated.
    uint64_t cells = 0, k_bytes = 0, v_bytes = 0;
    if (__builtin_mul_overflow(static_cast<uint64_t>(config_.n_slots), static_cast<uint64_t>(l.n_cells), &cells) ||
        __builtin_mul_overflow(cells, static_cast<uint64_t>(l.n_embd_k()) * elem_size_, &k_bytes) ||
        __builtin_mul_overflow(cells, static_cast<uint64_t>(l.n_embd_v()) * elem_size_, &v_bytes) ||
        k_bytes + v_bytes > (uint64_t{1} << 46)) {
      fail("KV cache: layer {} would need more than 64 TiB ({} slots x {} positions)", l.model_layer, config_.n_slots,
           l.n_cells);
    }
    k_offset_.push_back(k_total);
    v_offset_.push_back(v_total);
    k_total += static_cast<size_t>(config_.n_slots * l.n_cells * l.n_embd_k()) * elem_size_;
    v_total += static_cast<size_t>(config_.n_slots * l.n_cells * l.n_embd_v()) * elem_size_;
  }
  k_.resize(k_total);
  v_.resize(v_total);
  lengths_.assign(static_cast<size_t>(config_.n_slots), 0);
}

size_t KvCache::head_offset(int64_t entry, int64_t slot, int64_t head, bool keys) const {
  const KvLayer& l = config_.layers[static_cast<size_t>(entry)];
  const int64_t hd = keys ? l.head_dim_k : l.head_dim_v;
  return static_cast<size_t>((slot * l.n_head_kv + head) * l.n_cells * hd) * elem_size_;
}

void KvCache::store(int64_t entry, int64_t slot, int64_t pos, const float* k, const float* v, const VecOps& ops) {
  const KvLayer& l = config_.layers[static_cast<size_t>(entry)];
  const int64_t hk = l.head_dim_k;
  const int64_t hv = l.head_dim_v;
  const int64_t cell = pos % l.n_cells;
  for (int64_t h = 0; h < l.n_head_kv; ++h) {
    uint8_t* kd = k_.data() + k_offset_[static_cast<size_t>(entry)] + head_offset(entry, slot, h, true) +
                  static_cast<size_t>(cell * hk) * elem_size_;
    uint8_t* vd = v_.data() + v_offset_[static_cast<size_t>(entry)] + head_offset(entry, slot, h, false) +
                  static_cast<size_t>(cell * hv) * elem_size_;
    if (config_.type == GgmlType::F32) {
      std::memcpy(kd, k + h * hk, static_cast<size_t>(hk) * sizeof(float));
      std::memcpy(vd, v + h * hv, static_cast<size_t>(hv) * sizeof(float));
    } else {
      ops.f32_to_f16(k + h * hk, reinterpret_cast<uint16_t*>(kd), hk);
      ops.f32_to_f16(v + h * hv, reinterpret_cast<uint16_t*>(vd), hv);
    }
  }
}

void KvCache::check_slot(int64_t slot) const {
  if (slot < 0 || slot >= config_.n_slots) fail("sequence {} is outside the cache's {} slots", slot, config_.n_slots);
}

void KvCache::set_length(int64_t slot, int64_t n) {
  check_slot(slot);
  if (n < 0 || n > config_.n_ctx) fail("sequence length {} exceeds the context of {} tokens", n, config_.n_ctx);
  lengths_[static_cast<size_t>(slot)] = n;
}

bool KvCache::can_truncate(int64_t slot, int64_t n) const {
  const int64_t len = length(slot);
  if (n >= len) return true;
  for (const KvLayer& l : config_.layers) {
    // The ring holds positions [len - n_cells, len); a token at n sees [n - window + 1, n - 1] of them.
    if (l.is_ring(config_.n_ctx) && n > 0 && std::max<int64_t>(0, n - l.window + 1) < len - l.n_cells) return false;
  }
  return true;
}

}  // namespace tessera
