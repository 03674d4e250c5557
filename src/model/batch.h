// A batch of tokens for one forward pass; it may mix sequences (each token names its sequence and position).
#pragma once

#include <cstdint>
#include <vector>

namespace tessera {

// How long a forward pass of `tokens` prompt tokens takes through a stage's layers, as the stage measured it.
struct BatchTime {
  int64_t tokens = 0;
  double seconds = 0;
  bool operator==(const BatchTime&) const = default;
};

struct Batch {
  std::vector<int32_t> tokens;       // token ids (used by the stage that holds the embedding)
  std::vector<int32_t> seq;          // sequence (KV cache slot) of each token
  std::vector<int32_t> pos;          // position of each token in its sequence
  std::vector<uint8_t> want_logits;  // 1: the last stage returns logits for this token

  int64_t size() const { return static_cast<int64_t>(seq.size()); }
  bool empty() const { return seq.empty(); }
  int64_t n_outputs() const {
    int64_t n = 0;
    for (auto w : want_logits) n += w != 0;
    return n;
  }
  void add(int32_t token, int32_t sequence, int32_t position, bool logits) {
    tokens.push_back(token);
    seq.push_back(sequence);
    pos.push_back(position);
    want_logits.push_back(logits ? 1 : 0);
  }
  void clear() {
    tokens.clear();
    seq.clear();
    pos.clear();
    want_logits.clear();
  }
};

}  // namespace tessera
