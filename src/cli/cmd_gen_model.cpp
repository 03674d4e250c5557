// `tessera gen-model`: write a GGUF model with seeded random weights (presets or explicit dimensions).
#include <fmt/format.h>

#include <filesystem>
#include <optional>
#include <vector>

#include "cli/commands.h"
#include "cli/table.h"
#include "gguf/gguf_file.h"
#include "gguf/gguf_split.h"
#include "model/synthetic_model.h"
#include "util/error.h"
#include "util/log.h"

namespace tessera {
namespace {

struct GenArgs {
  std::string out;
  std::string arch = "llama";
  std::string preset = "tiny";
  std::string type = "f32";
  uint64_t seed = 42;
  std::string vocab_from;
  int threads = 0;
  uint64_t split_count = 0;
  bool moe = false;
  std::optional<int64_t> n_embd, n_layer, n_head, n_head_kv, head_dim, n_ff, n_vocab, n_ctx, n_expert, n_expert_used,
      n_ff_exp;
};

}  // namespace

Command add_gen_model_command(CLI::App& root) {
  auto a = std::make_shared<GenArgs>();
  CLI::App* app = root.add_subcommand("gen-model", "Write a GGUF model with seeded random weights");
  app->add_option("-o,--output", a->out, "Output GGUF file")->required();
  app->add_option("--arch", a->arch, "Architecture: " + synthetic_arch_names())->capture_default_str();
  app->add_option("--preset", a->preset, "Dimensions: " + preset_names())->capture_default_str();
  app->add_flag("--moe", a->moe,
                "gemma4: the MoE layout (26B-A4B's: experts beside a dense MLP, V = K on global layers); "
                "moe-small is MoE by itself");
  app->add_option("--type", a->type, "Weight type: f32, f16, bf16, q8_0, q4_0, q4_k_m, ...")->capture_default_str();
  app->add_option("--seed", a->seed, "Random seed")->capture_default_str();
  app->add_option("--vocab-from", a->vocab_from, "Copy the tokenizer from this GGUF (sets the vocab size)");
  app->add_option("--split-count", a->split_count,
                  "Write a split set of this many files, OUTPUT-00001-of-0000N.gguf ... (llama.cpp's gguf-split "
                  "layout; OUTPUT without its .gguf)")
      ->check(CLI::Range(uint64_t{1}, gguf::kMaxSplitCount));
  app->add_option("-t,--threads", a->threads, "Threads (default: all cores)")->check(CLI::Range(0, 1024));
  const auto dim = CLI::Range(int64_t{1}, int64_t{1} << 24);
  app->add_option("--n-embd", a->n_embd, "Embedding size")->check(dim);
  app->add_option("--n-layer", a->n_layer, "Number of layers")->check(CLI::Range(int64_t{1}, int64_t{4096}));
  app->add_option("--n-head", a->n_head, "Attention heads")->check(dim);
  app->add_option("--n-head-kv", a->n_head_kv, "Key/value heads")->check(dim);
  app->add_option("--head-dim", a->head_dim, "Head size (default n_embd / n_head)")->check(dim);
  app->add_option("--n-ff", a->n_ff, "Dense FFN size")->check(dim);
  app->add_option("--n-vocab", a->n_vocab, "Vocabulary size (built-in vocabulary)")->check(dim);
  app->add_option("--ctx", a->n_ctx, "Training context length")->check(dim);
  app->add_option("--n-expert", a->n_expert, "Experts per MoE layer")->check(CLI::Range(int64_t{1}, int64_t{4096}));
  app->add_option("--n-expert-used", a->n_expert_used, "Experts used per token")->check(dim);
  app->add_option("--n-ff-exp", a->n_ff_exp, "Expert FFN size")->check(dim);

  return {app, [a] {
            SyntheticSpec spec;
            spec.config = preset_config(a->preset, a->arch, a->moe);
            ModelConfig& c = spec.config;
            const ModelConfig preset = c;
            const bool gemma = arch_info(c.arch).gemma;
            if (a->n_embd) c.n_embd = *a->n_embd;
            if (a->n_layer) c.n_layer = *a->n_layer;
            if (a->n_head) c.n_head = *a->n_head;
            if (a->n_head_kv) c.n_head_kv = *a->n_head_kv;
            if (a->n_head && !a->n_head_kv) c.n_head_kv = std::min(c.n_head_kv, c.n_head);
            // Gemma's head sizes do not follow n_embd / n_head: only --head-dim changes them (gemma4: the global
            // layers' size, the sliding layers' half of it, as in Gemma 4).
            if (a->head_dim) {
              c.head_dim = *a->head_dim;
              if (c.arch == Arch::Gemma4) c.head_dim_swa = c.n_rot_swa = std::max<int64_t>(2, c.head_dim / 4 * 2);
            } else if ((a->n_embd || a->n_head) && !gemma) {
              c.head_dim = c.n_embd / c.n_head;
            }
            c.head_dim_v = c.head_dim;
            c.n_rot = c.head_dim;
            if (a->n_ff) c.n_ff = *a->n_ff;
            if (a->n_vocab) c.n_vocab = *a->n_vocab;
            if (a->n_ctx) c.n_ctx_train = *a->n_ctx;
            if (a->n_expert) c.n_expert = *a->n_expert;
            if (a->n_expert_used) c.n_expert_used = *a->n_expert_used;
            if (a->n_ff_exp) c.n_ff_exp = *a->n_ff_exp;
            if (c.arch == Arch::Gemma3 && c.n_expert > 0)
              fail("gemma3 has no MoE layers (--n-expert is for MoE archs)");
            if (c.arch == Arch::Gemma4) fit_gemma4_layers(c, preset, a->n_head_kv, a->n_ff);
            if (c.n_expert > 0 && c.n_expert_used > c.n_expert) {
              fail("--n-expert-used {} exceeds --n-expert {}", c.n_expert_used, c.n_expert);
            }
            if (c.head_dim <= 0) fail("head size must be positive (n_embd {} / n_head {})", c.n_embd, c.n_head);
            c.validate("gen-model");
            spec.type = a->type;
            spec.seed = a->seed;
            spec.threads = a->threads;
            if (!a->vocab_from.empty()) spec.vocab_from = a->vocab_from;
            if (a->split_count == 0) {
              const uint64_t bytes = write_synthetic_model(spec, a->out);
              log_info("gen-model: wrote {} ({})", a->out, human_bytes(bytes));
              return 0;
            }
            // The whole model first, then its parts beside it; the whole file is removed afterwards.
            std::filesystem::path prefix = a->out;
            if (prefix.extension() == ".gguf") prefix.replace_extension();
            std::filesystem::path whole = prefix;
            whole += ".unsplit.tmp";
            write_synthetic_model(spec, whole);
            std::vector<std::filesystem::path> parts;
            try {
              const auto file = gguf::GgufFile::open(whole);
              parts = gguf::write_split(file, prefix, a->split_count, file.alignment());
            } catch (...) {
              std::filesystem::remove(whole);
              throw;
            }
            std::filesystem::remove(whole);
            log_info("gen-model: wrote {} files, {} ... {}", parts.size(), parts.front().string(),
                     parts.back().filename().string());
            return 0;
          }};
}

}  // namespace tessera
