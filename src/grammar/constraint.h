// One sequence's grammar constraint over a vocabulary: the token mask for the next position (cached by matcher
// state, since a string or a list revisits the same state many times) and the matcher advanced by accepted tokens.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "grammar/grammar.h"
#include "grammar/matcher.h"
#include "grammar/token_trie.h"

namespace tessera::grammar {

class TokenConstraint {
 public:
  TokenConstraint(std::shared_ptr<const Grammar> grammar, std::shared_ptr<const TokenTrie> trie);

  // Bit t of the mask: token t may come next. Valid until the next accept().
  std::span<const uint64_t> mask();
  bool allows(int32_t token) { return (mask()[static_cast<size_t>(token) / 64] >> (token % 64)) & 1; }
  // Sets every logit of a token the grammar does not allow to -inf. `logits` is the slice of the vocabulary
  // starting at token `first` (a tensor-parallel rank holds one slice).
  void apply(std::span<float> logits, int32_t first = 0);
  // Advances by a sampled token. Throws Error when the grammar does not allow it.
  void accept(int32_t token);

  bool can_end() const { return matcher_.can_end(); }
  bool ended() const { return ended_; }  // an end token was accepted
  const std::vector<int32_t>& accepted() const { return accepted_; }
  const TokenTrie& trie() const { return *trie_; }

 private:
  struct CachedMask {
    std::vector<uint32_t> key;
    std::vector<uint64_t> words;
    uint64_t last_use = 0;
  };

  std::shared_ptr<const TokenTrie> trie_;
  Matcher matcher_;
  bool ended_ = false;
  std::vector<int32_t> accepted_;
  std::vector<CachedMask> cache_;
  CachedMask* current_ = nullptr;  // the mask of the present state, once computed
  uint64_t clock_ = 0;
};

}  // namespace tessera::grammar
