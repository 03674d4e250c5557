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

  bool sharded() const { return n_ranks > 1; }
};

// Rank spec.rank's part [begin, end) of `units` units, in proportion to the shares (rounded so the parts tile
// [0, units) in rank order). Throws Error when a rank would get none, unless allow_empty.
std::pair<int64_t, int64_t> share_range(int64_t units, const ShardSpec& spec, const std::string& what,
                                        bool allow_empty = false);

// "2,1,1" -> {2, 1, 1}; checks the count against the ranks and that every share is positive.
std::vector<double> parse_shares(const std::string& text, int n_ranks);

}  // namespace tessera
