// Share arithmetic: cumulative rounding, so the parts of any unit count add up exactly and keep rank order.
#include "model/shard.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <sstream>
#include <tuple>

#include "util/error.h"

namespace tessera {

std::pair<int64_t, int64_t> share_range(int64_t units, const ShardSpec& spec, const std::string& what,
                                        bool allow_empty) {
  if (spec.n_ranks < 1 || spec.rank < 0 || spec.rank >= spec.n_ranks) {
    fail("rank {} of {} is not a valid rank", spec.rank, spec.n_ranks);
  }
  std::vector<double> shares = spec.shares;
  if (shares.empty()) shares.assign(static_cast<size_t>(spec.n_ranks), 1.0);
  if (static_cast<int>(shares.size()) != spec.n_ranks) {
    fail("{} shares for {} ranks", shares.size(), spec.n_ranks);
  }
  const double total = std::accumulate(shares.begin(), shares.end(), 0.0);
  auto edge = [&](int r) {
    const double before = std::accumulate(shares.begin(), shares.begin() + r, 0.0);
    return static_cast<int64_t>(std::llround(static_cast<double>(units) * before / total));
  };
  const int64_t begin = edge(spec.rank);
  const int64_t end = edge(spec.rank + 1);
  if (end <= begin && !allow_empty) {
    fail("{} cannot be split over {} ranks with these shares: rank {} would get none of its {}", what, spec.n_ranks,
         spec.rank, units);
  }
  return {begin, end};
}

std::vector<ExpertPiece> expert_pieces(int64_t n_expert, int64_t units, const ShardSpec& spec,
                                       const std::string& what) {
  const auto [u0, u1] = share_range(units, spec, what, true);
  std::vector<double> shares = spec.shares;
  if (shares.empty()) shares.assign(static_cast<size_t>(spec.n_ranks), 1.0);
  const double want = static_cast<double>(units) * shares[static_cast<size_t>(spec.rank)] /
                      std::accumulate(shares.begin(), shares.end(), 0.0);
  std::vector<ExpertPiece> out;
  // Within a tenth of the share (64 f32 rows over 3 ranks: 21/22/21), the contiguous cut is fair enough.
  if (std::fabs(static_cast<double>(u1 - u0) - want) <= 0.1 * want) {
    for (int64_t e = 0; e < n_expert; ++e) out.push_back({e, u0, u1 - u0});
    return out;
  }
  const bool equal = std::all_of(shares.begin(), shares.end(), [&](double s) { return s == shares.front(); });
  const int64_t ranks = spec.n_ranks, own = units / ranks, left = units % ranks;
  if (equal && own >= 1 && left >= 1 && 2 * (own + left) * ranks <= 3 * units) {
    for (int64_t e = 0; e < n_expert; ++e) {
      for (int64_t b = spec.rank * own; b < (spec.rank + 1) * own; ++b) out.push_back({e, b, 1});
      for (int64_t j = 0; j < left; ++j) out.push_back({e, ranks * own + j, 1, static_cast<int>(j)});
    }
    return out;
  }
  const auto [j0, j1] = share_range(n_expert * units, spec, what);
  for (int64_t j = j0; j < j1; ++j) out.push_back({j % n_expert, j / n_expert, 1});
  std::sort(out.begin(), out.end(), [](const ExpertPiece& a, const ExpertPiece& b) {
    return std::tie(a.expert, a.first) < std::tie(b.expert, b.first);
  });
  return out;
}

ExpertHolders::ExpertHolders(int64_t n_expert, const ShardSpec& spec, const std::string& what) {
  const int n = spec.n_ranks;
  if (!(spec.ep_redundancy >= 0.0 && spec.ep_redundancy <= 1.0)) {
    fail("--ep-redundancy {}: a fraction from 0 to 1 of a rank's experts", spec.ep_redundancy);
  }
  std::vector<double> shares = spec.shares;
  if (shares.empty()) shares.assign(static_cast<size_t>(n), 1.0);
  const double mean = std::accumulate(shares.begin(), shares.end(), 0.0) / n;
  std::vector<std::vector<int>> holders(static_cast<size_t>(n_expert));
  held_.resize(static_cast<size_t>(n));
  for (int r = 0; r < n; ++r) {
    ShardSpec one = spec;
    one.rank = r;
    const auto [e0, e1] = share_range(n_expert, one, what);
    const int64_t extra =
        std::min<int64_t>(n_expert - (e1 - e0), std::llround(spec.ep_redundancy * static_cast<double>(e1 - e0)));
    own_.push_back(e1 - e0);
    cost_.push_back(mean / shares[static_cast<size_t>(r)]);
    auto& mine = held_[static_cast<size_t>(r)];
    for (int64_t e = e0; e < e1 + extra; ++e) mine.push_back(e % n_expert);
    std::sort(mine.begin(), mine.end());
    for (int64_t e : mine) holders[static_cast<size_t>(e)].push_back(r);
    redundant_ = redundant_ || extra > 0;
  }
  start_.push_back(0);
  for (const auto& h : holders) {
    ranks_.insert(ranks_.end(), h.begin(), h.end());
    start_.push_back(static_cast<int32_t>(ranks_.size()));
  }
}

void ExpertHolders::deal(const int64_t* picks, int64_t k, std::vector<double>& load, int* out) const {
  // The picks only one rank holds first: the others then fill around them.
  for (int64_t i = 0; i < k; ++i) {
    const auto e = static_cast<size_t>(picks[i]);
    out[i] = -1;
    if (start_[e + 1] - start_[e] == 1) {
      out[i] = ranks_[static_cast<size_t>(start_[e])];
      load[static_cast<size_t>(out[i])] += cost_[static_cast<size_t>(out[i])];
    }
  }
  for (int64_t i = 0; i < k; ++i) {
    if (out[i] >= 0) continue;
    const auto e = static_cast<size_t>(picks[i]);
    int best = -1;
    double best_after = 0;
    for (int32_t j = start_[e]; j < start_[e + 1]; ++j) {
      const int r = ranks_[static_cast<size_t>(j)];
      const double after = load[static_cast<size_t>(r)] + cost_[static_cast<size_t>(r)];
      if (best < 0 || after < best_after) {
        best = r;
        best_after = after;
      }
    }
    out[i] = best;
    load[static_cast<size_t>(best)] = best_after;
  }
}

std::vector<double> parse_shares(const std::string& text, int n_ranks) {
  std::vector<double> out;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    char* end = nullptr;
    const double v = std::strtod(item.c_str(), &end);
    if (item.empty() || end == item.c_str() || *end != '\0' || !(v > 0.0) || !std::isfinite(v)) {
      fail("--tp-shares: '{}' is not a positive number (expected one share per rank, like 2,1,1)", item);
    }
    out.push_back(v);
  }
  if (static_cast<int>(out.size()) != n_ranks) {
    fail("--tp-shares gives {} shares for {} ranks (one per rank, like 2,1,1)", out.size(), n_ranks);
  }
  return out;
}

}  // namespace tessera
