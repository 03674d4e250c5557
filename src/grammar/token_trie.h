// The vocabulary as a byte trie, laid out in depth-first order so a mask walk reads it front to back and skips a
// dead subtree with one jump. Built once per model and shared by every constrained sequence.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace tessera::grammar {

class TokenTrie {
 public:
  struct Node {
    uint32_t end = 0;                         // one past the last node of this subtree
    uint32_t token_begin = 0, token_end = 0;  // tokens whose bytes end here, in tokens()
    uint8_t byte = 0;                         // the edge into this node
  };

  // pieces[t]: the bytes token t produces ("" for control tokens, which a grammar never allows); end_tokens: the
  // end-of-generation tokens, allowed exactly when the grammar can end.
  TokenTrie(std::span<const std::string> pieces, std::vector<int32_t> end_tokens);

  int32_t n_vocab() const { return n_vocab_; }
  const std::vector<Node>& nodes() const { return nodes_; }  // nodes()[0] is the root (the empty prefix)
  std::span<const int32_t> tokens(const Node& n) const {
    return {tokens_.data() + n.token_begin, n.token_end - n.token_begin};
  }
  const std::vector<int32_t>& end_tokens() const { return end_tokens_; }
  bool is_end(int32_t token) const;
  const std::string& piece(int32_t token) const { return pieces_[static_cast<size_t>(token)]; }
  size_t max_depth() const { return max_depth_; }

 private:
  int32_t n_vocab_;
  std::vector<Node> nodes_;
  std::vector<int32_t> tokens_;
  std::vector<int32_t> end_tokens_;
  std::vector<std::string> pieces_;
  size_t max_depth_ = 0;
};

}  // namespace tessera::grammar
