// Generates each tensor row by row from a counter-based seed (independent of thread count and order), quantizes
// it and streams it into the GGUF writer, so multi-GB models need only a few MB of memory.
#include "model/synthetic_model.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <thread>
#include <vector>

#include "gguf/gguf_writer.h"
#include "model/builtin_vocab.h"
#include "model/quant_mix.h"
#include "model/tensor_layout.h"
#include "tensor/quant.h"
#include "util/error.h"
#include "util/log.h"

namespace tessera {
namespace {

uint64_t splitmix64(uint64_t& state) {
  uint64_t z = (state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

uint64_t hash_name(const std::string& s) {
  uint64_t h = 1469598103934665603ull;  // FNV-1a: stable across platforms, unlike std::hash
  for (unsigned char ch : s) h = (h ^ ch) * 1099511628211ull;
  return h;
}

// Standard normal draws (Box-Muller) from a splitmix64 stream.
class NormalStream {
 public:
  explicit NormalStream(uint64_t seed) : state_(seed) {}
  float next() {
    if (has_spare_) {
      has_spare_ = false;
      return spare_;
    }
    const double u1 = (static_cast<double>(splitmix64(state_) >> 11) + 1.0) * 0x1p-53;
    const double u2 = static_cast<double>(splitmix64(state_) >> 11) * 0x1p-53;
    const double r = std::sqrt(-2.0 * std::log(u1));
    spare_ = static_cast<float>(r * std::sin(2.0 * M_PI * u2));
    has_spare_ = true;
    return static_cast<float>(r * std::cos(2.0 * M_PI * u2));
  }
  float uniform(float lo, float hi) {
    return lo + (hi - lo) * static_cast<float>(static_cast<double>(splitmix64(state_) >> 11) * 0x1p-53);
  }

 private:
  uint64_t state_;
  float spare_ = 0.0f;
  bool has_spare_ = false;
};

// Gemma's weights as the fixtures draw them (README_gemma.md, section 2), so that random models give varied,
// non-degenerate outputs: Gemma scales the input embedding by sqrt(n_embd) and reuses it as the output head, so with
// unit-scale residual norms the embedding would dominate the stream and every position would predict its own token.
// Returns false for the roles that take the common rules.
bool fill_gemma_row(const TensorSpec& spec, const ModelConfig& c, NormalStream& rng, std::vector<float>& out) {
  const auto n = static_cast<float>(spec.ne[0]);
  auto norm = [&](float scale) {
    for (auto& v : out) v = scale * (1.0f + 0.05f * rng.next());
  };
  switch (spec.role) {
    case TensorRole::PostAttnNorm:  // the norms whose output is added to the residual stream
    case TensorRole::PostFfnNorm:
    case TensorRole::PleNorm:
      norm(8.0f);
      return true;
    case TensorRole::AttnQNorm:
    case TensorRole::AttnKNorm:
      // Gemma 4 has no 1/sqrt(head_dim) on q.k: q and k norms of ~1 would make the attention nearly one-hot.
      norm(c.arch == Arch::Gemma4 ? 1.0f / std::sqrt(std::sqrt(n)) : 1.0f);
      return true;
    case TensorRole::PerLayerProjNorm:
    case TensorRole::PostFfnNorm1:
    case TensorRole::PreFfnNorm2:
    case TensorRole::PostFfnNorm2:
      norm(1.0f);
      return true;
    case TensorRole::FfnGateInpScale:  // the router reads rms(x) / sqrt(n_embd) times this
      norm(std::sqrt(n));
      return true;
    case TensorRole::LayerOutScale:
      for (auto& v : out) v = rng.uniform(0.6f, 1.4f);
      return true;
    case TensorRole::FfnDownExpsScale:
      for (auto& v : out) v = rng.uniform(0.5f, 1.5f);
      return true;
    case TensorRole::RopeFreqs: {
      // Partial rotary factor 0.25 as Gemma 4's converter writes it: the first quarter of the pairs rotate, the
      // rest are divided by 1e30 (not rotated).
      const auto rotated = static_cast<size_t>(spec.ne[0] / 4);
      for (size_t i = 0; i < out.size(); ++i) out[i] = i < rotated ? 1.0f : 1e30f;
      return true;
    }
    case TensorRole::PerLayerTokEmbd: {
      const float scale = 1.0f / std::sqrt(static_cast<float>(c.n_embd_per_layer));
      for (auto& v : out) v = scale * rng.next();
      return true;
    }
    case TensorRole::TokenEmbd: {  // N(0, 1/n_embd): the input is scaled up by sqrt(n_embd)
      const float scale = 1.0f / std::sqrt(n);
      for (auto& v : out) v = scale * rng.next();
      return true;
    }
    default:
      return false;
  }
}

// Realistic scales: matrices N(0, 1/fan_in) keep activations O(1); norms near 1; small biases.
void fill_row(const TensorSpec& spec, const ModelConfig& c, uint64_t seed, int64_t row, std::vector<float>& out) {
  NormalStream rng(seed ^ hash_name(spec.name) ^ (static_cast<uint64_t>(row) * 0xd1b54a32d192ed03ull));
  const int64_t n = spec.ne[0];
  out.resize(static_cast<size_t>(n));
  if (arch_info(c.arch).gemma && fill_gemma_row(spec, c, rng, out)) return;
  switch (spec.role) {
    case TensorRole::AttnNorm:
    case TensorRole::FfnNorm:
    case TensorRole::OutputNorm:
    case TensorRole::AttnQNorm:
    case TensorRole::AttnKNorm:
      for (auto& v : out) v = 1.0f + 0.05f * rng.next();
      break;
    case TensorRole::AttnQBias:
    case TensorRole::AttnKBias:
    case TensorRole::AttnVBias:
      for (auto& v : out) v = 0.1f * rng.next();
      break;
    case TensorRole::RopeFreqs:
      for (auto& v : out) v = 1.0f;
      break;
    case TensorRole::TokenEmbd:
      for (auto& v : out) v = rng.next();
      break;
    default: {
      const float scale = 1.0f / std::sqrt(static_cast<float>(n));
      for (auto& v : out) v = scale * rng.next();
      break;
    }
  }
}

ModelConfig dense_preset(int64_t n_embd, int64_t n_layer, int64_t n_head, int64_t n_head_kv, int64_t head_dim,
                         int64_t n_ff, int64_t n_vocab, int64_t n_ctx) {
  ModelConfig c;
  c.n_embd = n_embd;
  c.n_layer = n_layer;
  c.n_head = n_head;
  c.n_head_kv = n_head_kv;
  c.head_dim = head_dim;
  c.head_dim_v = head_dim;
  c.n_rot = head_dim;
  c.n_ff = n_ff;
  c.n_vocab = n_vocab;
  c.n_ctx_train = n_ctx;
  return c;
}

// Gemma 4's layer layout: `period` - 1 sliding layers then a global one, repeated; KV head counts per type; the last
// `shared` layers reuse the K/V of the last sliding and global layers before them; FFNs twice as wide there when
// `wide_shared_ff` (Gemma 4 E2B/E4B).
struct Gemma4Layout {
  int64_t period = 6;
  int64_t kv_swa = 1;
  int64_t kv_global = 1;
  int64_t shared = 0;
  int64_t n_ff = 0;  // the FFN size of a layer with K/V of its own
  bool wide_shared_ff = false;
};

void apply_gemma4_layout(ModelConfig& c, const Gemma4Layout& g) {
  const auto n = static_cast<size_t>(c.n_layer);
  c.swa_layers.assign(n, false);
  c.n_head_kv_layers.assign(n, 0);
  for (size_t il = 0; il < n; ++il) {
    c.swa_layers[il] = static_cast<int64_t>(il) % g.period != g.period - 1;
    c.n_head_kv_layers[il] = c.swa_layers[il] ? g.kv_swa : g.kv_global;
  }
  c.n_head_kv = *std::max_element(c.n_head_kv_layers.begin(), c.n_head_kv_layers.end());
  // llama.cpp needs the layer before the first shared one global and the one before that sliding (the layers the
  // shared ones read): the nearest such start to the requested one, else no sharing.
  c.shared_kv_layers = 0;
  if (g.shared > 0) {
    const int64_t want = c.n_layer - g.shared;
    auto fits = [&](int64_t start) {
      return start >= 2 && start < c.n_layer && !c.swa_layers[static_cast<size_t>(start - 1)] &&
             c.swa_layers[static_cast<size_t>(start - 2)];
    };
    for (int64_t d = 0; d < c.n_layer && c.shared_kv_layers == 0; ++d) {
      if (fits(want + d)) {
        c.shared_kv_layers = c.n_layer - (want + d);
      } else if (fits(want - d)) {
        c.shared_kv_layers = c.n_layer - (want - d);
      }
    }
  }
  c.n_ff_layers.clear();
  c.n_ff = g.n_ff;
  if (c.n_expert == 0) {  // the fixtures' key types: a dense file has one size per layer, an MoE file a scalar
    for (int64_t il = 0; il < c.n_layer; ++il)
      c.n_ff_layers.push_back(g.wide_shared_ff && il >= c.kv_share_start() ? 2 * g.n_ff : g.n_ff);
    c.n_ff = *std::max_element(c.n_ff_layers.begin(), c.n_ff_layers.end());
  }
  bool any_global = false;
  for (bool swa : c.swa_layers) any_global = any_global || !swa;
  c.has_rope_freqs = any_global;  // the global layers' proportional RoPE (rope_freqs.weight)
}

Gemma4Layout gemma4_layout_of(const ModelConfig& c) {
  Gemma4Layout g;
  const auto first_global = std::find(c.swa_layers.begin(), c.swa_layers.end(), false);
  g.period = first_global - c.swa_layers.begin() + 1;
  g.kv_swa = g.kv_global = c.n_head_kv;
  for (size_t il = 0; il < c.n_head_kv_layers.size() && il < c.swa_layers.size(); ++il)
    (c.swa_layers[il] ? g.kv_swa : g.kv_global) = c.n_head_kv_layers[il];
  g.shared = c.shared_kv_layers;
  g.n_ff = c.n_ff_layers.empty() ? c.n_ff : c.n_ff_layers.front();
  g.wide_shared_ff = !c.n_ff_layers.empty() && c.n_ff_layers.back() > c.n_ff_layers.front();
  return g;
}

// Gemma 3: period-6 pattern (5 sliding layers, then a global one), tied head, rope 1e6 on global layers and 1e4 on
// sliding ones. "tiny" keeps the fixtures' linear rope scaling (factor 8, as Gemma 3 4B and larger have) so the
// files exercise it; "1b" is Gemma 3 1B's shape, its 262144-token vocabulary included.
ModelConfig gemma3_preset(std::string_view preset, bool moe) {
  if (moe) fail("gemma3 has no MoE layers (--moe is for gemma4)");
  ModelConfig c;
  if (preset == "tiny") {
    c = dense_preset(256, 6, 4, 2, 64, 512, 512, 256);
    c.n_swa = 16;
    c.rope_scaling = RopeScaling::Linear;
    c.rope_freq_scale = 1.0f / 8.0f;
  } else if (preset == "1b") {
    c = dense_preset(1152, 26, 4, 1, 256, 6912, 262144, 32768);
    c.n_swa = 512;
  } else if (preset == "moe-small") {
    fail("preset 'moe-small' needs an MoE architecture; gemma3 has none (valid for gemma3: tiny, 1b)");
  } else {
    fail("unknown preset '{}' (valid: {})", preset, preset_names());
  }
  c.swa_period = 6;
  return c;
}

// Gemma 4. Dense presets take the small models' layout (E2B/E4B: per-layer input embeddings, the second half of the
// layers reusing earlier K/V with double-width FFNs, global layers with head size twice the sliding one and
// proportional RoPE); MoE presets take 26B-A4B's (30 layers of 5 sliding + 1 global with a 1024 window, 16 heads
// of 256 (sliding) / 512 (global) with 8 / 2 KV heads, V = K on global layers, 128 experts of which 8 are used with
// an expert FFN of n_embd / 4 beside a dense MLP of 3 n_embd / 4, no per-layer inputs, 262144-token vocabulary).
ModelConfig gemma4_preset(std::string_view preset, bool moe) {
  ModelConfig c;
  Gemma4Layout g;
  if (preset == "tiny" && !moe) {
    // The dense fixture's sizes: sliding and global layers, per-layer inputs, 3 layers reusing layers 1 and 2's K/V.
    c = dense_preset(256, 6, 4, 2, 64, 256, 512, 256);
    c.head_dim_swa = 32;
    c.n_swa = 16;
    c.n_embd_per_layer = 64;
    g = {.period = 3, .kv_swa = 2, .kv_global = 1, .shared = 3, .n_ff = 256, .wide_shared_ff = true};
  } else if (preset == "tiny") {
    // The tiny layout with 26B-A4B's MoE proportions: 16 experts (4 used) of n_embd / 4 beside a dense MLP of
    // 3 n_embd / 4, V = K on global layers, no per-layer inputs or shared K/V (the MoE fixture's features).
    c = dense_preset(256, 6, 4, 2, 64, 192, 512, 256);
    c.head_dim_swa = 32;
    c.n_swa = 16;
    c.n_expert = 16;
    c.n_expert_used = 4;
    c.n_ff_exp = 64;
    c.attn_k_eq_v = true;
    g = {.period = 3, .kv_swa = 2, .kv_global = 1, .shared = 0, .n_ff = 192, .wide_shared_ff = false};
  } else if (preset == "1b" && !moe) {
    // E2B's layout (period 5, one KV head, head sizes 256 / 512, 256-wide per-layer inputs, half the layers
    // sharing K/V) at about 0.7B parameters: 20 layers of 1024, a 32000-token vocabulary (the real one, 262144,
    // would make the per-layer embedding alone 1.3B).
    c = dense_preset(1024, 20, 8, 1, 512, 4096, 32000, 32768);
    c.head_dim_swa = 256;
    c.n_swa = 512;
    c.n_embd_per_layer = 256;
    g = {.period = 5, .kv_swa = 1, .kv_global = 1, .shared = 10, .n_ff = 4096, .wide_shared_ff = true};
  } else if (preset == "1b") {
    fail("gemma4 has no MoE variant of preset '1b' (use --preset moe-small or tiny with --moe)");
  } else if (preset == "moe-small") {
    // 26B-A4B scaled down to 0.75B parameters (480 MiB at q4_k_m): 12 layers of 768 (periods of 5
    // sliding + 1 global), 8 heads of 128 / 256 with 4 / 1 KV heads, 128 experts (8 used) of 192 beside a dense
    // MLP of 576 (like 704 and 2112 in the real model, rows that K-quants cannot block), a 32000-token vocabulary.
    c = dense_preset(768, 12, 8, 4, 256, 576, 32000, 4096);
    c.head_dim_swa = 128;
    c.n_swa = 1024;
    c.n_expert = 128;
    c.n_expert_used = 8;
    c.n_ff_exp = 192;
    c.attn_k_eq_v = true;
    g = {.period = 6, .kv_swa = 4, .kv_global = 1, .shared = 0, .n_ff = 576, .wide_shared_ff = false};
  } else {
    fail("unknown preset '{}' (valid: {})", preset, preset_names());
  }
  c.n_rot_swa = c.head_dim_swa;
  c.final_logit_softcap = 30.0f;
  apply_gemma4_layout(c, g);
  return c;
}

}  // namespace

std::string preset_names() { return "tiny, 1b, moe-small"; }
std::string synthetic_arch_names() { return "llama, qwen2, qwen3, qwen3moe, mixtral, gemma3, gemma4"; }

ModelConfig preset_config(std::string_view preset, std::string_view arch, bool moe) {
  ModelConfig c;
  if (arch == "gemma3" || arch == "gemma4") {
    c = arch == "gemma3" ? gemma3_preset(preset, moe) : gemma4_preset(preset, moe);
    c.arch = arch == "gemma3" ? Arch::Gemma3 : Arch::Gemma4;
    c.arch_name = std::string(arch);
    const bool is_moe = c.n_expert > 0;
    c.name = fmt::format("tessera-synthetic-{}-{}{}", arch, preset, is_moe && preset != "moe-small" ? "-moe" : "");
    c.rope_freq_base = 1000000.0f;
    c.rope_freq_base_swa = 10000.0f;
    c.rms_eps = 1e-6f;
    c.tied_output = true;  // Gemma reuses token_embd as the output head
    return c;
  }
  if (moe) {
    fail("--moe is for gemma4 (qwen3moe and mixtral are always MoE, {} has no MoE layout)", arch);
  }
  if (preset == "tiny") {
    c = dense_preset(256, 2, 4, 2, 64, 512, 512, 256);
  } else if (preset == "1b") {
    c = dense_preset(2048, 22, 32, 4, 64, 5632, 32000, 2048);
  } else if (preset == "moe-small") {
    c = dense_preset(2048, 12, 32, 4, 128, 6144, 32000, 4096);
    c.n_expert = 64;
    c.n_expert_used = 8;
    c.n_ff_exp = 768;
  } else {
    fail("unknown preset '{}' (valid: {})", preset, preset_names());
  }

  const bool mixtral = arch == "mixtral";
  auto parsed = arch_from_name(mixtral ? "llama" : arch);
  if (!parsed) fail("unknown architecture '{}' (valid: {})", arch, synthetic_arch_names());
  c.arch = *parsed;
  c.arch_name = std::string(arch_info(c.arch).name);
  c.name = fmt::format("tessera-synthetic-{}-{}", arch, preset);
  c.rope_freq_base = c.arch == Arch::Llama ? 10000.0f : 1000000.0f;
  c.rms_eps = c.arch == Arch::Llama ? 1e-5f : 1e-6f;

  const bool wants_moe = mixtral || c.arch == Arch::Qwen3Moe;
  if (wants_moe && c.n_expert == 0) {
    // Dense presets become MoE with 8 experts (2 used) of a quarter of the dense FFN, rounded to 256.
    c.n_expert = mixtral ? 4 : 8;
    c.n_expert_used = 2;
    c.n_ff_exp = std::max<int64_t>(256, c.n_ff / 4 / 256 * 256);
  } else if (!wants_moe && c.n_expert > 0) {
    c.n_expert = 0;
    c.n_expert_used = 0;
    c.n_ff_exp = 0;
  }
  return c;
}

void fit_gemma4_layers(ModelConfig& c, const ModelConfig& like, std::optional<int64_t> n_head_kv,
                       std::optional<int64_t> n_ff) {
  Gemma4Layout g = gemma4_layout_of(like);
  if (n_head_kv) {
    g.kv_swa = g.kv_global = *n_head_kv;
  } else {
    g.kv_swa = std::min(g.kv_swa, c.n_head);
    g.kv_global = std::min(g.kv_global, c.n_head);
  }
  if (n_ff) g.n_ff = *n_ff;
  if (like.n_layer > 0) g.shared = (like.shared_kv_layers * c.n_layer + like.n_layer / 2) / like.n_layer;
  apply_gemma4_layout(c, g);
}

uint64_t write_synthetic_model(const SyntheticSpec& spec, const std::filesystem::path& out) {
  ModelConfig config = spec.config;
  const QuantMix mix = quant_mix_from_name(spec.type);
  gguf::GgufWriter writer;
  auto& md = writer.metadata();
  config.to_metadata(md);
  md.set("general.file_type", gguf::Value(mix.file_type));
  if (type_traits(mix.base).quantized) md.set("general.quantization_version", gguf::Value(uint32_t{2}));

  if (spec.vocab_from) {
    const auto src = gguf::GgufFile::open(*spec.vocab_from);
    int64_t n_tokens = -1;
    for (const auto& [key, value] : src.metadata().entries()) {
      if (key.rfind("tokenizer.", 0) != 0) continue;
      md.set(key, value);
      if (key == "tokenizer.ggml.tokens") n_tokens = static_cast<int64_t>(value.to_array(key).size());
    }
    if (n_tokens <= 0) fail("{}: has no tokenizer.ggml.tokens to copy", spec.vocab_from->string());
    config.n_vocab = n_tokens;  // the vocabulary decides the embedding size
    config.to_metadata(md);
  } else {
    write_builtin_vocab(md, config.n_vocab);
  }
  config.validate(out.string());

  const int threads = spec.threads > 0 ? spec.threads : std::max(1u, std::thread::hardware_concurrency());
  const auto tensors = expected_tensors(config);
  for (const auto& t : tensors) {
    if (t.role == TensorRole::Output && config.tied_output) continue;
    const GgmlType type = tensor_type_for(mix, t, config.n_layer, config.tied_output);
    const TensorSpec tspec = t;
    const uint64_t seed = spec.seed;
    writer.add_tensor(t.name, type, t.ne, [tspec, &config, type, seed, threads](std::span<uint8_t> dst) {
      int64_t rows = 1;
      for (size_t d = 1; d < tspec.ne.size(); ++d) rows *= tspec.ne[d];
      const size_t row_bytes = row_size(type, tspec.ne[0]);
      std::atomic<int64_t> next{0};
      auto work = [&] {
        std::vector<float> buf;
        for (int64_t r = next.fetch_add(1); r < rows; r = next.fetch_add(1)) {
          fill_row(tspec, config, seed, r, buf);
          quantize_row(type, buf.data(), dst.data() + static_cast<size_t>(r) * row_bytes, tspec.ne[0]);
        }
      };
      std::vector<std::jthread> pool;
      for (int i = 1; i < std::min<int64_t>(threads, rows); ++i) pool.emplace_back(work);
      work();
    });
  }
  log_info("gen-model: writing {} ({} tensors, {} weights)", out.string(), tensors.size(), mix.name);
  writer.write(out);
  return std::filesystem::file_size(out);
}

}  // namespace tessera
