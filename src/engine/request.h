// One generation request as the scheduler sees it (prompt tokens, sampling, limits), what it reports while it
// runs (text deltas, optional logprobs) and when it ends, and the handle its submitter cancels it through.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "engine/sampler.h"
#include "grammar/grammar.h"
#include "tokenizer/vocab.h"

namespace tessera {

struct SequenceRequest {
  std::vector<TokenId> prompt;  // at least one token; must fit the executor's context
  SamplerParams sampler;
  int32_t max_tokens = -1;        // -1: until end of generation or a full context
  std::vector<std::string> stop;  // stop strings, not included in the output
  bool ignore_eos = false;
  int32_t logprobs = -1;  // -1: none; n >= 0: the chosen token's logprob and the n most likely alternatives
  // Drop one leading space of the first piece (SPM output that starts the text), as `tessera run` does.
  bool strip_leading_space = false;
  // Write control tokens' text into the output (tool-call and reasoning markers such as [TOOL_CALLS] or
  // <|channel|>, which the server's output parser reads).
  bool render_special = false;
  // Grammar-constrained output (docs/structured-output.md): the grammar's text form, "" for none, and its compiled
  // form (compiled at submit when left empty).
  std::string grammar;
  std::shared_ptr<const grammar::Grammar> compiled_grammar;
};

enum class FinishReason { EndOfGeneration, StopString, Length, ContextFull, Cancelled, Error };
std::string_view finish_reason_name(FinishReason r);

// What one step released for one sequence: a sampled token (token >= 0; logprobs filled when asked) and the
// text that became certain (possibly empty: an unfinished UTF-8 character or a possible stop string is held
// back). The final flush of held-back text comes with token = -1.
struct SequenceDelta {
  TokenId token = -1;
  std::string text;
  std::optional<SampledToken> logprobs;
};

struct SequenceResult {
  FinishReason reason = FinishReason::Length;
  std::string error;            // the message when reason == Error
  std::vector<TokenId> tokens;  // generated ids (an end-of-generation or stop-string token included)
  std::string text;             // everything the deltas carried
  int64_t n_prompt = 0;
  double queue_seconds = 0;        // submit until a slot was free
  double first_token_seconds = 0;  // submit until the first sampled token (0 when none was sampled)
  double total_seconds = 0;        // submit until the end
};

// Called on the scheduler's thread: keep them short (hand the data to another thread) and never call back into
// the scheduler. on_done is called exactly once for every accepted request, whatever ends it.
struct SequenceCallbacks {
  std::function<void(const SequenceDelta&)> on_delta;
  std::function<void(const SequenceResult&)> on_done;
};

// Shared by the submitter and the scheduler: cancel() ends the request at the scheduler's next step and frees
// its cache slot (on_done then reports Cancelled).
class SequenceHandle {
 public:
  void cancel() { cancelled_.store(true, std::memory_order_relaxed); }
  bool cancelled() const { return cancelled_.load(std::memory_order_relaxed); }

 private:
  std::atomic<bool> cancelled_{false};
};

}  // namespace tessera
