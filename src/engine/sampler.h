// Token sampler: turns one row of logits into the next token with llama.cpp's default chain
// (penalties, top-k, top-p, min-p, temperature, seeded draw), and reports OpenAI-style logprobs. Top-p without
// top-k is cut exactly (NucleusCut) and draws in vocabulary order, so the ranks of a tensor-parallel group can make
// the same pick from their shares of the row (sharded_sampling.h).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "engine/nucleus.h"

namespace tessera::grammar {
class TokenConstraint;
}

namespace tessera {

// Flags and defaults mean the same as llama.cpp's (--temp, --top-k, --top-p, --min-p, --repeat-penalty,
// --repeat-last-n, --presence-penalty, --frequency-penalty, --seed).
struct SamplerParams {
  static constexpr uint64_t kRandomSeed = 0xFFFFFFFF;

  float temperature = 0.8f;  // <= 0: greedy
  int32_t top_k = 40;        // <= 0: disabled
  float top_p = 0.95f;       // 1: disabled
  float min_p = 0.05f;       // 0: disabled
  float repeat_penalty = 1.0f;
  // The window of accepted tokens that all three penalties count in (shared, as in llama.cpp; OpenAI counts
  // the whole sequence, which is -1). 0: no penalties.
  int32_t repeat_last_n = 64;
  float presence_penalty = 0.0f;
  float frequency_penalty = 0.0f;
  uint64_t seed = kRandomSeed;  // kRandomSeed: pick one from std::random_device

  // Throws Error naming the first bad field and its valid range.
  void validate() const;
  // True when the candidate set is reduced to the single best token, so no random draw is needed.
  bool greedy() const { return temperature <= 0.0f; }
  // True when the repeat/frequency/presence penalties change any logit.
  bool penalised() const {
    return repeat_last_n != 0 && (repeat_penalty != 1.0f || frequency_penalty != 0.0f || presence_penalty != 0.0f);
  }
  bool operator==(const SamplerParams&) const = default;
};

// How every pick reads a logit: NaN as -inf (never chosen; it would break the orderings) and +inf as the largest
// float (a softmax over it stays finite). Written without branches so a copy vectorises.
inline float sanitize_logit(float logit) {
  const float finite_top = std::min(logit, std::numeric_limits<float>::max());
  return std::isnan(logit) ? -std::numeric_limits<float>::infinity() : finite_top;
}

// A logit after the penalties for a token found `count` times in the window (Sampler::apply_penalties).
inline float penalise_logit(float logit, int32_t count, const SamplerParams& p) {
  // Dividing a negative logit would raise it, so those are multiplied instead (as llama.cpp does).
  logit = logit <= 0.0f ? logit * p.repeat_penalty : logit / p.repeat_penalty;
  return logit - (static_cast<float>(count) * p.frequency_penalty + p.presence_penalty);
}

struct TokenLogprob {
  int32_t token = 0;
  float logprob = 0.0f;
};

// The chosen token plus its log-probability and the most likely alternatives (best first), all from the
// log-softmax of the penalised logits before any truncation or temperature, as OpenAI's `logprobs` reports.
struct SampledToken {
  int32_t token = 0;
  float logprob = 0.0f;
  std::vector<TokenLogprob> top;
};

// Everything a sampler's next pick depends on besides the logits, small enough to send with each request: a
// Sampler restored from it (restore()) picks exactly what the original would. Penalties count only `history`,
// and the random stream is a function of (seed, draws).
struct SamplerState {
  SamplerParams params;          // seed resolved (never kRandomSeed)
  uint64_t draws = 0;            // random numbers drawn since the seed
  std::vector<int32_t> history;  // accepted tokens in the penalty window, oldest first; empty without penalties
  // A grammar constraint: its text form ("" for none) and the generated tokens it has accepted, from which a
  // sampler elsewhere rebuilds the matcher (grammar_sampling.h).
  std::string grammar;
  std::vector<int32_t> grammar_tokens;
};

class Sampler {
 public:
  // Validates the parameters; n_vocab is the length every logits row must have.
  Sampler(SamplerParams params, int32_t n_vocab);

  // Picks the next token. Does not record it: call accept() with the token actually appended to the sequence.
  int32_t sample(std::span<const float> logits);
  // sample() plus logprobs of the chosen token and the top_n most likely tokens (top_n is clamped to n_vocab).
  SampledToken sample_with_logprobs(std::span<const float> logits, int32_t top_n);

  // Records a token of the sequence for the repetition penalties; a generated one also advances the grammar
  // (prompt tokens and a restored history pass generated = false). Throws Error when the grammar forbids it.
  void accept(int32_t token, bool generated = true);

  // Constrains every pick to the tokens `constraint` allows: the others get -inf before any other step. `text` is
  // the grammar's text form, which state() carries to a sampler on another node.
  void set_grammar(std::string text, std::shared_ptr<grammar::TokenConstraint> constraint);
  grammar::TokenConstraint* grammar() const { return constraint_.get(); }
  const std::string& grammar_text() const { return grammar_text_; }
  // Sets the logits of tokens the grammar forbids to -inf (a no-op without one); `first` is the token id of
  // logits[0] when the row is a tensor-parallel rank's slice. Throws Error when the grammar allows no token.
  void mask_grammar(std::span<float> logits, int32_t first = 0) const;
  // Forgets the accepted tokens and restarts the random stream from the seed, so a rerun repeats itself.
  void reset();

  // The state to send to whoever samples for this sequence elsewhere (see SamplerState).
  SamplerState state() const;
  // Puts the random stream after `draws` draws (cheap when moving forward) and replaces the penalty window with
  // `history`; with the parameters of the SamplerState, the next pick then equals the original sampler's.
  void restore(uint64_t draws, std::span<const int32_t> history);
  // Moves the random stream past one sample() made elsewhere from this sampler's state, so the two stay in step.
  void skip_sample();
  uint64_t draws() const { return draws_; }
  // Accepted tokens the penalties count, oldest first (empty when penalties are off).
  std::vector<int32_t> history() const;

  // Applies the repeat/frequency/presence penalties for the accepted tokens to logits in place.
  void apply_penalties(std::span<float> logits) const;
  // The tokens the penalties touch and how often each is in the window (both empty when penalties are off).
  void penalty_counts(std::vector<int32_t>& tokens, std::vector<int32_t>& counts) const;

  // For picks split over the ranks of a tensor-parallel group (sharded_sampling.h), which must consume the random
  // stream as sample() does:
  // The uniform number in [0, 1) that a non-greedy pick draws; the stream moves on by one.
  double next_uniform();
  // sample()'s pick when the top_k best penalised logits (best first, lower id first on ties: what top-k keeps)
  // were found elsewhere: the rest of the chain (top-p, min-p, temperature) and its one draw. Only for
  // 0 < top_k < n_vocab and a temperature above 0.
  int32_t pick_from_top_k(std::span<const float> logits, std::span<const int32_t> tokens);

  const SamplerParams& params() const { return params_; }
  int32_t n_vocab() const { return n_vocab_; }
  // The seed in use: params().seed, or the one drawn when that was kRandomSeed (log it to reproduce a run).
  uint64_t seed() const { return seed_; }

 private:
  struct Candidate {
    float logit;
    float weight;  // exp(logit - max) once a step has needed it
    int32_t token;
  };

  void check_logits(std::span<const float> logits) const;
  int32_t pick();  // samples from penalised_ according to the parameters
  int32_t pick_greedy() const;
  int32_t pick_top_p();  // top-p without top-k (see the .cpp)
  int32_t finish_top_k(size_t k);
  void select_best(size_t k);
  size_t keep_top_p(size_t n_keep);
  size_t keep_min_p(size_t n_keep);
  int32_t draw(size_t n_keep, bool weighted);
  bool penalties_active() const;
  void forget_oldest();

  SamplerParams params_;
  int32_t n_vocab_;
  uint64_t seed_;
  std::mt19937 rng_;
  uint64_t draws_ = 0;  // rng_ outputs used since the seed

  // Penalty state: accepted tokens in the window (a ring once full; every token with repeat_last_n = -1, so the
  // history can be sent), how often each token occurs in it, and
  // the distinct tokens present (with each one's slot in that list) so a call touches only those.
  std::vector<int32_t> window_;
  size_t window_head_ = 0;  // index of the oldest token once the ring is full
  std::vector<int32_t> counts_;
  std::vector<int32_t> present_;
  std::vector<int32_t> present_slot_;

  std::string grammar_text_;
  std::shared_ptr<grammar::TokenConstraint> constraint_;

  // Buffers reused by every call so sampling does not allocate.
  std::vector<float> penalised_;
  std::vector<Candidate> candidates_;
  NucleusCut nucleus_;
};

}  // namespace tessera
