// Share arithmetic: cumulative rounding, so the parts of any unit count add up exactly and keep rank order.
#include "model/shard.h"

#include <cmath>
#include <numeric>
#include <sstream>

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
