// Sums tensor sizes per layer and derives the per-token costs used by inspect and the planner.
#include "model/model_profile.h"

#include <algorithm>

#include "model/kv_cache.h"
#include "model/tensor_layout.h"

namespace tessera {

ModelProfile profile_model(const gguf::TensorSource& file, const ModelConfig& config) {
  ModelProfile p;
  p.layer_bytes.assign(static_cast<size_t>(config.n_layer), 0);
  uint64_t expert_bytes = 0;
  for (const auto& t : file.tensors()) {
    p.weight_bytes += t.n_bytes;
    p.n_params += static_cast<uint64_t>(t.n_elements());
    const int64_t layer = layer_of_tensor(t.name);
    const bool is_expert = t.name.find("_exps.") != std::string::npos;
    if (layer >= 0 && layer < config.n_layer) {
      p.layer_bytes[static_cast<size_t>(layer)] += t.n_bytes;
      if (is_expert) expert_bytes += t.n_bytes;
      // Matrices cost 2 FLOPs per weight; expert tensors only for the experts a token uses.
      if (t.ne.size() >= 2) {
        uint64_t elems = static_cast<uint64_t>(t.n_elements());
        if (is_expert && config.n_expert > 0) {
          elems = elems / static_cast<uint64_t>(config.n_expert) * static_cast<uint64_t>(config.n_expert_used);
        }
        p.flops_per_token += 2 * elems;
      }
    } else if (t.name == "token_embd.weight") {
      p.embd_bytes += t.n_bytes;
    } else if (t.name == "per_layer_token_embd.weight") {
      p.per_layer_embd_bytes += t.n_bytes;
    } else if (t.name == "output.weight" || t.name == "output_norm.weight") {
      p.output_bytes += t.n_bytes;
      if (t.name == "output.weight") p.flops_per_token += 2 * static_cast<uint64_t>(t.n_elements());
    } else {
      p.other_bytes += t.n_bytes;
      // per_layer_model_proj (Gemma 4) multiplies every token's embedding.
      if (t.ne.size() >= 2) p.flops_per_token += 2 * static_cast<uint64_t>(t.n_elements());
    }
  }
  if (config.tied_output) {
    // The head reads the embedding matrix as its output projection.
    p.flops_per_token += 2 * static_cast<uint64_t>(config.n_embd) * static_cast<uint64_t>(config.n_vocab);
  }
  p.expert_bytes_per_layer = config.n_layer > 0 ? expert_bytes / static_cast<uint64_t>(config.n_layer) : 0;

  uint64_t layer_read = 0;
  for (uint64_t b : p.layer_bytes) layer_read += b;
  if (config.n_expert > 0) {
    const uint64_t unused_experts = static_cast<uint64_t>(config.n_expert - config.n_expert_used);
    layer_read -= expert_bytes / static_cast<uint64_t>(config.n_expert) * unused_experts;
  }
  const uint64_t vocab = static_cast<uint64_t>(std::max<int64_t>(config.n_vocab, 1));
  const uint64_t embd_rows = p.embd_bytes / vocab + p.per_layer_embd_bytes / vocab;
  const uint64_t head = config.tied_output ? p.embd_bytes : 0;
  p.decode_bytes_per_token = layer_read + p.output_bytes + head + embd_rows + p.other_bytes;
  return p;
}

uint64_t kv_bytes_per_token(const ModelConfig& config, GgmlType kv_type) {
  const uint64_t elem = type_traits(kv_type).type_size;
  uint64_t values = 0;
  for (int64_t il = 0; il < config.n_layer; ++il) {
    const LayerShape s = config.layer(il);
    if (s.kv_source == il) values += static_cast<uint64_t>(s.n_embd_k() + s.n_embd_v());
  }
  return values * elem;
}

uint64_t kv_cache_bytes(const ModelConfig& config, int64_t n_ctx, GgmlType kv_type, int64_t n_slots) {
  return kv_cache_config(config, 0, config.n_layer, n_slots, n_ctx, kv_type).bytes();
}

std::vector<KvLayerType> kv_layer_types(const ModelConfig& config, int64_t n_ctx, GgmlType kv_type) {
  // The cache's own entries, so that the ring sizes and the layers without a cache are the ones a run allocates.
  const KvCacheConfig kv = kv_cache_config(config, 0, config.n_layer, 1, n_ctx, kv_type);
  const uint64_t elem = type_traits(kv_type).type_size;
  std::vector<KvLayerType> out;
  auto kind = [&](int64_t window, int64_t heads, int64_t dk, int64_t dv) -> KvLayerType& {
    for (auto& t : out) {
      if (t.window == window && t.n_head_kv == heads && t.head_dim_k == dk && t.head_dim_v == dv) return t;
    }
    KvLayerType t;
    t.window = window;
    t.n_head_kv = heads;
    t.head_dim_k = dk;
    t.head_dim_v = dv;
    out.push_back(t);
    return out.back();
  };
  for (int64_t il = 0; il < config.n_layer; ++il) {
    const LayerShape s = config.layer(il);
    KvLayerType& t = kind(s.window, s.n_head_kv, s.head_dim, s.head_dim_v);
    if (s.kv_source != il) {
      ++t.n_reusing;
      continue;
    }
    const KvLayer& l = kv.layers.at(static_cast<size_t>(kv.index_of(il)));
    ++t.n_layers;
    t.n_cells = l.n_cells;
    t.bytes += static_cast<uint64_t>(l.n_cells * (l.n_embd_k() + l.n_embd_v())) * elem;
  }
  std::stable_partition(out.begin(), out.end(), [](const KvLayerType& t) { return t.window == 0; });
  return out;
}

MemoryEstimate estimate_memory(const ModelProfile& profile, const ModelConfig& c, int64_t n_ctx, GgmlType kv_type,
                               int64_t n_batch) {
  MemoryEstimate m;
  m.weights = profile.weight_bytes;
  m.kv_cache = kv_cache_bytes(c, n_ctx, kv_type);
  // Activations of one prompt batch in f32: residual, norm, q/k/v, attention out, FFN hidden x2, logits, and the
  // attention scores of one head row per token against the whole context.
  const int64_t ffn = std::max(c.n_ff, c.n_ff_exp * std::max<int64_t>(c.n_expert_used, 1));
  const int64_t per_token = 3 * c.n_embd + c.n_embd_q() + c.n_embd_k() + c.n_embd_v() + 2 * ffn + c.n_vocab + n_ctx;
  m.compute = static_cast<uint64_t>(n_batch) * static_cast<uint64_t>(per_token) * 4;
  return m;
}

}  // namespace tessera
