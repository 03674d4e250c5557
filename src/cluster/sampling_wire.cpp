// Sampling requests and sampled tokens to and from the wire's messages.
#include "cluster/sampling_wire.h"

#include <algorithm>
#include <map>

#include "util/error.h"

namespace tessera::cluster {

net::SamplingParams to_wire(const StageSample& s) {
  const SamplerParams& p = s.state.params;
  net::SamplingParams w;
  w.seq = s.seq;
  w.temperature = p.temperature;
  w.top_k = p.top_k;
  w.top_p = p.top_p;
  w.min_p = p.min_p;
  w.repeat_penalty = p.repeat_penalty;
  w.repeat_last_n = p.repeat_last_n;
  w.presence_penalty = p.presence_penalty;
  w.frequency_penalty = p.frequency_penalty;
  w.seed = p.seed;
  w.draws = s.state.draws;
  w.history = s.state.history;
  w.logprobs = s.top_logprobs >= 0;
  w.top_logprobs = static_cast<uint16_t>(std::max(s.top_logprobs, 0));
  w.grammar = s.state.grammar;
  w.grammar_tokens = s.state.grammar_tokens;
  return w;
}

StageSample from_wire(const net::SamplingParams& w) {
  StageSample s;
  s.seq = w.seq;
  SamplerParams& p = s.state.params;
  p.temperature = w.temperature;
  p.top_k = w.top_k;
  p.top_p = w.top_p;
  p.min_p = w.min_p;
  p.repeat_penalty = w.repeat_penalty;
  p.repeat_last_n = w.repeat_last_n;
  p.presence_penalty = w.presence_penalty;
  p.frequency_penalty = w.frequency_penalty;
  p.seed = w.seed;
  // A sampler catches up by discarding draws one by one: a count no generation reaches is refused, not run.
  if (w.draws > kMaxSamplerDraws) {
    fail("sampling state of sequence {} claims {} random draws (at most {})", w.seq, w.draws, kMaxSamplerDraws);
  }
  s.state.draws = w.draws;
  s.state.history = w.history;
  s.top_logprobs = w.logprobs ? w.top_logprobs : -1;
  s.state.grammar = w.grammar;
  s.state.grammar_tokens = w.grammar_tokens;
  return s;
}

net::SampledOutput to_wire(int32_t seq, const SampledToken& t, bool logprobs) {
  net::SampledOutput o;
  o.seq = seq;
  o.token = t.token;
  if (logprobs) {
    o.has_logprob = true;
    o.logprob = t.logprob;
    for (const auto& e : t.top) o.top.push_back({e.token, e.logprob});
  }
  return o;
}

SampledToken from_wire(const net::SampledOutput& o) {
  SampledToken t;
  t.token = o.token;
  t.logprob = o.logprob;
  for (const auto& e : o.top) t.top.push_back({e.token, e.logprob});
  return t;
}

std::vector<net::SampledOutput> sampled_to_wire(const Batch& batch, std::span<const StageSample> requests,
                                                std::span<const SampledToken> picks) {
  std::map<int32_t, const StageSample*> by_seq;
  for (const auto& s : requests) by_seq[s.seq] = &s;
  std::vector<net::SampledOutput> out;
  size_t k = 0;
  for (int64_t t = 0; t < batch.size(); ++t) {
    const auto tt = static_cast<size_t>(t);
    const auto it = batch.want_logits[tt] ? by_seq.find(batch.seq[tt]) : by_seq.end();
    if (it == by_seq.end()) continue;
    if (k >= picks.size()) fail("{} sampled tokens for more sampled outputs", picks.size());
    out.push_back(to_wire(batch.seq[tt], picks[k++], it->second->top_logprobs >= 0));
  }
  return out;
}

}  // namespace tessera::cluster
