// The generation loop of one sequence: evaluate the prompt in batches, then sample, stream and stop.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "engine/executor.h"
#include "engine/sampler.h"
#include "tokenizer/tokenizer.h"

namespace tessera {

struct GenerationParams {
  int32_t n_predict = -1;         // tokens to generate; -1: until end of generation or the context is full
  int64_t n_batch = 512;          // prompt tokens evaluated per forward pass
  std::vector<std::string> stop;  // stop strings (not included in the output)
  bool ignore_eos = false;
  bool all_logits = false;  // report the logits of every evaluated position (on_logits)
};

enum class StopReason { EndOfGeneration, Length, StopString, ContextFull };
std::string_view stop_reason_name(StopReason r);

struct GenerationResult {
  std::vector<TokenId> tokens;  // generated ids (a stop string's tokens included)
  std::string text;             // the streamed text
  StopReason reason = StopReason::Length;
  int64_t n_prompt = 0;
  double prompt_seconds = 0;
  double gen_seconds = 0;  // from the first sampled token to the end
};

struct GenerationCallbacks {
  std::function<void(std::string_view)> on_text;          // printable text as it is produced
  std::function<void(std::span<const float>)> on_logits;  // each evaluated position (all_logits)
};

class Generator {
 public:
  Generator(Executor& executor, const Tokenizer& tokenizer, int64_t seq = 0);

  // Appends `prompt` to the sequence (whose cache may already hold earlier tokens) and generates.
  // strip_leading_space: drop one leading space of the first piece (SPM text that starts the output).
  GenerationResult generate(std::span<const TokenId> prompt, Sampler& sampler, const GenerationParams& params,
                            const GenerationCallbacks& callbacks, bool strip_leading_space = false);

 private:
  // Appends tokens to the sequence; with a sampler, returns the token it picks after the last one (else -1).
  TokenId evaluate(std::span<const TokenId> tokens, Sampler* sampler, bool all_logits,
                   const GenerationCallbacks& callbacks);

  Executor& executor_;
  const Tokenizer& tokenizer_;
  int64_t seq_;
  Batch batch_;
  std::vector<float> logits_;
  std::vector<SampledToken> sampled_;
};

}  // namespace tessera
