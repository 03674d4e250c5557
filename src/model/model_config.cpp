// ModelConfig <-> GGUF metadata, with llama.cpp's defaults for keys that files may omit.
#include "model/model_config.h"

#include <algorithm>
#include <cmath>
#include <functional>

#include "util/error.h"

namespace tessera {
namespace {

constexpr int64_t kMaxLayers = 4096;
constexpr int64_t kMaxDim = int64_t{1} << 24;
constexpr int64_t kMaxExperts = 4096;

class KeyReader {
 public:
  KeyReader(const gguf::TensorSource& file, std::string prefix) : file_(file), prefix_(std::move(prefix)) {}

  int64_t required(const std::string& key) const {
    const std::string full = prefix_ + key;
    if (!file_.metadata().contains(full)) fail("{}: metadata key '{}' is missing", file_.name(), full);
    return checked(full);
  }
  int64_t optional(const std::string& key, int64_t fallback) const {
    const std::string full = prefix_ + key;
    return file_.metadata().contains(full) ? checked(full) : fallback;
  }
  float optional_f(const std::string& key, float fallback) const {
    const std::string full = prefix_ + key;
    try {
      auto v = file_.metadata().opt_f64(full);
      return v ? static_cast<float>(*v) : fallback;
    } catch (const Error& e) {
      fail("{}: {}", file_.name(), e.what());
    }
  }
  // A value per layer: a scalar repeated, or an array of exactly n_layer integers.
  std::vector<int64_t> per_layer(const std::string& key, int64_t n_layer, int64_t fallback) const {
    const std::string full = prefix_ + key;
    const gguf::Value* v = file_.metadata().find(full);
    if (v == nullptr) return std::vector<int64_t>(static_cast<size_t>(n_layer), fallback);
    if (v->type() != gguf::ValueType::ARRAY) return std::vector<int64_t>(static_cast<size_t>(n_layer), checked(full));
    const auto& items = v->to_array(full);
    if (static_cast<int64_t>(items.size()) != n_layer) {
      fail("{}: metadata key '{}' has {} values, the model has {} layers", file_.name(), full, items.size(), n_layer);
    }
    std::vector<int64_t> out;
    for (const auto& item : items) {
      uint64_t u = 0;
      try {
        u = item.to_u64(full);
      } catch (const Error& e) {
        fail("{}: {}", file_.name(), e.what());
      }
      if (u > static_cast<uint64_t>(kMaxDim))
        fail("{}: metadata key '{}' holds {}, out of range", file_.name(), full, u);
      out.push_back(static_cast<int64_t>(u));
    }
    return out;
  }
  // gemma4's per-layer flags: an array of n_layer bools (a scalar, as llama.cpp reads it, sets every layer).
  std::vector<bool> flags(const std::string& key, int64_t n_layer) const {
    const std::string full = prefix_ + key;
    const gguf::Value* v = file_.metadata().find(full);
    if (v == nullptr) fail("{}: metadata key '{}' is missing", file_.name(), full);
    try {
      if (v->type() != gguf::ValueType::ARRAY) {
        const bool on = v->type() == gguf::ValueType::BOOL ? v->to_bool(full) : v->to_u64(full) != 0;
        return std::vector<bool>(static_cast<size_t>(n_layer), on);
      }
      const auto& items = v->to_array(full);
      if (static_cast<int64_t>(items.size()) != n_layer) {
        fail("{}: metadata key '{}' has {} values, the model has {} layers", file_.name(), full, items.size(), n_layer);
      }
      std::vector<bool> out;
      for (const auto& item : items)
        out.push_back(item.type() == gguf::ValueType::BOOL ? item.to_bool(full) : item.to_u64(full) != 0);
      return out;
    } catch (const Error& e) {
      if (std::string_view(e.what()).starts_with(file_.name())) throw;
      fail("{}: {}", file_.name(), e.what());
    }
  }
  bool is_array(const std::string& key) const {
    const gguf::Value* v = file_.metadata().find(prefix_ + key);
    return v != nullptr && v->type() == gguf::ValueType::ARRAY;
  }
  std::optional<std::string> optional_s(const std::string& key) const {
    try {
      return file_.metadata().opt_string(prefix_ + key);
    } catch (const Error& e) {
      fail("{}: {}", file_.name(), e.what());
    }
  }

 private:
  int64_t checked(const std::string& full) const {
    const gguf::Value* v = file_.metadata().find(full);
    if (v->type() == gguf::ValueType::ARRAY) {
      fail("{}: metadata key '{}' is an array (per-layer values are not supported)", file_.name(), full);
    }
    uint64_t u;
    try {
      u = v->to_u64(full);
    } catch (const Error& e) {
      fail("{}: {}", file_.name(), e.what());
    }
    if (u > static_cast<uint64_t>(kMaxDim)) fail("{}: metadata key '{}' = {} is out of range", file_.name(), full, u);
    return static_cast<int64_t>(u);
  }

  const gguf::TensorSource& file_;
  std::string prefix_;
};

// The keys of Gemma's sliding-window layers, per-layer inputs and logit soft-capping (README_gemma.md, 4.1-4.2).
void read_gemma_keys(const gguf::TensorSource& file, const KeyReader& k, ModelConfig& c) {
  c.rope_freq_base_swa = k.optional_f("rope.freq_base_swa", 10000.0f);
  c.final_logit_softcap = k.optional_f("final_logit_softcapping", 0.0f);
  if (c.arch == Arch::Gemma3) {
    c.n_swa = k.optional("attention.sliding_window", 0);
    // llama.cpp reads the period as a scalar only; an array leaves its default of 6.
    c.swa_period =
        k.is_array("attention.sliding_window_pattern") ? 6 : k.optional("attention.sliding_window_pattern", 6);
    return;
  }
  c.n_swa = k.required("attention.sliding_window");
  c.swa_layers = k.flags("attention.sliding_window_pattern", c.n_layer);
  c.head_dim_swa = k.required("attention.key_length_swa");
  if (k.required("attention.value_length_swa") != c.head_dim_swa || c.head_dim_v != c.head_dim) {
    fail("{}: gemma4 needs equal key and value head sizes (attention.key_length{{,_swa}} and value_length{{,_swa}})",
         file.name());
  }
  c.n_rot_swa = k.optional("rope.dimension_count_swa", c.n_rot);
  c.shared_kv_layers = k.optional("attention.shared_kv_layers", 0);
  c.n_embd_per_layer = k.required("embedding_length_per_layer_input");
  // Global layers without attn_v take V from K (26B-A4B, 31B): seen on a global layer with K/V of its own that the
  // source holds (a worker's source holds only its stage's layers).
  for (int64_t il = 0; il < c.kv_share_start() && il < c.n_layer; ++il) {
    const std::string blk = "blk." + std::to_string(il) + ".";
    if (c.swa_layers[static_cast<size_t>(il)] || file.find_tensor(blk + "attn_k.weight") == nullptr) continue;
    c.attn_k_eq_v = file.find_tensor(blk + "attn_v.weight") == nullptr;
    break;
  }
}

}  // namespace

LayerShape ModelConfig::layer(int64_t il) const {
  LayerShape l;
  l.n_head = n_head;
  l.n_head_kv = n_head_kv;
  l.head_dim = head_dim;
  l.head_dim_v = head_dim_v;
  l.n_rot = n_rot;
  l.n_ff = n_ff;
  l.n_ff_exp = n_ff_exp;
  l.n_expert = n_expert;
  l.kv_source = il;
  l.rope_base = rope_freq_base;
  l.rope_freq_scale = rope_freq_scale;
  l.rope_factors = has_rope_freqs;
  l.moe = n_expert > 0;
  const auto at = static_cast<size_t>(il);
  if (arch == Arch::Gemma3) {
    const bool swa = n_swa > 0 && swa_period > 0 && (il % swa_period) < swa_period - 1;
    if (swa) {
      l.window = n_swa;
      l.rope_base = rope_freq_base_swa;
      l.rope_freq_scale = 1.0f;  // linear rope scaling is for the global layers only
    }
  } else if (arch == Arch::Gemma4) {
    const bool swa = at < swa_layers.size() && swa_layers[at];
    if (at < n_head_kv_layers.size()) l.n_head_kv = n_head_kv_layers[at];
    if (at < n_ff_layers.size()) l.n_ff = n_ff_layers[at];
    if (swa) {
      l.window = n_swa;
      l.head_dim = l.head_dim_v = head_dim_swa;
      l.n_rot = n_rot_swa;
      l.rope_base = rope_freq_base_swa;
      l.rope_freq_scale = 1.0f;
      l.rope_factors = false;
    }
    l.has_v = swa || !attn_k_eq_v;
    const int64_t start = kv_share_start();
    if (il >= start) l.kv_source = swa ? start - 2 : start - 1;
  }
  return l;
}

float ModelConfig::attention_scale(const LayerShape& l) const {
  if (arch == Arch::Gemma4) return 1.0f;  // q and k are RMS-normalised with weights that carry the scale
  if (arch == Arch::Gemma3 && n_layer == 62) return 1.0f / std::sqrt(static_cast<float>(n_embd / n_head));
  return 1.0f / std::sqrt(static_cast<float>(l.head_dim));
}

std::vector<int64_t> ModelConfig::kv_carried_across(int64_t boundary) const {
  std::vector<int64_t> out;
  for (int64_t il = std::max<int64_t>(boundary, kv_share_start()); il < n_layer; ++il) {
    const int64_t src = layer(il).kv_source;
    if (src < boundary && std::find(out.begin(), out.end(), src) == out.end()) out.push_back(src);
  }
  std::sort(out.begin(), out.end());
  return out;
}

int64_t ModelConfig::boundary_width(int64_t boundary) const {
  int64_t width = n_embd;
  if (boundary > 0 && boundary < n_layer) width += n_embd_per_layer * (n_layer - boundary);
  for (int64_t src : kv_carried_across(boundary)) width += layer(src).n_embd_k() + layer(src).n_embd_v();
  return width;
}

std::string_view rope_scaling_name(RopeScaling s) {
  switch (s) {
    case RopeScaling::None:
      return "none";
    case RopeScaling::Linear:
      return "linear";
    case RopeScaling::Yarn:
      return "yarn";
  }
  return "none";
}

ModelConfig ModelConfig::from_gguf(const gguf::TensorSource& file) {
  const auto& md = file.metadata();
  std::string arch_name;
  try {
    arch_name = md.get_string("general.architecture");
  } catch (const Error& e) {
    fail("{}: {}", file.name(), e.what());
  }
  auto arch = arch_from_name(arch_name);
  if (!arch) fail("{}: unsupported architecture '{}' (supported: {})", file.name(), arch_name, supported_arch_names());

  ModelConfig c;
  c.arch = *arch;
  c.arch_name = arch_name;
  c.name = md.opt_string("general.name").value_or("");
  KeyReader k(file, arch_name + ".");
  c.n_embd = k.required("embedding_length");
  c.n_layer = k.required("block_count");
  const bool gemma4 = c.arch == Arch::Gemma4;
  // Gemma 4 may give head counts and FFN sizes per layer; the scalar fields keep the largest.
  auto largest = [](const std::vector<int64_t>& v) { return v.empty() ? 0 : *std::max_element(v.begin(), v.end()); };
  if (gemma4 && k.is_array("attention.head_count")) {
    const auto heads = k.per_layer("attention.head_count", c.n_layer, 0);
    if (std::adjacent_find(heads.begin(), heads.end(), std::not_equal_to<>()) != heads.end()) {
      fail("{}: per-layer query head counts that differ ({}.attention.head_count) are not supported", file.name(),
           arch_name);
    }
    c.n_head = heads.empty() ? 0 : heads[0];
  } else {
    c.n_head = k.required("attention.head_count");
  }
  if (gemma4 && k.is_array("attention.head_count_kv")) {
    c.n_head_kv_layers = k.per_layer("attention.head_count_kv", c.n_layer, c.n_head);
    c.n_head_kv = largest(c.n_head_kv_layers);
  } else {
    c.n_head_kv = k.optional("attention.head_count_kv", c.n_head);
  }
  c.n_ctx_train = k.optional("context_length", 2048);
  c.n_expert = k.optional("expert_count", 0);
  c.n_expert_used = k.optional("expert_used_count", 0);
  if (gemma4 && k.is_array("feed_forward_length")) {
    c.n_ff_layers = k.per_layer("feed_forward_length", c.n_layer, 0);
    c.n_ff = largest(c.n_ff_layers);
  } else {
    c.n_ff = k.optional("feed_forward_length", 0);
  }
  c.n_ff_exp = k.optional("expert_feed_forward_length", c.n_expert > 0 ? c.n_ff : 0);
  if (c.n_head == 0) fail("{}: metadata key '{}.attention.head_count' must be positive", file.name(), arch_name);
  c.head_dim = k.optional("attention.key_length", c.n_embd / c.n_head);
  c.head_dim_v = k.optional("attention.value_length", c.head_dim);
  c.n_rot = k.optional("rope.dimension_count", c.head_dim);
  c.rope_freq_base = k.optional_f("rope.freq_base", 10000.0f);
  c.rms_eps = k.optional_f("attention.layer_norm_rms_epsilon", 1e-5f);

  if (auto type = k.optional_s("rope.scaling.type")) {
    if (*type == "none") {
      c.rope_scaling = RopeScaling::None;
    } else if (*type == "linear") {
      c.rope_scaling = RopeScaling::Linear;
    } else if (*type == "yarn") {
      c.rope_scaling = RopeScaling::Yarn;
    } else {
      fail("{}: metadata key '{}.rope.scaling.type' = '{}' is not one of none, linear, yarn", file.name(), arch_name,
           *type);
    }
  }
  const float factor = k.optional_f("rope.scaling.factor", k.optional_f("rope.scale_linear", 1.0f));
  if (!(factor > 0.0f) || !std::isfinite(factor)) {
    fail("{}: rope scaling factor {} must be a positive number", file.name(), factor);
  }
  if (factor != 1.0f && c.rope_scaling == RopeScaling::None) c.rope_scaling = RopeScaling::Linear;
  c.rope_freq_scale = 1.0f / factor;
  c.rope_orig_ctx = k.optional("rope.scaling.original_context_length", c.n_ctx_train);

  if (arch_info(c.arch).gemma) read_gemma_keys(file, k, c);

  // The vocab size: explicit key, else the tokenizer's list, else the embedding's row count.
  if (md.contains(arch_name + ".vocab_size")) {
    c.n_vocab = k.required("vocab_size");
  } else if (md.contains("tokenizer.ggml.tokens")) {
    c.n_vocab = static_cast<int64_t>(md.get_array("tokenizer.ggml.tokens").size());
  } else if (const auto* emb = file.find_tensor("token_embd.weight"); emb != nullptr && emb->ne.size() >= 2) {
    c.n_vocab = emb->ne[1];
  }
  c.tied_output = file.find_tensor("output.weight") == nullptr;
  c.has_rope_freqs = file.find_tensor("rope_freqs.weight") != nullptr;
  c.validate(file.name());
  return c;
}

void ModelConfig::validate(const std::string& where) const {
  auto positive = [&](int64_t v, const char* what, int64_t max) {
    if (v <= 0 || v > max) fail("{}: {} = {} must be between 1 and {}", where, what, v, max);
  };
  positive(n_embd, "n_embd (embedding_length)", kMaxDim);
  positive(n_layer, "n_layer (block_count)", kMaxLayers);
  positive(n_head, "n_head (attention.head_count)", 65536);
  positive(n_head_kv, "n_head_kv (attention.head_count_kv)", 65536);
  positive(head_dim, "head_dim (attention.key_length)", 65536);
  positive(head_dim_v, "head_dim_v (attention.value_length)", 65536);
  positive(n_vocab, "n_vocab", kMaxDim);
  positive(n_ctx_train, "context_length", kMaxDim);
  if (n_head % n_head_kv != 0) {
    fail("{}: n_head {} is not a multiple of n_head_kv {} (grouped-query attention needs it)", where, n_head,
         n_head_kv);
  }
  if (n_rot <= 0 || n_rot > head_dim || n_rot % 2 != 0) {
    fail("{}: rope.dimension_count {} must be even and between 2 and head_dim {}", where, n_rot, head_dim);
  }
  if (!(rms_eps > 0.0f) || !std::isfinite(rms_eps)) fail("{}: rms epsilon {} must be positive", where, rms_eps);
  if (!(rope_freq_base > 0.0f) || !std::isfinite(rope_freq_base)) {
    fail("{}: rope.freq_base {} must be positive", where, rope_freq_base);
  }
  if (arch == Arch::Gemma4 || arch == Arch::Gemma3) validate_gemma(where);
  const bool moe_arch = arch_info(arch).moe_only;
  if (moe_arch && n_expert == 0) fail("{}: architecture {} needs expert_count > 0", where, arch_name);
  if (n_expert > 0) {
    positive(n_expert, "expert_count", kMaxExperts);
    positive(n_expert_used, "expert_used_count", n_expert);
    positive(n_ff_exp, "expert_feed_forward_length", kMaxDim);
  } else {
    positive(n_ff, "n_ff (feed_forward_length)", kMaxDim);
  }
}

void ModelConfig::validate_gemma(const std::string& where) const {
  if (n_swa < 0 || n_swa > kMaxDim) fail("{}: attention.sliding_window {} is out of range", where, n_swa);
  if (!(rope_freq_base_swa > 0.0f) || !std::isfinite(rope_freq_base_swa)) {
    fail("{}: rope.freq_base_swa {} must be positive", where, rope_freq_base_swa);
  }
  if (!(final_logit_softcap >= 0.0f) || !std::isfinite(final_logit_softcap)) {
    fail("{}: final_logit_softcapping {} must be a positive number", where, final_logit_softcap);
  }
  if (arch == Arch::Gemma3) {
    if (swa_period < 1 || swa_period > kMaxLayers)
      fail("{}: sliding_window_pattern {} is out of range", where, swa_period);
    return;
  }
  if (static_cast<int64_t>(swa_layers.size()) != n_layer) {
    fail("{}: attention.sliding_window_pattern has {} flags for {} layers", where, swa_layers.size(), n_layer);
  }
  const bool any_swa = std::find(swa_layers.begin(), swa_layers.end(), true) != swa_layers.end();
  if (any_swa && n_swa <= 0) fail("{}: sliding layers need attention.sliding_window > 0", where);
  if (any_swa && (head_dim_swa <= 0 || head_dim_swa > 65536)) {
    fail("{}: attention.key_length_swa {} is out of range", where, head_dim_swa);
  }
  if (shared_kv_layers < 0 || shared_kv_layers > n_layer) {
    fail("{}: attention.shared_kv_layers {} is outside 0..{}", where, shared_kv_layers, n_layer);
  }
  if (shared_kv_layers > 0 && kv_share_start() < 2) {
    fail("{}: attention.shared_kv_layers {} leaves fewer than 2 layers with K/V of their own", where, shared_kv_layers);
  }
  if (n_embd_per_layer < 0 || n_embd_per_layer > kMaxDim) {
    fail("{}: embedding_length_per_layer_input {} is out of range", where, n_embd_per_layer);
  }
  for (int64_t il = 0; il < n_layer; ++il) {
    const LayerShape l = layer(il);
    if (l.n_head_kv <= 0 || l.n_head % l.n_head_kv != 0) {
      fail("{}: layer {}: n_head {} is not a multiple of its {} KV heads", where, il, l.n_head, l.n_head_kv);
    }
    if (l.n_rot <= 0 || l.n_rot > l.head_dim || l.n_rot % 2 != 0) {
      fail("{}: layer {}: rope dimension {} must be even and between 2 and its head size {}", where, il, l.n_rot,
           l.head_dim);
    }
    if (!l.moe && (l.n_ff <= 0 || l.n_ff > kMaxDim))
      fail("{}: layer {}: feed_forward_length {} is out of range", where, il, l.n_ff);
    if (l.kv_source != il) {
      const LayerShape src = layer(l.kv_source);
      if (src.is_swa() != l.is_swa() || src.n_head_kv != l.n_head_kv || src.head_dim != l.head_dim) {
        fail("{}: layer {} reuses layer {}'s K/V, which has another type or shape", where, il, l.kv_source);
      }
    }
  }
}

void ModelConfig::to_metadata(gguf::Metadata& md) const {
  const std::string p = arch_name + ".";
  auto u32 = [](int64_t v) { return gguf::Value(static_cast<uint32_t>(v)); };
  md.set("general.architecture", gguf::Value(arch_name));
  if (!name.empty()) md.set("general.name", gguf::Value(name));
  md.set(p + "vocab_size", u32(n_vocab));
  md.set(p + "context_length", u32(n_ctx_train));
  md.set(p + "embedding_length", u32(n_embd));
  md.set(p + "block_count", u32(n_layer));
  md.set(p + "feed_forward_length", u32(n_ff));
  md.set(p + "attention.head_count", u32(n_head));
  md.set(p + "attention.head_count_kv", u32(n_head_kv));
  md.set(p + "attention.key_length", u32(head_dim));
  md.set(p + "attention.value_length", u32(head_dim_v));
  md.set(p + "rope.dimension_count", u32(n_rot));
  md.set(p + "rope.freq_base", gguf::Value(rope_freq_base));
  md.set(p + "attention.layer_norm_rms_epsilon", gguf::Value(rms_eps));
  if (n_expert > 0) {
    md.set(p + "expert_count", u32(n_expert));
    md.set(p + "expert_used_count", u32(n_expert_used));
    md.set(p + "expert_feed_forward_length", u32(n_ff_exp));
  }
  if (rope_scaling == RopeScaling::Linear) {
    md.set(p + "rope.scaling.type", gguf::Value(std::string("linear")));
    md.set(p + "rope.scaling.factor", gguf::Value(1.0f / rope_freq_scale));
  }
  if (!arch_info(arch).gemma) return;
  md.set(p + "rope.freq_base_swa", gguf::Value(rope_freq_base_swa));
  md.set(p + "attention.sliding_window", u32(n_swa));
  if (final_logit_softcap > 0.0f) md.set(p + "final_logit_softcapping", gguf::Value(final_logit_softcap));
  if (arch == Arch::Gemma3) {
    md.set(p + "attention.sliding_window_pattern", u32(swa_period));
    return;
  }
  auto i32s = [](const std::vector<int64_t>& v) {
    std::vector<gguf::Value> items;
    for (int64_t x : v) items.emplace_back(static_cast<int32_t>(x));
    return gguf::Value::array(gguf::ValueType::INT32, std::move(items));
  };
  if (!n_head_kv_layers.empty()) md.set(p + "attention.head_count_kv", i32s(n_head_kv_layers));
  if (!n_ff_layers.empty()) md.set(p + "feed_forward_length", i32s(n_ff_layers));
  std::vector<gguf::Value> flags;
  for (bool f : swa_layers) flags.emplace_back(f);
  md.set(p + "attention.sliding_window_pattern", gguf::Value::array(gguf::ValueType::BOOL, std::move(flags)));
  md.set(p + "attention.key_length_swa", u32(head_dim_swa));
  md.set(p + "attention.value_length_swa", u32(head_dim_swa));
  md.set(p + "rope.dimension_count_swa", u32(n_rot_swa));
  md.set(p + "attention.shared_kv_layers", u32(shared_kv_layers));
  md.set(p + "embedding_length_per_layer_input", u32(n_embd_per_layer));
}

}  // namespace tessera
