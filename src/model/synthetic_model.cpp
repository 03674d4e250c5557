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

 private:
  uint64_t state_;
  float spare_ = 0.0f;
  bool has_spare_ = false;
};

// Realistic scales: matrices N(0, 1/fan_in) keep activations O(1); norms near 1; small biases.
void fill_row(const TensorSpec& spec, uint64_t seed, int64_t row, std::vector<float>& out) {
  NormalStream rng(seed ^ hash_name(spec.name) ^ (static_cast<uint64_t>(row) * 0xd1b54a32d192ed03ull));
  const int64_t n = spec.ne[0];
  out.resize(static_cast<size_t>(n));
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

}  // namespace

std::string preset_names() { return "tiny, 1b, moe-small"; }
std::string synthetic_arch_names() { return "llama, qwen2, qwen3, qwen3moe, mixtral"; }

ModelConfig preset_config(std::string_view preset, std::string_view arch) {
  ModelConfig c;
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
    const GgmlType type = tensor_type_for(mix, t, config.n_layer);
    const TensorSpec tspec = t;
    const uint64_t seed = spec.seed;
    writer.add_tensor(t.name, type, t.ne, [tspec, type, seed, threads](std::span<uint8_t> dst) {
      int64_t rows = 1;
      for (size_t d = 1; d < tspec.ne.size(); ++d) rows *= tspec.ne[d];
      const size_t row_bytes = row_size(type, tspec.ne[0]);
      std::atomic<int64_t> next{0};
      auto work = [&] {
        std::vector<float> buf;
        for (int64_t r = next.fetch_add(1); r < rows; r = next.fetch_add(1)) {
          fill_row(tspec, seed, r, buf);
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
