// StageSampler: a small cache of Samplers keyed by sequence. A cached one is reused when its parameters match the
// request (its random stream then only moves forward); the penalty window is always replaced by the request's.
#include "cluster/stage_sampler.h"

#include <algorithm>
#include <map>

#include "engine/local_executor.h"
#include "grammar/constraint.h"
#include "grammar/parser.h"
#include "model/stage.h"
#include "util/error.h"

namespace tessera::cluster {

StageSampler::StageSampler(int32_t n_vocab, size_t max_cached) : n_vocab_(n_vocab), max_cached_(max_cached) {}

SampledToken StageSampler::sample(const StageSample& request, std::span<const float> logits) {
  if (request.state.params.seed == SamplerParams::kRandomSeed) {
    fail("sequence {}: the sampler's seed must be resolved by the head", request.seq);
  }
  auto it = std::find_if(cache_.begin(), cache_.end(), [&](const Entry& e) { return e.seq == request.seq; });
  if (it != cache_.end() && !(it->sampler->params() == request.state.params)) {
    cache_.erase(it);
    it = cache_.end();
  }
  if (it == cache_.end()) {
    if (cache_.size() >= max_cached_) {
      cache_.erase(std::min_element(cache_.begin(), cache_.end(),
                                    [](const Entry& a, const Entry& b) { return a.last_use < b.last_use; }));
    }
    cache_.push_back({request.seq, std::make_unique<Sampler>(request.state.params, n_vocab_), 0});
    it = cache_.end() - 1;
  }
  it->last_use = ++clock_;
  Sampler& s = *it->sampler;
  s.restore(request.state.draws, request.state.history);
  restore_grammar(s, request.state);
  if (request.top_logprobs >= 0) return s.sample_with_logprobs(logits, request.top_logprobs);
  return SampledToken{s.sample(logits), 0.0f, {}};
}

void StageSampler::restore_grammar(Sampler& s, const SamplerState& state) {
  if (state.grammar.empty()) {
    if (s.grammar() != nullptr) s.set_grammar({}, nullptr);
    return;
  }
  const auto* c = s.grammar();
  const auto& tokens = state.grammar_tokens;
  // The cached matcher is reused when it is this grammar's and has accepted a prefix of the tokens sent: the usual
  // case, one more token per step.
  if (c != nullptr && s.grammar_text() == state.grammar && c->accepted().size() <= tokens.size() &&
      std::equal(c->accepted().begin(), c->accepted().end(), tokens.begin())) {
    for (size_t i = c->accepted().size(); i < tokens.size(); ++i) s.grammar()->accept(tokens[i]);
    return;
  }
  if (!trie_) {
    if (!trie_source_) fail("this stage cannot sample under a grammar (it has no vocabulary)");
    trie_ = trie_source_();
  }
  auto g = std::find_if(grammars_.begin(), grammars_.end(), [&](const auto& e) { return e.first == state.grammar; });
  if (g == grammars_.end()) {
    if (grammars_.size() >= max_cached_) grammars_.erase(grammars_.begin());
    grammars_.emplace_back(state.grammar, std::make_shared<grammar::Grammar>(grammar::parse_grammar(state.grammar)));
    g = grammars_.end() - 1;
  }
  auto constraint = std::make_shared<grammar::TokenConstraint>(g->second, trie_);
  for (int32_t t : tokens) constraint->accept(t);
  s.set_grammar(state.grammar, std::move(constraint));
}

void StageSampler::sample_outputs(const Batch& batch, std::span<const StageSample> requests, std::vector<float>& logits,
                                  std::vector<SampledToken>& sampled) {
  sampled.clear();
  if (requests.empty()) return;
  std::map<int32_t, size_t> request_of;
  for (size_t i = 0; i < requests.size(); ++i) {
    if (!request_of.emplace(requests[i].seq, i).second) fail("sequence {} has two sampling requests", requests[i].seq);
  }
  const auto n_vocab = static_cast<size_t>(n_vocab_);
  if (logits.size() != static_cast<size_t>(batch.n_outputs()) * n_vocab) {
    fail("{} logits for {} output tokens of {} entries", logits.size(), batch.n_outputs(), n_vocab);
  }
  std::vector<int> outputs_of(requests.size(), 0);
  size_t row = 0;
  size_t kept = 0;
  for (int64_t t = 0; t < batch.size(); ++t) {
    const auto tt = static_cast<size_t>(t);
    if (!batch.want_logits[tt]) continue;
    const float* src = logits.data() + row * n_vocab;
    ++row;
    const auto found = request_of.find(batch.seq[tt]);
    if (found == request_of.end()) {
      // Compacts in place: a kept row only moves to an earlier, already consumed row.
      if (kept + 1 != row) std::copy_n(src, n_vocab, logits.data() + kept * n_vocab);
      ++kept;
      continue;
    }
    if (++outputs_of[found->second] > 1) {
      fail("sequence {} has several output tokens in the batch; sampling takes one", batch.seq[tt]);
    }
    sampled.push_back(sample(requests[found->second], std::span<const float>(src, n_vocab)));
  }
  for (size_t i = 0; i < requests.size(); ++i) {
    if (outputs_of[i] == 0) fail("sequence {} has a sampling request but no output token", requests[i].seq);
  }
  logits.resize(kept * n_vocab);
}

void forward_and_sample(LocalExecutor& stage, const Batch& batch, const float* hidden,
                        std::span<const StageSample> requests, StageSampler& sampler, StageOutput& out,
                        std::vector<SampledToken>& sampled) {
  const bool last = stage.stage().is_last();
  if (!requests.empty() && !last) fail("sampling asked of a stage without the output head");
  stage.forward_stage(batch, hidden, out);
  sampled.clear();
  if (last) sampler.sample_outputs(batch, requests, out.logits, sampled);
}

}  // namespace tessera::cluster
