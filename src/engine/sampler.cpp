// Token sampler: llama.cpp's default chain over a reused candidate buffer (partial sorts only), plus logprobs.
#include "engine/sampler.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "util/error.h"

namespace tessera {

namespace {

// Fixed order (higher logit first, then lower token id) so ties resolve the same way as greedy argmax and the
// partial sorts below stay deterministic.
template <typename C>
bool better(const C& a, const C& b) {
  return a.logit > b.logit || (a.logit == b.logit && a.token < b.token);
}

// NaN would break the strict weak ordering the sorts rely on, and +inf would turn every softmax into NaN.
float sanitize(float logit) {
  if (std::isnan(logit)) return -std::numeric_limits<float>::infinity();
  if (logit == std::numeric_limits<float>::infinity()) return std::numeric_limits<float>::max();
  return logit;
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
  if (repeat_last_n < -1) fail("repeat_last_n must be >= -1 (0 disables penalties, -1 means all), got {}", repeat_last_n);
  if (!std::isfinite(presence_penalty)) fail("presence_penalty must be a finite number, got {}", presence_penalty);
  if (!std::isfinite(frequency_penalty)) fail("frequency_penalty must be a finite number, got {}", frequency_penalty);
}

Sampler::Sampler(SamplerParams params, int32_t n_vocab) : params_(params), n_vocab_(n_vocab) {
  params_.validate();
  if (n_vocab <= 0) fail("sampler needs a vocabulary of at least one token, got n_vocab = {}", n_vocab);
  seed_ = params_.seed == SamplerParams::kRandomSeed ? std::random_device{}() : params_.seed;
  penalised_.resize(static_cast<size_t>(n_vocab));
  candidates_.resize(static_cast<size_t>(n_vocab));
  if (penalties_active()) {
    counts_.assign(static_cast<size_t>(n_vocab), 0);
    present_slot_.assign(static_cast<size_t>(n_vocab), -1);
    if (params_.repeat_last_n > 0) window_.reserve(static_cast<size_t>(params_.repeat_last_n));
  }
  reset();
}

bool Sampler::penalties_active() const {
  return params_.repeat_last_n != 0 &&
         (params_.repeat_penalty != 1.0f || params_.frequency_penalty != 0.0f || params_.presence_penalty != 0.0f);
}

void Sampler::reset() {
  for (int32_t token : present_) counts_[static_cast<size_t>(token)] = 0;
  present_.clear();
  window_.clear();
  window_head_ = 0;
  // Both halves of a 64-bit seed matter, so it goes through a seed_seq rather than being truncated.
  std::seed_seq seq{static_cast<uint32_t>(seed_), static_cast<uint32_t>(seed_ >> 32)};
  rng_.seed(seq);
}

void Sampler::accept(int32_t token) {
  if (token < 0 || token >= n_vocab_) fail("accepted token {} is outside the vocabulary [0, {})", token, n_vocab_);
  if (!penalties_active()) return;
  if (params_.repeat_last_n > 0) {
    // Only a bounded window needs the tokens themselves, to know which one leaves.
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
    const int32_t count = counts_[static_cast<size_t>(token)];
    float& logit = logits[static_cast<size_t>(token)];
    // Dividing a negative logit would raise it, so those are multiplied instead (as llama.cpp does).
    logit = logit <= 0.0f ? logit * params_.repeat_penalty : logit / params_.repeat_penalty;
    logit -= static_cast<float>(count) * params_.frequency_penalty + params_.presence_penalty;
  }
}

void Sampler::check_logits(std::span<const float> logits) const {
  if (logits.size() != static_cast<size_t>(n_vocab_)) {
    fail("logits row has {} entries but the vocabulary has {}", logits.size(), n_vocab_);
  }
}

int32_t Sampler::sample(std::span<const float> logits) {
  check_logits(logits);
  std::transform(logits.begin(), logits.end(), penalised_.begin(), sanitize);
  apply_penalties(penalised_);
  return pick();
}

int32_t Sampler::pick_greedy() const {
  int32_t best = 0;
  for (int32_t i = 1; i < n_vocab_; ++i) {
    if (penalised_[static_cast<size_t>(i)] > penalised_[static_cast<size_t>(best)]) best = i;
  }
  return best;
}

int32_t Sampler::pick() {
  if (params_.greedy()) return pick_greedy();
  const size_t n = penalised_.size();
  for (size_t i = 0; i < n; ++i) candidates_[i] = {penalised_[i], static_cast<int32_t>(i)};

  size_t n_keep = n;
  size_t n_sorted = 0;  // candidates_[0, n_sorted) are the best ones in order
  if (params_.top_k > 0 && static_cast<size_t>(params_.top_k) < n) {
    n_keep = static_cast<size_t>(params_.top_k);
    const auto first = candidates_.begin();
    std::nth_element(first, first + static_cast<ptrdiff_t>(n_keep) - 1, candidates_.end(), better<Candidate>);
    std::sort(first, first + static_cast<ptrdiff_t>(n_keep), better<Candidate>);
    n_sorted = n_keep;
  }
  if (params_.top_p < 1.0f) {
    n_keep = keep_top_p(n_keep, n_sorted);
    n_sorted = n_keep;
  }
  if (params_.min_p > 0.0f) n_keep = keep_min_p(n_keep, n_sorted);
  return draw(n_keep);
}

// Keeps the smallest best-first prefix whose probability mass (at temperature 1) reaches top_p. The prefix is
// sorted a growing block at a time, because it is usually tiny next to a 150k vocabulary.
size_t Sampler::keep_top_p(size_t n_keep, size_t n_sorted) {
  const auto first = candidates_.begin();
  float max_logit = candidates_[0].logit;
  if (n_sorted == 0) {
    for (size_t i = 1; i < n_keep; ++i) max_logit = std::max(max_logit, candidates_[i].logit);
  }
  double total = 0.0;
  for (size_t i = 0; i < n_keep; ++i) total += std::exp(static_cast<double>(candidates_[i].logit - max_logit));
  const double target = static_cast<double>(params_.top_p) * total;

  double cumulative = 0.0;
  for (size_t i = 0; i < n_keep; ++i) {
    if (i == n_sorted) {
      const size_t grown = std::min(n_keep, std::max<size_t>(64, n_sorted * 4));
      std::partial_sort(first + static_cast<ptrdiff_t>(n_sorted), first + static_cast<ptrdiff_t>(grown),
                        first + static_cast<ptrdiff_t>(n_keep), better<Candidate>);
      n_sorted = grown;
    }
    cumulative += std::exp(static_cast<double>(candidates_[i].logit - max_logit));
    if (cumulative >= target) return i + 1;
  }
  return n_keep;
}

// Keeps the tokens whose probability is at least min_p times the best one's, i.e. logit >= max + log(min_p).
size_t Sampler::keep_min_p(size_t n_keep, size_t n_sorted) {
  float max_logit = candidates_[0].logit;
  if (n_sorted == 0) {
    for (size_t i = 1; i < n_keep; ++i) max_logit = std::max(max_logit, candidates_[i].logit);
  }
  const float threshold = max_logit + std::log(params_.min_p);
  const auto first = candidates_.begin();
  const auto kept = std::partition(first, first + static_cast<ptrdiff_t>(n_keep),
                                   [threshold](const Candidate& c) { return c.logit >= threshold; });
  return static_cast<size_t>(kept - first);
}

// Applies the temperature and draws from the softmax of the kept candidates.
int32_t Sampler::draw(size_t n_keep) {
  float max_logit = candidates_[0].logit;
  for (size_t i = 1; i < n_keep; ++i) max_logit = std::max(max_logit, candidates_[i].logit);
  const double inv_temp = 1.0 / static_cast<double>(params_.temperature);
  double total = 0.0;
  for (size_t i = 0; i < n_keep; ++i) {
    const double weight = std::exp(static_cast<double>(candidates_[i].logit - max_logit) * inv_temp);
    candidates_[i].logit = static_cast<float>(weight);
    total += weight;
  }
  // Built from the raw 32-bit output rather than std::uniform_real_distribution, whose algorithm differs
  // between standard libraries: a seed must give the same tokens everywhere.
  const double u = static_cast<double>(rng_()) / 4294967296.0;
  const double target = u * total;
  double cumulative = 0.0;
  for (size_t i = 0; i < n_keep; ++i) {
    cumulative += static_cast<double>(candidates_[i].logit);
    if (cumulative > target) return candidates_[i].token;
  }
  // Only rounding (or a row of -inf) gets here; the best candidate is the safe answer.
  size_t best = 0;
  for (size_t i = 1; i < n_keep; ++i) {
    if (candidates_[i].logit > candidates_[best].logit) best = i;
  }
  return candidates_[best].token;
}

SampledToken Sampler::sample_with_logprobs(std::span<const float> logits, int32_t top_n) {
  if (top_n < 0) fail("the number of top logprobs must be >= 0, got {}", top_n);
  SampledToken result;
  result.token = sample(logits);

  // penalised_ still holds this call's penalised logits: pick() works on candidates_.
  float max_logit = penalised_[0];
  for (float logit : penalised_) max_logit = std::max(max_logit, logit);
  double total = 0.0;
  for (float logit : penalised_) total += std::exp(static_cast<double>(logit - max_logit));
  const bool degenerate = !std::isfinite(max_logit) || !(total > 0.0);
  const double log_norm = static_cast<double>(max_logit) + std::log(total);
  auto logprob = [&](int32_t token) {
    if (degenerate) return -std::numeric_limits<float>::infinity();
    return static_cast<float>(static_cast<double>(penalised_[static_cast<size_t>(token)]) - log_norm);
  };
  result.logprob = logprob(result.token);

  const size_t n_top = std::min(static_cast<size_t>(top_n), penalised_.size());
  if (n_top > 0) {
    for (size_t i = 0; i < penalised_.size(); ++i) candidates_[i] = {penalised_[i], static_cast<int32_t>(i)};
    const auto first = candidates_.begin();
    std::nth_element(first, first + static_cast<ptrdiff_t>(n_top) - 1, candidates_.end(), better<Candidate>);
    std::sort(first, first + static_cast<ptrdiff_t>(n_top), better<Candidate>);
    result.top.reserve(n_top);
    for (size_t i = 0; i < n_top; ++i) result.top.push_back({candidates_[i].token, logprob(candidates_[i].token)});
  }
  return result;
}

}  // namespace tessera
