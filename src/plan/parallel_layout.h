// What each rank of a tensor/expert-parallel group holds of every layer, and how many all-reduces a forward pass
// makes: the cuts of src/model/model_shard.cpp (whole KV-head groups, FFN rows in whole quant blocks, whole experts,
// vocabulary rows), computed with the runtime's own share_range, so uneven shares and counts that do not divide
// (8 KV heads over 3 ranks: 3/2/3) come out as the run will hold them.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "model/shard.h"
#include "plan/model_shape.h"

namespace tessera::plan {

enum class ParallelMode {
  Tensor,        // --tp N: heads, FFN rows, every expert's rows and the vocabulary split
  Expert,        // --ep N: whole experts per rank; attention, router and dense FFN whole on every rank
  TensorExpert,  // --tp N --ep N: attention and FFN split as --tp, experts whole as --ep
};
// "tensor parallel", "expert parallel", "tensor+expert parallel"
std::string_view parallel_mode_name(ParallelMode m);
// "--tp 3", "--ep 3", "--tp 3 --ep 3", and " --ep-redundancy F" under --ep when F is not the default
std::string parallel_flags(ParallelMode m, int ranks, double ep_redundancy = kDefaultEpRedundancy);

// Fractions of each layer's parts one rank holds and computes.
struct RankShare {
  std::vector<double> q;             // query heads (q, attention output, attention FLOPs)
  std::vector<double> kv;            // KV heads (k, v, the KV cache and its reads)
  std::vector<double> ffn;           // dense FFN rows
  std::vector<double> experts;       // every expert's rows (Tensor), or the experts held whole (Expert, TensorExpert)
  std::vector<double> experts_held;  // of them held, where more than run (blocks every rank holds, dealt per token)
  double vocab = 1;                  // output head rows
};

struct ParallelLayout {
  ParallelMode mode = ParallelMode::Tensor;
  int ranks = 1;
  std::vector<double> shares;  // --tp-shares; empty: equal
  double ep_redundancy = 0;    // --ep-redundancy: copies of other ranks' experts (ExpertHolders)
  std::vector<RankShare> rank;
  std::vector<int> reduces;  // all-reduces per layer per forward pass (the same on every rank)
  // Expert parallel: a token's k experts fall unevenly over the ranks and every rank waits for the busiest. This is
  // E[the busiest rank's picks] / (the picks of the rank with the most experts, on average) for one token (exact,
  // from the hypergeometric distribution); a batch of b tokens evens out as 1 + (x - 1) / sqrt(b). With copies of
  // experts (ep_redundancy), E[max over ranks of its dealt picks / its expected picks], over draws dealt as the
  // runtime deals them.
  double expert_imbalance = 1;
  std::string cuts;  // "KV heads 3/2/3 of 8, FFN rows 9984/9728/9856 of 29568, vocab ..."

  bool whole_experts() const { return mode != ParallelMode::Tensor; }
  int reduces_per_pass() const;
};

// Throws Error with the runtime's message when a rank would hold none of what it must (an expert, a vocabulary
// row, an attention unit under uneven shares).
ParallelLayout parallel_layout(const ModelCost& m, ParallelMode mode, int ranks, const std::vector<double>& shares,
                               double ep_redundancy = kDefaultEpRedundancy);

// E[max over ranks of the picks that land on the rank] when one token picks k of the experts (sizes: experts per
// rank), without replacement.
double expected_busiest_picks(const std::vector<int64_t>& experts_per_rank, int64_t k);

// E[max over ranks of (the picks ExpertHolders::deal gives the rank) / (k x its share of the experts)] when one
// token picks k experts uniformly without replacement: over `draws` draws of a fixed generator, so the same on
// every call.
double expected_dealt_imbalance(const ExpertHolders& holders, int64_t k, int draws = 4096);

}  // namespace tessera::plan
