// Greedy pairwise merging over a linked list of symbols: the core loop shared by SPM (best vocab score
// first) and BPE (lowest merge rank first). Ties go to the leftmost pair, as in SentencePiece and llama.cpp.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

#include "tokenizer/vocab.h"

namespace tessera {

// A span of the text being tokenized. Merged-away symbols keep len == 0.
struct MergeSymbol {
  size_t start = 0;
  size_t len = 0;
  TokenId id = kNoToken;  // the token this span spells, if any
  int32_t prev = -1;
  int32_t next = -1;
};

// Links `syms` (given in text order) and merges adjacent pairs until none qualifies. `score_pair(left, right)`
// returns nullopt when the pair cannot merge, else {priority, merged token}: the highest priority merges first.
// Afterwards the surviving symbols are reached from index 0 through `next`.
template <typename ScorePair>
void merge_symbols(std::vector<MergeSymbol>& syms, ScorePair&& score_pair) {
  const auto n = static_cast<int32_t>(syms.size());
  for (int32_t i = 0; i < n; ++i) {
    syms[i].prev = i - 1;
    syms[i].next = i + 1 < n ? i + 1 : -1;
  }

  struct Candidate {
    double priority;
    int32_t left;
    // The sizes both sides had when queued: if either changed since, the candidate is stale.
    size_t left_len;
    size_t right_len;
    TokenId merged;
  };
  // std::push_heap keeps the "largest" on top: higher priority, then smaller left index.
  auto lower = [](const Candidate& a, const Candidate& b) {
    if (a.priority != b.priority) return a.priority < b.priority;
    return a.left > b.left;
  };
  std::vector<Candidate> heap;
  heap.reserve(syms.size());
  auto consider = [&](int32_t left) {
    if (left < 0) return;
    const int32_t right = syms[left].next;
    if (right < 0) return;
    const std::optional<std::pair<double, TokenId>> scored = score_pair(syms[left], syms[right]);
    if (!scored) return;
    heap.push_back({scored->first, left, syms[left].len, syms[right].len, scored->second});
    std::push_heap(heap.begin(), heap.end(), lower);
  };

  for (int32_t i = 0; i + 1 < n; ++i) consider(i);
  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end(), lower);
    const Candidate c = heap.back();
    heap.pop_back();
    MergeSymbol& left = syms[c.left];
    // A symbol only changes by absorbing its right neighbour or being absorbed, so unchanged lengths on both
    // sides mean the pair is still adjacent and still spells the same text.
    if (left.len != c.left_len || left.next < 0) continue;
    MergeSymbol& right = syms[left.next];
    if (right.len != c.right_len) continue;

    left.len += right.len;
    left.id = c.merged;
    right.len = 0;
    left.next = right.next;
    if (right.next >= 0) syms[right.next].prev = c.left;
    consider(left.prev);
    consider(c.left);
  }
}

}  // namespace tessera
