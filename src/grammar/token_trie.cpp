// TokenTrie: the pieces sorted, then one pass that keeps the current path and closes the nodes a piece leaves.
#include "grammar/token_trie.h"

#include <algorithm>
#include <numeric>

#include "util/error.h"

namespace tessera::grammar {

TokenTrie::TokenTrie(std::span<const std::string> pieces, std::vector<int32_t> end_tokens)
    : n_vocab_(static_cast<int32_t>(pieces.size())),
      end_tokens_(std::move(end_tokens)),
      pieces_(pieces.begin(), pieces.end()) {
  for (int32_t t : end_tokens_) {
    if (t < 0 || t >= n_vocab_) fail("end token {} is outside the vocabulary of {} tokens", t, n_vocab_);
  }
  std::vector<int32_t> order;
  for (int32_t t = 0; t < n_vocab_; ++t) {
    if (!pieces_[static_cast<size_t>(t)].empty() && !is_end(t)) order.push_back(t);
  }
  std::sort(order.begin(), order.end(),
            [&](int32_t a, int32_t b) { return pieces_[static_cast<size_t>(a)] < pieces_[static_cast<size_t>(b)]; });
  nodes_.push_back({});
  std::vector<uint32_t> path{0};  // path[d]: the node at depth d on the current piece
  const std::string* prev = nullptr;
  for (int32_t t : order) {
    const std::string& p = pieces_[static_cast<size_t>(t)];
    size_t common = 0;
    if (prev != nullptr) {
      while (common < p.size() && common < prev->size() && p[common] == (*prev)[common]) ++common;
    }
    while (path.size() > common + 1) {
      nodes_[path.back()].end = static_cast<uint32_t>(nodes_.size());
      path.pop_back();
    }
    for (size_t d = common; d < p.size(); ++d) {
      Node n;
      n.byte = static_cast<uint8_t>(p[d]);
      n.token_begin = n.token_end = static_cast<uint32_t>(tokens_.size());
      path.push_back(static_cast<uint32_t>(nodes_.size()));
      nodes_.push_back(n);
    }
    // Equal pieces sort together, so a node's tokens are contiguous.
    Node& last = nodes_[path.back()];
    if (last.token_end == last.token_begin) last.token_begin = static_cast<uint32_t>(tokens_.size());
    tokens_.push_back(t);
    last.token_end = static_cast<uint32_t>(tokens_.size());
    max_depth_ = std::max(max_depth_, p.size());
    prev = &p;
  }
  while (!path.empty()) {
    nodes_[path.back()].end = static_cast<uint32_t>(nodes_.size());
    path.pop_back();
  }
}

bool TokenTrie::is_end(int32_t token) const {
  return std::find(end_tokens_.begin(), end_tokens_.end(), token) != end_tokens_.end();
}

}  // namespace tessera::grammar
