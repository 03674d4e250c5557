// Per-layer costs from a tensor list. A file and a preset go through the same accounting (one tensor at a time), so
// an estimate for a file that does not exist matches what profiling the real file would give.
#include "plan/model_shape.h"

#include <algorithm>
#include <cctype>
#include <map>

#include "model/kv_cache.h"
#include "model/stage.h"
#include "model/tensor_layout.h"
#include "tensor/packed_weights.h"
#include "util/error.h"

namespace tessera::plan {
namespace {

// Adds one tensor's bytes and per-token FLOPs to the right part of the model.
class CostBuilder {
 public:
  CostBuilder(ModelCost& m) : m_(m), packing_(Stage::packing_kernels()) {
    const ModelConfig& c = m.config;
    m.layers.assign(static_cast<size_t>(c.n_layer), LayerCost{});
    const uint64_t elem = type_traits(m.kv_type).type_size;
    for (int64_t il = 0; il < c.n_layer; ++il) {
      LayerCost& l = m.layers[static_cast<size_t>(il)];
      const LayerShape s = c.layer(il);
      // A layer that reuses an earlier layer's K/V has the same K/V shape (ModelConfig::validate checks it).
      l.kv_bytes_per_token = static_cast<uint64_t>(s.n_embd_k() + s.n_embd_v()) * elem;
      // Each query head scores every attended position (head_dim multiply-adds) and mixes its values (head_dim_v).
      l.attn_flops_per_pos = 2.0 * static_cast<double>(s.n_head) * static_cast<double>(s.head_dim + s.head_dim_v);
      l.window = s.window;
      l.kv_cells = s.is_swa() ? s.window - 1 + kWindowBatch : 0;
      l.kv_own = s.kv_source == il;
    }
  }

  void add(const std::string& name, const std::vector<int64_t>& ne, GgmlType type, uint64_t bytes) {
    const ModelConfig& c = m_.config;
    uint64_t elems = 1;
    for (int64_t d : ne) elems *= static_cast<uint64_t>(d);
    m_.n_params += elems;
    const bool matrix = ne.size() >= 2;
    const bool quantized = type_traits(type).quantized;
    const double flops = matrix ? 2.0 * static_cast<double>(elems) : 0.0;
    // Every matrix of a layer is packed, and the head (ModelWeights::packed), exactly as large as the stage's copy.
    const uint64_t packed = matrix ? packed_bytes(ne, type) : 0;
    const int64_t layer = layer_of_tensor(name);
    if (layer >= 0 && layer < c.n_layer) {
      LayerCost& l = m_.layers[static_cast<size_t>(layer)];
      l.weight_bytes += bytes;
      if (name.find("_exps.") != std::string::npos && c.n_expert > 0) {
        l.expert_bytes += bytes;
        l.packed_expert_bytes += packed;
        (quantized ? l.expert_flops_q : l.expert_flops_f) += flops / static_cast<double>(c.n_expert);
      } else {
        l.dense_bytes += bytes;
        l.packed_dense_bytes += packed;
        (quantized ? l.dense_flops_q : l.dense_flops_f) += flops;
        // Which share of the layer tensor parallelism gives a rank of this tensor (model_shard.cpp's cuts).
        const std::string_view local = std::string_view(name).substr(name.find('.', 4) + 1);
        PartCost* part = nullptr;
        if (local.starts_with("attn_q.") || local.starts_with("attn_output.")) part = &l.attn_q;
        if (local.starts_with("attn_k.") || local.starts_with("attn_v.")) part = &l.attn_kv;
        if (local.starts_with("ffn_gate.") || local.starts_with("ffn_up.") || local.starts_with("ffn_down.")) {
          part = &l.ffn;
        }
        if (part != nullptr) {
          part->bytes += bytes;
          part->packed += packed;
          (quantized ? part->flops_q : part->flops_f) += flops;
        }
        if (local == "attn_output.weight") l.wo_block = type_traits(type).block_size;
        if (local == "ffn_down.weight") l.ffn_down_block = type_traits(type).block_size;
      }
      if (name.ends_with(".ffn_down_exps.weight")) l.exp_down_block = type_traits(type).block_size;
      return;
    }
    if (name == "token_embd.weight") {
      m_.embd_bytes += bytes;
      m_.embd_row_bytes = c.n_vocab > 0 ? bytes / static_cast<uint64_t>(c.n_vocab) : 0;
      embd_quantized_ = quantized;
      // Only a tied head packs the embedding (a lookup reads rows as they are).
      if (c.tied_output) m_.output_packed_bytes += packed;
    } else if (name == "output.weight") {
      m_.output_bytes += bytes;
      (quantized ? m_.output_flops_q : m_.output_flops_f) += flops;
      has_output_ = true;
      if (!c.tied_output) m_.output_packed_bytes += packed;
    } else if (name == "output_norm.weight") {
      m_.output_bytes += bytes;
    } else if (name == "per_layer_token_embd.weight") {
      m_.input_bytes += bytes;
      m_.input_read_bytes += c.n_vocab > 0 ? bytes / static_cast<uint64_t>(c.n_vocab) : 0;
    } else if (name == "per_layer_model_proj.weight" || name == "per_layer_proj_norm.weight") {
      m_.input_bytes += bytes;
      m_.input_read_bytes += bytes;
      (quantized ? m_.input_flops_q : m_.input_flops_f) += flops;
      m_.input_packed_bytes += packed;
    } else {
      m_.other_bytes += bytes;
    }
  }

  void finish() {
    if (!has_output_) {
      // A tied head multiplies by the embedding matrix.
      const double flops = 2.0 * static_cast<double>(m_.config.n_embd) * static_cast<double>(m_.config.n_vocab);
      (embd_quantized_ ? m_.output_flops_q : m_.output_flops_f) += flops;
    }
  }

 private:
  // PackedWeights' own size rule for the matrix's rows (every dimension after the first) of ne[0] elements.
  uint64_t packed_bytes(const std::vector<int64_t>& ne, GgmlType type) const {
    int64_t rows = 1;
    for (size_t d = 1; d < ne.size(); ++d) rows *= ne[d];
    return PackedWeights::bytes_for(type, rows, ne[0], packing_);
  }

  ModelCost& m_;
  const Kernels& packing_;
  bool embd_quantized_ = false;
  bool has_output_ = false;
};

ModelConfig dense(Arch arch, int64_t embd, int64_t layers, int64_t heads, int64_t heads_kv, int64_t head_dim,
                  int64_t ff, int64_t vocab, int64_t ctx, bool tied) {
  ModelConfig c;
  c.arch = arch;
  c.arch_name = std::string(arch_info(arch).name);
  c.n_embd = embd;
  c.n_layer = layers;
  c.n_head = heads;
  c.n_head_kv = heads_kv;
  c.head_dim = c.head_dim_v = c.n_rot = head_dim;
  c.n_ff = ff;
  c.n_vocab = vocab;
  c.n_ctx_train = ctx;
  c.tied_output = tied;
  c.rope_freq_base = arch == Arch::Llama ? 500000.0f : 1000000.0f;
  c.rms_eps = arch == Arch::Llama ? 1e-5f : 1e-6f;
  return c;
}

ModelConfig moe(ModelConfig c, int64_t n_expert, int64_t n_used, int64_t ff_exp) {
  c.n_ff = 0;
  c.n_expert = n_expert;
  c.n_expert_used = n_used;
  c.n_ff_exp = ff_exp;
  return c;
}

// Gemma 4's MoE layers keep their dense MLP (n_ff) beside the experts.
ModelConfig gemma4_moe(ModelConfig c, int64_t n_expert, int64_t n_used, int64_t ff_exp) {
  c.n_expert = n_expert;
  c.n_expert_used = n_used;
  c.n_ff_exp = ff_exp;
  return c;
}

ModelConfig with_rope_freqs(ModelConfig c) {
  c.has_rope_freqs = true;
  return c;
}

// Gemma 3: every swa_period-th layer global (linear rope scaling there), the others slide over `window` positions.
ModelConfig gemma3(int64_t embd, int64_t layers, int64_t heads, int64_t heads_kv, int64_t head_dim, int64_t ff,
                   int64_t vocab, int64_t ctx, int64_t window, float rope_factor) {
  ModelConfig c = dense(Arch::Gemma3, embd, layers, heads, heads_kv, head_dim, ff, vocab, ctx, true);
  c.n_swa = window;
  c.swa_period = 6;
  c.rope_freq_base_swa = 10000.0f;
  c.rope_scaling = RopeScaling::Linear;
  c.rope_freq_scale = 1.0f / rope_factor;
  c.rope_orig_ctx = ctx;
  return c;
}

// Gemma 4 (26B-A4B, 31B): a global layer every sixth (fewer, larger KV heads, V = K, proportional rope through
// rope_freqs), sliding layers with their own head size; no per-layer inputs or shared K/V in these sizes.
ModelConfig gemma4(int64_t embd, int64_t layers, int64_t heads, int64_t heads_kv_swa, int64_t heads_kv_global,
                   int64_t head_dim_swa, int64_t head_dim_global, int64_t ff, int64_t vocab, int64_t ctx,
                   int64_t window) {
  ModelConfig c = dense(Arch::Gemma4, embd, layers, heads, heads_kv_global, head_dim_global, ff, vocab, ctx, true);
  c.n_swa = window;
  c.rope_freq_base_swa = 10000.0f;
  c.head_dim_swa = head_dim_swa;
  c.n_rot_swa = head_dim_swa;
  c.has_rope_freqs = true;
  c.attn_k_eq_v = true;
  c.final_logit_softcap = 30.0f;
  for (int64_t il = 0; il < layers; ++il) {
    const bool global = il % 6 == 5;
    c.swa_layers.push_back(!global);
    c.n_head_kv_layers.push_back(global ? heads_kv_global : heads_kv_swa);
  }
  c.n_head_kv = std::max(heads_kv_swa, heads_kv_global);
  return c;
}

std::vector<ShapePreset> make_presets() {
  const Arch L = Arch::Llama, Q2 = Arch::Qwen2, Q3 = Arch::Qwen3, Q3M = Arch::Qwen3Moe;
  std::vector<ShapePreset> p = {
      {"llama-3.2-1b", "Llama-3.2-1B", with_rope_freqs(dense(L, 2048, 16, 32, 8, 64, 8192, 128256, 131072, true))},
      {"llama-3.2-3b", "Llama-3.2-3B", with_rope_freqs(dense(L, 3072, 28, 24, 8, 128, 8192, 128256, 131072, true))},
      {"llama-3-8b", "Llama-3-8B", dense(L, 4096, 32, 32, 8, 128, 14336, 128256, 8192, false)},
      {"llama-3.1-8b", "Llama-3.1-8B", with_rope_freqs(dense(L, 4096, 32, 32, 8, 128, 14336, 128256, 131072, false))},
      {"llama-3-70b", "Llama-3-70B", dense(L, 8192, 80, 64, 8, 128, 28672, 128256, 8192, false)},
      {"llama-3.1-70b", "Llama-3.1-70B", with_rope_freqs(dense(L, 8192, 80, 64, 8, 128, 28672, 128256, 131072, false))},
      {"llama-3.1-405b", "Llama-3.1-405B",
       with_rope_freqs(dense(L, 16384, 126, 128, 8, 128, 53248, 128256, 131072, false))},
      {"qwen2.5-0.5b", "Qwen2.5-0.5B", dense(Q2, 896, 24, 14, 2, 64, 4864, 151936, 32768, true)},
      {"qwen2.5-1.5b", "Qwen2.5-1.5B", dense(Q2, 1536, 28, 12, 2, 128, 8960, 151936, 32768, true)},
      {"qwen2.5-3b", "Qwen2.5-3B", dense(Q2, 2048, 36, 16, 2, 128, 11008, 151936, 32768, true)},
      {"qwen2.5-7b", "Qwen2.5-7B", dense(Q2, 3584, 28, 28, 4, 128, 18944, 152064, 32768, false)},
      {"qwen2.5-14b", "Qwen2.5-14B", dense(Q2, 5120, 48, 40, 8, 128, 13824, 152064, 32768, false)},
      {"qwen2.5-32b", "Qwen2.5-32B", dense(Q2, 5120, 64, 40, 8, 128, 27648, 152064, 32768, false)},
      {"qwen2.5-72b", "Qwen2.5-72B", dense(Q2, 8192, 80, 64, 8, 128, 29568, 152064, 32768, false)},
      {"qwen3-0.6b", "Qwen3-0.6B", dense(Q3, 1024, 28, 16, 8, 128, 3072, 151936, 40960, true)},
      {"qwen3-4b", "Qwen3-4B", dense(Q3, 2560, 36, 32, 8, 128, 9728, 151936, 40960, true)},
      {"qwen3-8b", "Qwen3-8B", dense(Q3, 4096, 36, 32, 8, 128, 12288, 151936, 40960, false)},
      {"qwen3-14b", "Qwen3-14B", dense(Q3, 5120, 40, 40, 8, 128, 17408, 151936, 40960, false)},
      {"qwen3-32b", "Qwen3-32B", dense(Q3, 5120, 64, 64, 8, 128, 25600, 151936, 40960, false)},
      {"qwen3-30b-a3b", "Qwen3-30B-A3B", moe(dense(Q3M, 2048, 48, 32, 4, 128, 0, 151936, 40960, false), 128, 8, 768)},
      {"qwen3-235b-a22b", "Qwen3-235B-A22B",
       moe(dense(Q3M, 4096, 94, 64, 4, 128, 0, 151936, 40960, false), 128, 8, 1536)},
      {"mixtral-8x7b", "Mixtral-8x7B", moe(dense(L, 4096, 32, 32, 8, 128, 0, 32000, 32768, false), 8, 2, 14336)},
      {"mixtral-8x22b", "Mixtral-8x22B", moe(dense(L, 6144, 56, 48, 8, 128, 0, 32768, 65536, false), 8, 2, 16384)},
      // The text models of the Hugging Face config.json files (docs/planner.md cites them).
      {"gemma-3-27b", "Gemma-3-27B", gemma3(5376, 62, 32, 16, 128, 21504, 262208, 131072, 1024, 8.0f)},
      {"gemma-4-26b-a4b", "Gemma-4-26B-A4B",
       gemma4_moe(gemma4(2816, 30, 16, 8, 2, 256, 512, 2112, 262144, 262144, 1024), 128, 8, 704)},
      {"gemma-4-31b", "Gemma-4-31B", gemma4(5376, 60, 32, 16, 4, 256, 512, 21504, 262144, 262144, 1024)},
  };
  for (auto& s : p) {
    s.config.name = std::string(s.display);
    if (s.name.starts_with("mixtral")) s.config.rope_freq_base = 1000000.0f;
  }
  return p;
}

}  // namespace

uint64_t ModelCost::total_bytes() const {
  uint64_t t = embd_bytes + output_bytes + other_bytes + input_bytes;
  for (const auto& l : layers) t += l.weight_bytes;
  return t;
}

uint64_t ModelCost::head_read_bytes() const { return config.tied_output ? embd_bytes + output_bytes : output_bytes; }

uint64_t ModelCost::decode_bytes_per_token() const {
  uint64_t t = embd_row_bytes + input_read_bytes + head_read_bytes() + other_bytes;
  for (const auto& l : layers) {
    t += l.dense_bytes;
    if (config.n_expert > 0) {
      t += l.expert_bytes / static_cast<uint64_t>(config.n_expert) * static_cast<uint64_t>(config.n_expert_used);
    }
  }
  return t;
}

double ModelCost::flops_per_token() const {
  double f = output_flops_q + output_flops_f + input_flops_q + input_flops_f;
  const auto k = static_cast<double>(config.n_expert_used);
  for (const auto& l : layers) f += l.dense_flops_q + l.dense_flops_f + k * (l.expert_flops_q + l.expert_flops_f);
  return f;
}

double ModelCost::bits_per_weight() const {
  return n_params > 0 ? 8.0 * static_cast<double>(total_bytes()) / static_cast<double>(n_params) : 0.0;
}

uint64_t ModelCost::total_packed_bytes() const {
  uint64_t t = output_packed_bytes + input_packed_bytes;
  for (const auto& l : layers) t += l.packed_dense_bytes + l.packed_expert_bytes;
  return t;
}

uint64_t ModelCost::kv_cache_bytes(int64_t n_ctx) const { return stage_kv_cache_bytes(0, n_layer() - 1, n_ctx); }

uint64_t ModelCost::stage_kv_cache_bytes(int64_t first, int64_t last, int64_t n_ctx) const {
  uint64_t t = 0;
  for (int64_t i = std::max<int64_t>(first, 0); i <= last && i < n_layer(); ++i) {
    t += layers[static_cast<size_t>(i)].kv_cache_bytes(n_ctx);
  }
  if (first <= 0 || config.n_layer != n_layer()) return t;
  for (int64_t src : config.kv_carried_across(first)) {
    bool used = false;
    for (int64_t il = first; il <= last && il < n_layer(); ++il) used = used || config.layer(il).kv_source == src;
    if (used) t += layers[static_cast<size_t>(src)].kv_cache_bytes(n_ctx);
  }
  return t;
}

std::vector<uint64_t> ModelCost::layer_weight_bytes() const {
  std::vector<uint64_t> out;
  for (const auto& l : layers) out.push_back(l.weight_bytes);
  return out;
}

ModelCost model_cost_from_file(const gguf::GgufFile& file, const ModelConfig& config, GgmlType kv_type,
                               std::string label) {
  ModelCost m;
  m.label = std::move(label);
  m.from_file = true;
  m.config = config;
  m.kv_type = kv_type;
  CostBuilder b(m);
  std::map<std::string, uint64_t> matrix_bytes_by_type;
  for (const auto& t : file.tensors()) {
    b.add(t.name, t.ne, t.type, t.n_bytes);
    if (t.ne.size() >= 2) matrix_bytes_by_type[std::string(type_name(t.type))] += t.n_bytes;
  }
  b.finish();
  uint64_t best = 0;
  for (const auto& [type, bytes] : matrix_bytes_by_type) {
    if (bytes > best) {
      best = bytes;
      m.type = type;
      m.matmul_type = type;
    }
  }
  return m;
}

ModelCost model_cost_from_shape(const ModelConfig& config, const QuantMix& mix, GgmlType kv_type, std::string label) {
  config.validate(label);
  ModelCost m;
  m.label = std::move(label);
  m.type = std::string(mix.name);
  m.matmul_type = std::string(type_name(mix.base));
  m.config = config;
  m.kv_type = kv_type;
  CostBuilder b(m);
  for (const auto& spec : expected_tensors(config)) {
    if (spec.role == TensorRole::Output && config.tied_output) continue;
    if (spec.role == TensorRole::RopeFreqs && !config.has_rope_freqs) continue;
    const GgmlType type = tensor_type_for(mix, spec, config.n_layer, config.tied_output);
    int64_t rows = 1;
    for (size_t d = 1; d < spec.ne.size(); ++d) rows *= spec.ne[d];
    b.add(spec.name, spec.ne, type, row_size(type, spec.ne[0]) * static_cast<uint64_t>(rows));
  }
  b.finish();
  return m;
}

std::vector<ShapePreset> shape_presets() { return make_presets(); }

ShapePreset shape_preset(std::string_view name) {
  std::string lower(name);
  for (auto& ch : lower) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  for (auto& p : make_presets()) {
    if (p.name == lower) return p;
  }
  fail("unknown model shape '{}' (valid: {})", name, shape_preset_names());
}

std::string shape_preset_names() {
  std::string out;
  for (const auto& p : make_presets()) out.append(out.empty() ? "" : ", ").append(std::string(p.name));
  return out;
}

}  // namespace tessera::plan
