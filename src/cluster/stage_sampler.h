// Sampling on the stage that holds the output head: a Sampler per sequence, rebuilt from the SamplerState that
// every request carries, so the stage keeps nothing the head could not resend and picks what the head would.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "cluster/stage_endpoint.h"
#include "engine/sampler.h"
#include "grammar/grammar.h"
#include "grammar/token_trie.h"
#include "model/batch.h"

namespace tessera {
class LocalExecutor;
struct StageOutput;
}  // namespace tessera

namespace tessera::cluster {

class StageSampler {
 public:
  // Caches at most max_cached samplers (each holds about 16-24 bytes per vocabulary entry: 3 MiB at 128k tokens);
  // the least recently used is dropped and rebuilt on demand (a reseed and the draws skipped again).
  explicit StageSampler(int32_t n_vocab, size_t max_cached = 16);

  // Where the vocabulary's byte trie comes from when a request carries a grammar (called once, on the first one):
  // the stage's tokenizer. Without it a grammar is refused.
  void set_trie_source(std::function<std::shared_ptr<const grammar::TokenTrie>()> source) {
    trie_source_ = std::move(source);
  }

  // Samples one row of logits for the sequence the request names. Throws Error for bad parameters.
  SampledToken sample(const StageSample& request, std::span<const float> logits);

  // The last stage's output: `logits` holds one row per output token of `batch`, in order. Rows of sequences
  // with a request are sampled into `sampled` (batch order) and removed from `logits`; the rest stay, in order.
  // Throws Error when a request names a sequence without exactly one output token in the batch.
  void sample_outputs(const Batch& batch, std::span<const StageSample> requests, std::vector<float>& logits,
                      std::vector<SampledToken>& sampled);

 private:
  struct Entry {
    int32_t seq;
    std::unique_ptr<Sampler> sampler;
    uint64_t last_use;
  };

  // Puts the request's grammar on the sampler, moved on by the tokens it has accepted since the cached state.
  void restore_grammar(Sampler& s, const SamplerState& state);

  int32_t n_vocab_;
  size_t max_cached_;
  uint64_t clock_ = 0;
  std::vector<Entry> cache_;
  std::function<std::shared_ptr<const grammar::TokenTrie>()> trie_source_;
  std::shared_ptr<const grammar::TokenTrie> trie_;
  // Compiled grammars by text, so a request's grammar is parsed once per stage, not once per token.
  std::vector<std::pair<std::string, std::shared_ptr<const grammar::Grammar>>> grammars_;
};

// One step of a stage, the same on a worker and on the head, alone or as rank 0 of a group: the forward pass, then,
// on the stage with the output head, the requested rows sampled (and removed from out.logits, as sample_outputs
// does). Throws Error when sampling is asked of a stage without the output head.
void forward_and_sample(LocalExecutor& stage, const Batch& batch, const float* hidden,
                        std::span<const StageSample> requests, StageSampler& sampler, StageOutput& out,
                        std::vector<SampledToken>& sampled);

}  // namespace tessera::cluster
