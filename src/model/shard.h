// How one rank's share of the model is cut for tensor parallelism (each layer's attention heads, FFN rows and
// vocabulary split over the ranks, Megatron-style) and expert parallelism (whole experts per rank).
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace tessera {

struct ShardSpec {
  int rank = 0;
  int n_ranks = 1;
  std::vector<double> shares;  // one weight per rank (--tp-shares 2,1,1); empty: equal
  bool tp = true;              // split attention heads and FFN rows; false: every rank holds them whole
  bool ep = false;             // MoE: whole experts per rank instead of a share of every expert's rows
  double ep_redundancy = 0;    // --ep: copies of this x its own count of experts held besides (ExpertHolders)

  bool sharded() const { return n_ranks > 1; }
};

// Rank spec.rank's part [begin, end) of `units` units, in proportion to the shares (rounded so the parts tile
// [0, units) in rank order). Throws Error when a rank would get none, unless allow_empty.
std::pair<int64_t, int64_t> share_range(int64_t units, const ShardSpec& spec, const std::string& what,
                                        bool allow_empty = false);

// A piece of one expert's FFN that a rank holds under --tp: quant blocks [first, first + count) of its rows (gate,
// up) and of the down projection's columns.
struct ExpertPiece {
  int64_t expert;
  int64_t first;
  int64_t count;
  int shared = -1;  // >= 0: a block every rank holds (the shared-th of the expert's blocks left over by an even
                    // cut); which rank runs it for a routed token is dealt in turn (shared_piece_rank)
};

// Rank spec.rank's pieces of n_expert experts of `units` blocks each, by expert. When the blocks divide among the
// ranks as the shares ask (to a tenth of a rank's share), one contiguous piece of every expert. Otherwise (768 rows = 3
// Q4_K blocks over 2 ranks) a contiguous split would give one rank twice the other's work for every token; the blocks
// are dealt one at a time instead, in block-major order (block 0 of every expert, then block 1, ...), so each rank's
// share of a token's routed work follows the shares on average. With equal shares and at least one block a rank,
// every rank holds units / n_ranks blocks of each expert and all ranks hold the units % n_ranks left over, which
// are dealt per routed token (shared_piece_rank): every token's expert work is then split evenly, not just on
// average, for at most 1.5x the memory of an even split (3 blocks over 2 ranks: 2 held, 1.5 run). Every piece then
// has the same width (one block).
std::vector<ExpertPiece> expert_pieces(int64_t n_expert, int64_t units, const ShardSpec& spec, const std::string& what);

// The rank that runs shared block `shared` (of `n_shared` per expert) for the `pair`-th routed (token, expert) pair
// of a batch (token t's i-th chosen expert is pair t * k + i): in turn, so a token's k experts share them evenly.
inline int shared_piece_rank(int64_t pair, int shared, int n_shared, int n_ranks) {
  return static_cast<int>((pair * n_shared + shared) % n_ranks);
}

// --ep-redundancy's default: half again a rank's experts, the memory the shared blocks of --tp may also take.
inline constexpr double kDefaultEpRedundancy = 0.5;

// Under --ep, which ranks hold which experts. Rank r holds its own experts (share_range) and, with redundancy f > 0,
// copies of the round(f x own) experts after them (cyclically: the next rank's first ones). A token's picks are then
// dealt (deal): a pick held once goes to its rank, the others to whichever holder has done the least, so a token's
// k experts split evenly over the ranks in almost every draw instead of only on average (8 of 128 over 2 ranks:
// 4/4 28% of the time with one copy of each expert, 95% with f = 0.5).
class ExpertHolders {
 public:
  ExpertHolders(int64_t n_expert, const ShardSpec& spec, const std::string& what);

  int64_t n_expert() const { return static_cast<int64_t>(start_.size()) - 1; }
  int n_ranks() const { return static_cast<int>(held_.size()); }
  bool redundant() const { return redundant_; }
  // The experts rank r holds, ascending; its own ones (those only it runs when nothing is copied).
  const std::vector<int64_t>& held(int rank) const { return held_[static_cast<size_t>(rank)]; }
  int64_t own(int rank) const { return own_[static_cast<size_t>(rank)]; }
  // Deals one token's k picks: out[i] is the rank that runs expert picks[i]. `load` (one per rank, zeroed by the
  // caller for each batch) adds up each rank's work over its share, so a batch evens out too. The same inputs give
  // the same deal on every rank.
  void deal(const int64_t* picks, int64_t k, std::vector<double>& load, int* out) const;

 private:
  std::vector<std::vector<int64_t>> held_;
  std::vector<int64_t> own_;
  std::vector<double> cost_;            // one pick's work on a rank: 1 / its share (mean share 1)
  std::vector<int32_t> start_, ranks_;  // expert e's holders: ranks_[start_[e] .. start_[e + 1])
  bool redundant_ = false;
};

// "2,1,1" -> {2, 1, 1}; checks the count against the ranks and that every share is positive.
std::vector<double> parse_shares(const std::string& text, int n_ranks);

}  // namespace tessera
