// Token sampler: turns one row of logits into the next token with llama.cpp's default chain
// (penalties, top-k, top-p, min-p, temperature, seeded draw), and reports OpenAI-style logprobs.
#pragma once

#include <cstdint>
#include <random>
#include <span>
#include <vector>

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
};

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

class Sampler {
 public:
  // Validates the parameters; n_vocab is the length every logits row must have.
  Sampler(SamplerParams params, int32_t n_vocab);

  // Picks the next token. Does not record it: call accept() with the token actually appended to the sequence.
  int32_t sample(std::span<const float> logits);
  // sample() plus logprobs of the chosen token and the top_n most likely tokens (top_n is clamped to n_vocab).
  SampledToken sample_with_logprobs(std::span<const float> logits, int32_t top_n);

  // Records a token of the sequence (prompt or generated) for the repetition penalties.
  void accept(int32_t token);
  // Forgets the accepted tokens and restarts the random stream from the seed, so a rerun repeats itself.
  void reset();

  // Applies the repeat/frequency/presence penalties for the accepted tokens to logits in place.
  void apply_penalties(std::span<float> logits) const;

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

  // Penalty state: accepted tokens in the window (a ring once full), how often each token occurs in it, and
  // the distinct tokens present (with each one's slot in that list) so a call touches only those.
  std::vector<int32_t> window_;
  size_t window_head_ = 0;  // index of the oldest token once the ring is full
  std::vector<int32_t> counts_;
  std::vector<int32_t> present_;
  std::vector<int32_t> present_slot_;

  // Buffers reused by every call so sampling does not allocate.
  std::vector<float> penalised_;
  std::vector<Candidate> candidates_;
};

}  // namespace tessera
