// The pushdown matcher: its state is a deduplicated set of stacks of grammar positions (one per way the bytes so
// far can be read), advanced one byte at a time. Stacks are persistent linked nodes in an arena, so forking a
// stack costs one node and a token-mask walk can undo a byte by truncating the arena.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string_view>
#include <vector>

#include "grammar/grammar.h"

namespace tessera::grammar {

class TokenTrie;

// Bounds that keep a state small whatever the grammar and the bytes: a stack deeper than kMaxDepth (nesting) or a
// state wider than kMaxStacks (ambiguity) is dropped, which keeps the output valid but may end it sooner.
constexpr size_t kMaxDepth = 512;
constexpr size_t kMaxStacks = 256;

class Matcher {
 public:
  explicit Matcher(std::shared_ptr<const Grammar> grammar);

  // Consumes one byte; false (and the state unchanged) when the grammar does not allow it here.
  bool advance(uint8_t byte);
  // Consumes all bytes or none; false when some byte is not allowed.
  bool advance(std::string_view bytes);
  // True when all of `bytes` may come next; the state stays as it is (the reference a token mask is tested by).
  bool allows(std::string_view bytes);
  // True when the bytes so far form a complete sentence of the grammar.
  bool can_end() const;
  // True when no byte can follow (the state holds only the finished stack, or nothing).
  bool finished() const;
  // The bytes that may come next.
  ByteSet next_bytes() const;

  // Sets words[t / 64] bit t % 64 for every token of the trie whose bytes may come next (the end tokens when the
  // grammar can end here); words must hold trie.n_vocab() bits. Walks the trie once, pruning dead prefixes.
  void allowed_tokens(const TokenTrie& trie, std::span<uint64_t> words);

  // A key equal for two states exactly when they allow the same continuations (the stacks' positions, ordered).
  std::vector<uint32_t> state_key() const;
  size_t n_stacks() const { return state_.size(); }
  const Grammar& grammar() const { return *grammar_; }

 private:
  struct Node {
    uint32_t pos;     // the element to match next in this frame
    uint32_t parent;  // the frame to return to (0: the sentinel, the root's caller)
    uint32_t depth;
    uint64_t hash;
  };
  static constexpr uint32_t kDone = 0;  // the sentinel node: a stack id meaning "the root is complete"

  void expand(uint32_t pos, uint32_t parent, std::vector<uint32_t>& out, int guard);
  void add_stack(uint32_t id, std::vector<uint32_t>& out) const;
  bool same_stack(uint32_t a, uint32_t b) const;
  uint32_t new_node(uint32_t pos, uint32_t parent);
  void step(std::span<const uint32_t> from, uint8_t byte, std::vector<uint32_t>& to);
  void compact();
  void walk(const TokenTrie& trie, uint32_t node, size_t depth, std::span<uint64_t> words);

  std::shared_ptr<const Grammar> grammar_;
  std::vector<Node> nodes_;
  std::vector<uint32_t> state_;
  std::vector<uint32_t> scratch_;
  size_t work_ = 0;                            // expansion calls in the current step
  std::vector<std::vector<uint32_t>> levels_;  // one state per trie depth during allowed_tokens
};

}  // namespace tessera::grammar
