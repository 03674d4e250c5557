// TokenConstraint: a small LRU of masks keyed by the matcher's state key.
#include "grammar/constraint.h"

#include <algorithm>
#include <limits>

#include "util/error.h"

namespace tessera::grammar {

namespace {
constexpr size_t kCachedMasks = 16;
}

TokenConstraint::TokenConstraint(std::shared_ptr<const Grammar> grammar, std::shared_ptr<const TokenTrie> trie)
    : trie_(std::move(trie)), matcher_(std::move(grammar)) {}

std::span<const uint64_t> TokenConstraint::mask() {
  if (current_ != nullptr) return current_->words;
  std::vector<uint32_t> key = matcher_.state_key();
  auto it = std::find_if(cache_.begin(), cache_.end(), [&](const CachedMask& c) { return c.key == key; });
  if (it == cache_.end()) {
    if (cache_.size() < kCachedMasks) {
      cache_.emplace_back();
      it = cache_.end() - 1;
    } else {
      it = std::min_element(cache_.begin(), cache_.end(),
                            [](const CachedMask& a, const CachedMask& b) { return a.last_use < b.last_use; });
    }
    it->key = std::move(key);
    it->words.assign((static_cast<size_t>(trie_->n_vocab()) + 63) / 64, 0);
    if (!ended_) matcher_.allowed_tokens(*trie_, it->words);
  }
  it->last_use = ++clock_;
  current_ = &*it;
  return current_->words;
}

void TokenConstraint::apply(std::span<float> logits, int32_t first) {
  const auto words = mask();
  if (first < 0 || static_cast<size_t>(first) + logits.size() > static_cast<size_t>(trie_->n_vocab())) {
    fail("logits slice [{}, {}) is outside the vocabulary of {} tokens", first,
         static_cast<size_t>(first) + logits.size(), trie_->n_vocab());
  }
  constexpr float kMasked = -std::numeric_limits<float>::infinity();
  const size_t begin = static_cast<size_t>(first);
  const size_t end = begin + logits.size();
  for (size_t t = begin; t < end;) {
    const uint64_t w = words[t / 64];
    if (w == ~uint64_t{0} && t % 64 == 0 && t + 64 <= end) {
      t += 64;  // inside a string nearly every token is allowed: skip whole words
      continue;
    }
    if (!((w >> (t % 64)) & 1)) logits[t - begin] = kMasked;
    ++t;
  }
}

void TokenConstraint::accept(int32_t token) {
  if (token < 0 || token >= trie_->n_vocab()) fail("token {} is outside the vocabulary", token);
  if (ended_) fail("token {} after the grammar's end", token);
  if (trie_->is_end(token)) {
    if (!matcher_.can_end()) fail("end token {} before the grammar is complete", token);
    ended_ = true;
  } else if (trie_->piece(token).empty() || !matcher_.advance(trie_->piece(token))) {
    fail("token {} does not continue the grammar", token);
  }
  accepted_.push_back(token);
  current_ = nullptr;
  if (ended_) cache_.clear();
}

}  // namespace tessera::grammar
