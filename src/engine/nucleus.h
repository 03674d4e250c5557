// The exact top-p cut ("nucleus") over logits that may be split by vocabulary over ranks: weights in fixed point,
// whose sums are exact in any order, and a search by histograms of ordering keys, a few small messages per round.
#pragma once

#include <cstdint>
#include <span>
#include <utility>
#include <vector>

namespace tessera {

// A token's place in the best-first order (higher logit, then lower id) as one integer: larger is better. For
// sanitized logits (no NaN); -0 and +0 count as equal, as float comparisons have them.
uint64_t order_key(float logit, int32_t token);

// Top-p keeps the smallest best-first prefix whose mass reaches top_p of the total, where a token's mass is
// exp(logit - max) in units of 2^-62 (truncated): integers, so every split of the vocabulary and every order of
// addition gives the same sums and the same cut. The kept tokens are those whose order_key is at least cut_key().
//
// Every rank calls begin() with its share, then, until done(), sends message() to every rank and read()s all of
// them (in rank order); the ranks stay in step because they all read the same bytes. Each round either narrows
// the range holding the cut by a 256-bucket histogram (5 KiB a rank in the first round, by distance below the best
// logit; 9 KiB later, by key) or, once that range holds at most 64 tokens, sends them (1 KiB a rank) and settles
// it. One node is a single rank (solve()).
class NucleusCut {
 public:
  // logits: this rank's sanitized, penalised logits, for tokens from first_token on; max_logit: the largest over
  // all ranks; top_p in (0, 1).
  void begin(std::span<const float> logits, int32_t first_token, float max_logit, float top_p);
  bool done() const { return done_; }
  // This rank's part of the round, the same size on every rank (valid until the next call).
  std::span<const uint8_t> message();
  // Every rank's message of the round, concatenated in rank order.
  void read(std::span<const uint8_t> all, int ranks);
  // The smallest key kept (once done()).
  uint64_t cut_key() const { return cut_; }
  // Whether a token is in the nucleus (once done()): order_key(logit, token) >= cut_key(), in float comparisons.
  bool kept(float logit, int32_t token) const {
    return logit > cut_logit_ || (logit == cut_logit_ && token <= cut_token_);
  }
  // One node: begin() and every round with this rank alone; returns cut_key().
  uint64_t solve(std::span<const float> logits, float max_logit, float top_p);

  __extension__ typedef unsigned __int128 Mass;

 private:
  struct Item {
    uint64_t key;
    uint64_t mass;
  };

  uint64_t mass_of(float logit) const;
  size_t first_bucket(float logit) const;
  // The ordered bits of the lowest and highest logit in the first round's bucket b.
  std::pair<uint32_t, uint32_t> first_bucket_bits(size_t b) const;
  size_t message_size() const;
  void read_histogram(std::span<const uint8_t> all, int ranks);
  void read_final(std::span<const uint8_t> all, int ranks);

  std::span<const float> logits_;
  int32_t first_token_ = 0;
  float max_logit_ = 0.0f;
  uint64_t top_p_fixed_ = 0;  // top_p in units of 2^-32
  // The cut lies in keys [lo_, hi_]; `before_` is the mass of the tokens above hi_, `target_` the mass to reach.
  uint64_t lo_ = 0;
  uint64_t hi_ = 0;
  int shift_ = 0;  // a bucket spans 2^shift_ keys
  Mass before_ = 0;
  Mass target_ = 0;
  int round_ = 0;
  bool final_ = false;  // this round sends the tokens themselves
  bool done_ = false;
  uint64_t cut_ = 0;
  float cut_logit_ = 0.0f;  // cut_ as a logit and a token
  int32_t cut_token_ = 0;
  std::vector<Item> active_;  // this rank's tokens in [lo_, hi_] with a mass (from the second round on)
  std::vector<uint32_t> counts_;
  std::vector<Mass> masses_;
  std::vector<uint64_t> lows_;  // a key round's lowest and highest key of each bucket
  std::vector<uint64_t> highs_;
  std::vector<Item> items_;
  std::vector<uint8_t> message_;
};

}  // namespace tessera
