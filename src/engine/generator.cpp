// Generator: prompt in n_batch chunks (only the last position has an output unless all logits are asked for), then
// one token per step until end of generation, n_predict, a stop string or a full context. Tokens are sampled by
// the executor (decode_sampled) unless the caller wants the logits themselves.
#include "engine/generator.h"

#include "engine/stop_strings.h"
#include "util/error.h"

namespace tessera {

std::string_view stop_reason_name(StopReason r) {
  switch (r) {
    case StopReason::EndOfGeneration:
      return "end of generation";
    case StopReason::Length:
      return "token limit";
    case StopReason::StopString:
      return "stop string";
    case StopReason::ContextFull:
      return "context full";
  }
  return "";
}

Generator::Generator(Executor& executor, const Tokenizer& tokenizer, int64_t seq)
    : executor_(executor), tokenizer_(tokenizer), seq_(seq) {}

TokenId Generator::evaluate(std::span<const TokenId> tokens, Sampler* sampler, bool all_logits,
                            const GenerationCallbacks& callbacks) {
  const int64_t n_vocab = executor_.config().n_vocab;
  int64_t pos = executor_.sequence_length(seq_);
  batch_.clear();
  for (size_t i = 0; i < tokens.size(); ++i) {
    const bool last = i + 1 == tokens.size();
    batch_.add(tokens[i], static_cast<int32_t>(seq_), static_cast<int32_t>(pos++), all_logits || (last && sampler));
  }
  if (!all_logits) {
    if (!sampler) {
      executor_.decode(batch_, logits_);
      return -1;
    }
    // Sampled where the output head is: with a pipeline only the token id comes back, not a row of logits.
    const SampleRequest request{sampler, -1};
    executor_.decode_sampled(batch_, std::span<const SampleRequest>(&request, 1), sampled_);
    return sampled_.at(0).token;
  }
  executor_.decode(batch_, logits_);
  if (callbacks.on_logits) {
    for (size_t i = 0; i < tokens.size(); ++i) {
      callbacks.on_logits(std::span<const float>(logits_.data() + i * static_cast<size_t>(n_vocab), n_vocab));
    }
  }
  if (!sampler) return -1;
  return sampler->sample(std::span<const float>(logits_.data() + logits_.size() - n_vocab, n_vocab));
}

GenerationResult Generator::generate(std::span<const TokenId> prompt, Sampler& sampler, const GenerationParams& params,
                                     const GenerationCallbacks& callbacks, bool strip_leading_space) {
  using Clock = std::chrono::steady_clock;
  if (prompt.empty()) fail("the prompt is empty: nothing to continue from (a BOS token at least is needed)");
  if (params.n_batch <= 0) fail("the batch size must be positive, got {}", params.n_batch);
  const int64_t n_ctx = executor_.n_ctx();
  const int64_t start = executor_.sequence_length(seq_);
  if (start + static_cast<int64_t>(prompt.size()) > n_ctx) {
    fail("the prompt of {} tokens does not fit the context of {} tokens{} (raise -c)", prompt.size(), n_ctx,
         start > 0 ? fmt::format(" after the {} already used", start) : "");
  }
  GenerationResult result;
  result.n_prompt = static_cast<int64_t>(prompt.size());
  for (TokenId t : prompt) sampler.accept(t, false);

  const auto t0 = Clock::now();
  // Only the last prompt chunk has an output: its position gives the first generated token.
  TokenId pending = -1;
  for (size_t i = 0; i < prompt.size(); i += static_cast<size_t>(params.n_batch)) {
    const size_t n = std::min(prompt.size() - i, static_cast<size_t>(params.n_batch));
    const bool last = i + n == prompt.size();
    pending = evaluate(prompt.subspan(i, n), last && params.n_predict != 0 ? &sampler : nullptr, params.all_logits,
                       callbacks);
  }
  const auto t1 = Clock::now();
  result.prompt_seconds = std::chrono::duration<double>(t1 - t0).count();

  StreamDecoder decoder(tokenizer_);
  StopStringFilter filter(params.stop);
  auto emit = [&](std::string text) {
    if (strip_leading_space && result.text.empty() && !text.empty()) {
      if (text.front() == ' ') text.erase(0, 1);
      strip_leading_space = false;
    }
    if (text.empty()) return;
    result.text += text;
    if (callbacks.on_text) callbacks.on_text(text);
  };

  result.reason = StopReason::Length;
  for (int64_t i = 0; params.n_predict < 0 || i < params.n_predict; ++i) {
    const TokenId token = pending;
    sampler.accept(token);
    result.tokens.push_back(token);
    if (!params.ignore_eos && tokenizer_.is_eog(token)) {
      result.reason = StopReason::EndOfGeneration;
      break;
    }
    emit(filter.push(decoder.push(token)));
    if (filter.stopped()) {
      result.reason = StopReason::StopString;
      break;
    }
    if (params.n_predict >= 0 && i + 1 == params.n_predict) break;
    if (executor_.sequence_length(seq_) >= n_ctx) {
      result.reason = StopReason::ContextFull;
      break;
    }
    const TokenId next[1] = {token};
    pending = evaluate(next, &sampler, params.all_logits, callbacks);
  }
  if (!filter.stopped()) emit(filter.push(decoder.flush()) + filter.flush());
  result.gen_seconds = std::chrono::duration<double>(Clock::now() - t1).count();
  return result;
}

}  // namespace tessera
