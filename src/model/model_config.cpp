// ModelConfig <-> GGUF metadata, with llama.cpp's defaults for keys that files may omit.
#include "model/model_config.h"

#include <cmath>

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

}  // namespace

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
  c.n_head = k.required("attention.head_count");
  c.n_head_kv = k.optional("attention.head_count_kv", c.n_head);
  c.n_ctx_train = k.optional("context_length", 2048);
  c.n_expert = k.optional("expert_count", 0);
  c.n_expert_used = k.optional("expert_used_count", 0);
  c.n_ff = k.optional("feed_forward_length", 0);
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
}

}  // namespace tessera
