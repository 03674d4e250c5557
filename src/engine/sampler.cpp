// Token sampler: llama.cpp's default chain over a reused candidate buffer (partial sorts only), plus logprobs. Every
// step is one a tensor-parallel group can reproduce exactly without gathering a row (sharded_sampling.h).
#include "engine/sampler.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>

#include "grammar/constraint.h"
#include "util/error.h"

namespace tessera {

namespace {

// Fixed order (higher logit first, then lower token id) so ties resolve the same way as greedy argmax and the
// partial sorts below stay deterministic. A lambda rather than a function so the standard algorithms inline it.
constexpr auto better = [](const auto& a, const auto& b) {
  return a.logit > b.logit || (a.logit == b.logit && a.token < b.token);
};

// Independent running maxima break the one-compare-per-element dependency chain of a plain loop.
float max_of(std::span<const float> values) {
  std::array<float, 8> lane;
  lane.fill(values[0]);
  size_t i = 0;
  for (; i + lane.size() <= values.size(); i += lane.size()) {
    for (size_t j = 0; j < lane.size(); ++j) lane[j] = std::max(lane[j], values[i + j]);
  }
  for (; i < values.size(); ++i) lane[0] = std::max(lane[0], values[i]);
  return *std::max_element(lane.begin(), lane.end());
}

}  // namespace

void SamplerParams::validate() const {
  if (!std::isfinite(temperature)) fail("temperature must be a finite number (<= 0 means greedy), got {}", temperature);
  if (top_k < -1) fail("top_k must be >= -1 (0 or -1 disables it), got {}", top_k);
  if (!(top_p > 0.0f && top_p <= 1.0f)) fail("top_p must be in (0, 1], got {}", top_p);
  if (!(min_p >= 0.0f && min_p <= 1.0f)) fail("min_p must be in [0, 1], got {}", min_p);
  if (!(std::isfinite(repeat_penalty) && repeat_penalty > 0.0f)) {
    fail("repeat_penalty must be a finite number > 0 (1 disables it), got {}", repeat_penalty);
  }
  if (repeat_last_n < -1)
    fail("repeat_last_n must be >= -1 (0 disables penalties, -1 means all), got {}", repeat_last_n);
  if (!std::isfinite(presence_penalty)) fail("presence_penalty must be a finite number, got {}", presence_penalty);
  if (!std::isfinite(frequency_penalty)) fail("frequency_penalty must be a finite number, got {}", frequency_penalty);
}

Sampler::Sampler(SamplerParams params, int32_t n_vocab) : params_(params), n_vocab_(n_vocab) {
  params_.validate();
  if (n_vocab <= 0) fail("sampler needs a vocabulary of at least one token, got n_vocab = {}", n_vocab);
  seed_ = params_.seed;
  if (seed_ == SamplerParams::kRandomSeed) {
    // A drawn seed must not read as "random" when it is sent to another node's sampler.
    std::random_device device;
    do seed_ = device();
    while (seed_ == SamplerParams::kRandomSeed);
  }
  penalised_.resize(static_cast<size_t>(n_vocab));
  candidates_.resize(static_cast<size_t>(n_vocab));
  if (penalties_active()) {
    counts_.assign(static_cast<size_t>(n_vocab), 0);
    present_slot_.assign(static_cast<size_t>(n_vocab), -1);
    if (params_.repeat_last_n > 0) window_.reserve(static_cast<size_t>(params_.repeat_last_n));
  }
  reset();
}

bool Sampler::penalties_active() const { return params_.penalised(); }

void Sampler::reset() {
  for (int32_t token : present_) counts_[static_cast<size_t>(token)] = 0;
  present_.clear();
  window_.clear();
  window_head_ = 0;
  // Both halves of a 64-bit seed matter, so it goes through a seed_seq rather than being truncated.
  std::seed_seq seq{static_cast<uint32_t>(seed_), static_cast<uint32_t>(seed_ >> 32)};
  rng_.seed(seq);
  draws_ = 0;
}

SamplerState Sampler::state() const {
  SamplerState s;
  s.params = params_;
  s.params.seed = seed_;
  s.draws = draws_;
  s.history = history();
  if (constraint_) {
    s.grammar = grammar_text_;
    s.grammar_tokens = constraint_->accepted();
  }
  return s;
}

std::vector<int32_t> Sampler::history() const {
  if (!penalties_active()) return {};
  if (params_.repeat_last_n < 0 || window_.size() < static_cast<size_t>(params_.repeat_last_n)) return window_;
  // A full ring: the oldest token sits at window_head_.
  std::vector<int32_t> out(window_.begin() + static_cast<ptrdiff_t>(window_head_), window_.end());
  out.insert(out.end(), window_.begin(), window_.begin() + static_cast<ptrdiff_t>(window_head_));
  return out;
}

void Sampler::restore(uint64_t draws, std::span<const int32_t> history) {
  if (draws < draws_) {
    reset();
  } else {
    for (int32_t token : present_) counts_[static_cast<size_t>(token)] = 0;
    present_.clear();
    window_.clear();
    window_head_ = 0;
  }
  rng_.discard(draws - draws_);
  draws_ = draws;
  for (int32_t token : history) accept(token, false);
}

void Sampler::set_grammar(std::string text, std::shared_ptr<grammar::TokenConstraint> constraint) {
  if (constraint && constraint->trie().n_vocab() != n_vocab_) {
    fail("grammar vocabulary has {} tokens but the sampler {}", constraint->trie().n_vocab(), n_vocab_);
  }
  grammar_text_ = std::move(text);
  constraint_ = std::move(constraint);
}

void Sampler::mask_grammar(std::span<float> logits, int32_t first) const {
  if (!constraint_) return;
  const auto words = constraint_->mask();
  if (std::all_of(words.begin(), words.end(), [](uint64_t w) { return w == 0; })) {
    fail("the grammar allows no token of the vocabulary here");
  }
  constraint_->apply(logits, first);
}

void Sampler::skip_sample() {
  // pick() draws exactly one number unless it is greedy.
  if (params_.greedy()) return;
  rng_.discard(1);
  ++draws_;
}

void Sampler::accept(int32_t token, bool generated) {
  if (token < 0 || token >= n_vocab_) fail("accepted token {} is outside the vocabulary [0, {})", token, n_vocab_);
  if (generated && constraint_) constraint_->accept(token);
  if (!penalties_active()) return;
  if (params_.repeat_last_n < 0) {
    window_.push_back(token);  // the whole sequence counts: kept only so history() can be sent
  } else {
    // A bounded window needs the tokens themselves, to know which one leaves.
    if (window_.size() < static_cast<size_t>(params_.repeat_last_n)) {
      window_.push_back(token);
    } else {
      forget_oldest();
      window_[window_head_] = token;
      window_head_ = (window_head_ + 1) % window_.size();
    }
  }
  int32_t& count = counts_[static_cast<size_t>(token)];
  if (count++ == 0) {
    present_slot_[static_cast<size_t>(token)] = static_cast<int32_t>(present_.size());
    present_.push_back(token);
  }
}

void Sampler::forget_oldest() {
  const int32_t token = window_[window_head_];
  if (--counts_[static_cast<size_t>(token)] > 0) return;
  const int32_t slot = present_slot_[static_cast<size_t>(token)];
  const int32_t last = present_.back();
  present_[static_cast<size_t>(slot)] = last;
  present_slot_[static_cast<size_t>(last)] = slot;
  present_.pop_back();
  present_slot_[static_cast<size_t>(token)] = -1;
}

void Sampler::apply_penalties(std::span<float> logits) const {
  if (!penalties_active()) return;
  if (logits.size() != static_cast<size_t>(n_vocab_)) {
    fail("logits row has {} entries but the vocabulary has {}", logits.size(), n_vocab_);
  }
  for (int32_t token : present_) {
    float& logit = logits[static_cast<size_t>(token)];
    logit = penalise_logit(logit, counts_[static_cast<size_t>(token)], params_);
  }
}

void Sampler::penalty_counts(std::vector<int32_t>& tokens, std::vector<int32_t>& counts) const {
  tokens.clear();
  counts.clear();
  if (!penalties_active()) return;
  for (int32_t token : present_) {
    tokens.push_back(token);
    counts.push_back(counts_[static_cast<size_t>(token)]);
  }
}

void Sampler::check_logits(std::span<const float> logits) const {
  if (logits.size() != static_cast<size_t>(n_vocab_)) {
    fail("logits row has {} entries but the vocabulary has {}", logits.size(), n_vocab_);
  }
}

int32_t Sampler::sample(std::span<const float> logits) {
  check_logits(logits);
  std::transform(logits.begin(), logits.end(), penalised_.begin(), sanitize_logit);
  mask_grammar(penalised_);
  apply_penalties(penalised_);
  return pick();
}

int32_t Sampler::pick_greedy() const {
  const float best = max_of(penalised_);
  return static_cast<int32_t>(std::find(penalised_.begin(), penalised_.end(), best) - penalised_.begin());
}

// Puts the k best tokens of penalised_ into candidates_[0, k), best first.
void Sampler::select_best(size_t k) {
  const size_t n = penalised_.size();
  const auto first = candidates_.begin();
  if (k * 8 <= n) {
    // A bounded heap whose front is the worst kept token: most tokens cost one comparison, which beats
    // nth_element over the whole vocabulary for the small k that top-k and logprobs use.
    const auto heap_end = first + static_cast<ptrdiff_t>(k);
    for (size_t i = 0; i < k; ++i) candidates_[i] = {penalised_[i], 0.0f, static_cast<int32_t>(i)};
    std::make_heap(first, heap_end, better);
    float worst_kept = candidates_[0].logit;
    for (size_t i = k; i < n; ++i) {
      if (penalised_[i] < worst_kept) continue;
      const Candidate c{penalised_[i], 0.0f, static_cast<int32_t>(i)};
      if (!better(c, candidates_[0])) continue;
      std::pop_heap(first, heap_end, better);
      *(heap_end - 1) = c;
      std::push_heap(first, heap_end, better);
      worst_kept = candidates_[0].logit;
    }
  } else {
    for (size_t i = 0; i < n; ++i) candidates_[i] = {penalised_[i], 0.0f, static_cast<int32_t>(i)};
    std::nth_element(first, first + static_cast<ptrdiff_t>(k) - 1, candidates_.end(), better);
  }
  std::sort(first, first + static_cast<ptrdiff_t>(k), better);
}

int32_t Sampler::pick() {
  if (params_.greedy()) return pick_greedy();
  const size_t n = penalised_.size();
  if (params_.top_k > 0 && static_cast<size_t>(params_.top_k) < n) {
    select_best(static_cast<size_t>(params_.top_k));
    return finish_top_k(static_cast<size_t>(params_.top_k));
  }
  if (params_.top_p < 1.0f) return pick_top_p();
  size_t n_keep = n;
  if (params_.min_p > 0.0f) {
    // min_p is the only cut, and it depends on the best logit alone, so it can filter while copying.
    const float threshold = max_of(penalised_) + std::log(params_.min_p);
    n_keep = 0;
    for (size_t i = 0; i < n; ++i) {
      if (penalised_[i] >= threshold) candidates_[n_keep++] = {penalised_[i], 0.0f, static_cast<int32_t>(i)};
    }
    n_keep = keep_min_p(n_keep);
  } else {
    for (size_t i = 0; i < n; ++i) candidates_[i] = {penalised_[i], 0.0f, static_cast<int32_t>(i)};
  }
  return draw(n_keep, false);
}

// The k best tokens are in candidates_[0, k), best first.
int32_t Sampler::finish_top_k(size_t k) {
  size_t n_keep = k;
  const bool weighted = params_.top_p < 1.0f;
  if (weighted) n_keep = keep_top_p(n_keep);
  if (params_.min_p > 0.0f) n_keep = keep_min_p(n_keep);
  return draw(n_keep, weighted);
}

int32_t Sampler::pick_from_top_k(std::span<const float> logits, std::span<const int32_t> tokens) {
  const auto k = static_cast<size_t>(params_.top_k);
  if (params_.greedy() || params_.top_k <= 0 || k >= penalised_.size()) {
    fail("pick_from_top_k is for sampling with 0 < top_k < n_vocab, not top_k = {} of {} at temperature {}",
         params_.top_k, penalised_.size(), params_.temperature);
  }
  if (logits.size() != k || tokens.size() != k) {
    fail("pick_from_top_k needs the top_k = {} best tokens, got {} logits and {} tokens", k, logits.size(),
         tokens.size());
  }
  for (size_t i = 0; i < k; ++i) candidates_[i] = {logits[i], 0.0f, tokens[i]};
  return finish_top_k(k);
}

// Top-p without top-k, over the whole vocabulary. The cut is exact: masses are exp(logit - max) in fixed point
// (NucleusCut), whose sums do not depend on their order, so the ranks of a tensor-parallel group find the same
// set as one node. The kept tokens are then drawn from in vocabulary order, which a group can walk rank by rank.
int32_t Sampler::pick_top_p() {
  const float max_logit = max_of(penalised_);
  nucleus_.solve(penalised_, max_logit, params_.top_p);
  // min-p after top-p: the best token is always in the nucleus, so the threshold is the one min-p alone would use.
  const float threshold =
      params_.min_p > 0.0f ? max_logit + std::log(params_.min_p) : -std::numeric_limits<float>::infinity();
  size_t n_keep = 0;
  for (size_t i = 0; i < penalised_.size(); ++i) {
    const float logit = penalised_[i];
    if (logit >= threshold && nucleus_.kept(logit, static_cast<int32_t>(i))) {
      candidates_[n_keep++] = {logit, 0.0f, static_cast<int32_t>(i)};
    }
  }
  return draw(n_keep, false);
}

// After top-k: keeps the smallest best-first set whose probability mass (at temperature 1) reaches top_p, leaving
// it unordered with weights filled in. No full sort: a histogram over logits finds the bucket where the mass
// crosses top_p in two linear passes, and a weighted quickselect (nth_element on the mass of the better half)
// settles the tokens inside that bucket.
size_t Sampler::keep_top_p(size_t n_keep) {
  const auto first = candidates_.begin();
  float max_logit = candidates_[0].logit;
  float min_logit = candidates_[0].logit;
  for (size_t i = 1; i < n_keep; ++i) {
    max_logit = std::max(max_logit, candidates_[i].logit);
    min_logit = std::min(min_logit, candidates_[i].logit);
  }
  double total = 0.0;
  for (size_t i = 0; i < n_keep; ++i) {
    candidates_[i].weight = std::exp(candidates_[i].logit - max_logit);
    total += static_cast<double>(candidates_[i].weight);
  }
  const double target = static_cast<double>(params_.top_p) * total;

  // Invariant: candidates_[0, lo) beat everything in [lo, hi), hold mass `before` < target, and the answer
  // lies in (lo, hi].
  size_t lo = 0;
  size_t hi = n_keep;
  double before = 0.0;

  constexpr size_t kBuckets = 256;
  const float span = max_logit - min_logit;
  if (n_keep > 4 * kBuckets && std::isfinite(span) && span > 0.0f) {
    // Bucket 0 holds the best logits; the index only grows as the logit falls, so every token of a lower
    // bucket beats every token of a higher one.
    const float scale = static_cast<float>(kBuckets) / span;
    auto bucket_of = [&](const Candidate& c) {
      return std::min(static_cast<size_t>((max_logit - c.logit) * scale), kBuckets - 1);
    };
    std::array<double, kBuckets> bucket_mass{};
    for (size_t i = 0; i < n_keep; ++i) bucket_mass[bucket_of(candidates_[i])] += candidates_[i].weight;
    size_t cut = 0;
    while (cut + 1 < kBuckets && before + bucket_mass[cut] < target) before += bucket_mass[cut++];
    const auto end = first + static_cast<ptrdiff_t>(n_keep);
    const auto cut_begin = std::partition(first, end, [&](const Candidate& c) { return bucket_of(c) < cut; });
    const auto cut_end = std::partition(cut_begin, end, [&](const Candidate& c) { return bucket_of(c) == cut; });
    lo = static_cast<size_t>(cut_begin - first);
    hi = static_cast<size_t>(cut_end - first);
    // The partition's mass was summed in another order; recount it so the comparisons below stay consistent.
    before = 0.0;
    for (size_t i = 0; i < lo; ++i) before += static_cast<double>(candidates_[i].weight);
    if (lo == hi || before >= target) return lo == 0 ? hi : lo;  // rounding only
  }

  auto mass = [&](size_t from, size_t to) {
    double sum = 0.0;
    for (size_t i = from; i < to; ++i) sum += static_cast<double>(candidates_[i].weight);
    return sum;
  };
  while (hi - lo > 64) {
    const size_t mid = lo + (hi - lo) / 2;
    std::nth_element(first + static_cast<ptrdiff_t>(lo), first + static_cast<ptrdiff_t>(mid),
                     first + static_cast<ptrdiff_t>(hi), better);
    const double left = mass(lo, mid);
    if (before + left >= target) {
      hi = mid;
    } else {
      before += left;
      lo = mid;
    }
  }
  std::sort(first + static_cast<ptrdiff_t>(lo), first + static_cast<ptrdiff_t>(hi), better);
  for (size_t i = lo; i < hi; ++i) {
    before += static_cast<double>(candidates_[i].weight);
    if (before >= target) return i + 1;
  }
  return hi;  // only rounding differences between the two summation orders get here
}

// Keeps the tokens whose probability is at least min_p times the best one's, i.e. logit >= max + log(min_p).
size_t Sampler::keep_min_p(size_t n_keep) {
  float max_logit = candidates_[0].logit;
  for (size_t i = 1; i < n_keep; ++i) max_logit = std::max(max_logit, candidates_[i].logit);
  const float threshold = max_logit + std::log(params_.min_p);
  const auto first = candidates_.begin();
  const auto kept = std::partition(first, first + static_cast<ptrdiff_t>(n_keep),
                                   [threshold](const Candidate& c) { return c.logit >= threshold; });
  return static_cast<size_t>(kept - first);
}

double Sampler::next_uniform() {
  // Built from the raw 32-bit output rather than std::uniform_real_distribution, whose algorithm differs
  // between standard libraries: a seed must give the same tokens everywhere.
  ++draws_;
  return static_cast<double>(rng_()) / 4294967296.0;
}

// Applies the temperature and draws from the softmax of the kept candidates. `weighted` says keep_top_p already
// filled in exp(logit - max) for them, which is the answer at temperature 1.
int32_t Sampler::draw(size_t n_keep, bool weighted) {
  double total = 0.0;
  if (weighted && params_.temperature == 1.0f) {
    for (size_t i = 0; i < n_keep; ++i) total += static_cast<double>(candidates_[i].weight);
  } else {
    float max_logit = candidates_[0].logit;
    for (size_t i = 1; i < n_keep; ++i) max_logit = std::max(max_logit, candidates_[i].logit);
    const float inv_temp = 1.0f / params_.temperature;
    for (size_t i = 0; i < n_keep; ++i) {
      candidates_[i].weight = std::exp((candidates_[i].logit - max_logit) * inv_temp);
      total += static_cast<double>(candidates_[i].weight);
    }
  }
  const double target = next_uniform() * total;
  double cumulative = 0.0;
  for (size_t i = 0; i < n_keep; ++i) {
    cumulative += static_cast<double>(candidates_[i].weight);
    if (cumulative > target) return candidates_[i].token;
  }
  // Only rounding (or a row of -inf) gets here; the best candidate is the safe answer.
  size_t best = 0;
  for (size_t i = 1; i < n_keep; ++i) {
    if (better(candidates_[i], candidates_[best])) best = i;
  }
  return candidates_[best].token;
}

SampledToken Sampler::sample_with_logprobs(std::span<const float> logits, int32_t top_n) {
  if (top_n < 0) fail("the number of top logprobs must be >= 0, got {}", top_n);
  SampledToken result;
  result.token = sample(logits);

  // penalised_ still holds this call's penalised logits: pick() works on candidates_.
  const float max_logit = max_of(penalised_);
  double total = 0.0;
  for (float logit : penalised_) total += static_cast<double>(std::exp(logit - max_logit));
  const bool degenerate = !std::isfinite(max_logit) || !(total > 0.0);
  const double log_norm = static_cast<double>(max_logit) + std::log(total);
  auto logprob = [&](int32_t token) {
    if (degenerate) return -std::numeric_limits<float>::infinity();
    return static_cast<float>(static_cast<double>(penalised_[static_cast<size_t>(token)]) - log_norm);
  };
  result.logprob = logprob(result.token);

  const size_t n_top = std::min(static_cast<size_t>(top_n), penalised_.size());
  if (n_top > 0) {
    select_best(n_top);
    result.top.reserve(n_top);
    for (size_t i = 0; i < n_top; ++i) result.top.push_back({candidates_[i].token, logprob(candidates_[i].token)});
  }
  return result;
}

}  // namespace tessera
