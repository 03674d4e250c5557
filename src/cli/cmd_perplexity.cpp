// `tessera perplexity`: llama.cpp's windowed perplexity. The text is cut into windows of -c tokens (each starting
// with BOS); the second half of each window is scored, so every scored token sees at least c/2 tokens of context.
#include <fmt/format.h>

#include <cmath>
#include <fstream>
#include <iostream>

#include "cli/commands.h"
#include "cli/model_options.h"
#include "util/error.h"
#include "util/log.h"

namespace tessera {
namespace {

struct PerplexityArgs {
  ModelOptions model;
  std::string file;
};

// -log p(target) from one row of logits, in double.
double nll(const float* logits, int64_t n, int32_t target) {
  double max = logits[0];
  for (int64_t i = 1; i < n; ++i) max = std::max(max, static_cast<double>(logits[i]));
  double sum = 0;
  for (int64_t i = 0; i < n; ++i) sum += std::exp(static_cast<double>(logits[i]) - max);
  return -(static_cast<double>(logits[target]) - max - std::log(sum));
}

}  // namespace

Command add_perplexity_command(CLI::App& root) {
  auto a = std::make_shared<PerplexityArgs>();
  a->model.n_ctx = 512;
  CLI::App* app = root.add_subcommand("perplexity", "Perplexity of the model on a text file");
  add_model_options(*app, a->model);
  app->add_option("-f,--file", a->file, "Text file")->required();
  return {app, [a] {
            std::ifstream in(a->file, std::ios::binary);
            if (!in) fail("{}: cannot read", a->file);
            const std::string text{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
            LoadedModel m = load_model(a->model);
            if (m.follower_done) return 0;
            const auto& tok = *m.tokenizer;
            const auto tokens = tok.encode(text, true, false);
            const int64_t n_ctx = m.executor->n_ctx();
            const int64_t n_chunks = static_cast<int64_t>(tokens.size()) / n_ctx;
            if (n_chunks < 1) {
              fail("{}: {} tokens is too short for a context of {} (need at least {}; lower -c)", a->file,
                   tokens.size(), n_ctx, n_ctx);
            }
            const int64_t n_vocab = m.executor->config().n_vocab;
            const int64_t first = n_ctx / 2;
            log_info("perplexity: {} tokens, {} windows of {} tokens, scoring the last {} of each", tokens.size(),
                     n_chunks, n_ctx, n_ctx - 1 - first);
            double sum = 0, sum2 = 0;
            int64_t count = 0;
            std::vector<float> logits, all;
            for (int64_t c = 0; c < n_chunks; ++c) {
              std::vector<int32_t> window(tokens.begin() + c * n_ctx, tokens.begin() + (c + 1) * n_ctx);
              if (tok.add_bos() && tok.bos() >= 0) window[0] = tok.bos();
              m.executor->clear_sequence(0);
              all.clear();
              for (int64_t i = 0; i < n_ctx; i += a->model.n_batch) {
                Batch b;
                const int64_t end = std::min(n_ctx, i + a->model.n_batch);
                for (int64_t j = i; j < end; ++j)
                  b.add(window[static_cast<size_t>(j)], 0, static_cast<int32_t>(j), true);
                m.executor->decode(b, logits);
                all.insert(all.end(), logits.begin(), logits.end());
              }
              for (int64_t j = first; j < n_ctx - 1; ++j) {
                const double v = nll(all.data() + j * n_vocab, n_vocab, window[static_cast<size_t>(j + 1)]);
                sum += v;
                sum2 += v * v;
                ++count;
              }
              std::fprintf(stderr, "[%lld]%.4f,", static_cast<long long>(c + 1),
                           std::exp(sum / static_cast<double>(count)));
              std::fflush(stderr);
            }
            std::fputc('\n', stderr);
            const double mean = sum / static_cast<double>(count);
            const double ppl = std::exp(mean);
            const double var =
                count > 1 ? (sum2 / static_cast<double>(count) - mean * mean) / static_cast<double>(count - 1) : 0.0;
            std::cout << fmt::format("Final estimate: PPL = {:.4f} +/- {:.5f}\n", ppl,
                                     ppl * std::sqrt(std::max(var, 0.0)));
            return 0;
          }};
}

}  // namespace tessera
