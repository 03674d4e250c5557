// Each rank's share of every layer, cut as ModelWeights::sharded cuts it (src/model/model_shard.cpp), and the
// collectives a pass makes, as Stage::forward makes them (src/model/stage.cpp).
#include "plan/parallel_layout.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <numeric>
#include <random>

#include "model/shard.h"
#include "util/error.h"

namespace tessera::plan {
namespace {

// A column count cut in whole blocks, as model_shard.cpp's column_share: some ranks may hold none.
std::pair<int64_t, int64_t> column_share(int64_t cols, int64_t block, const ShardSpec& spec, const std::string& what) {
  const int64_t bs = std::max<int64_t>(block, 1);
  const int64_t units = (cols + bs - 1) / bs;
  const auto [u0, u1] = share_range(units, spec, what, units < spec.n_ranks);
  return {std::min(cols, u0 * bs), std::min(cols, u1 * bs)};
}

std::string counts_text(const std::vector<int64_t>& counts, int64_t of) {
  std::string out;
  for (size_t i = 0; i < counts.size(); ++i) out += fmt::format("{}{}", i == 0 ? "" : "/", counts[i]);
  return fmt::format("{} of {}", out, of);
}

double log_choose(double n, double k) { return std::lgamma(n + 1) - std::lgamma(k + 1) - std::lgamma(n - k + 1); }

}  // namespace

std::string_view parallel_mode_name(ParallelMode m) {
  switch (m) {
    case ParallelMode::Tensor:
      return "tensor parallel";
    case ParallelMode::Expert:
      return "expert parallel";
    case ParallelMode::TensorExpert:
      return "tensor+expert parallel";
  }
  return "?";
}

std::string parallel_flags(ParallelMode m, int ranks, double ep_redundancy) {
  const std::string copies =
      ep_redundancy == kDefaultEpRedundancy ? std::string() : fmt::format(" --ep-redundancy {:g}", ep_redundancy);
  switch (m) {
    case ParallelMode::Tensor:
      return fmt::format("--tp {}", ranks);
    case ParallelMode::Expert:
      return fmt::format("--ep {}{}", ranks, copies);
    case ParallelMode::TensorExpert:
      return fmt::format("--tp {} --ep {}{}", ranks, ranks, copies);
  }
  return "";
}

int ParallelLayout::reduces_per_pass() const { return std::accumulate(reduces.begin(), reduces.end(), 0); }

double expected_busiest_picks(const std::vector<int64_t>& experts_per_rank, int64_t k) {
  const int64_t n = std::accumulate(experts_per_rank.begin(), experts_per_rank.end(), int64_t{0});
  if (k <= 0 || n <= 0 || k > n) return 0;
  const double all = log_choose(static_cast<double>(n), static_cast<double>(k));
  // P(max <= m) = [x^k] prod_r sum_{c <= min(m, n_r)} C(n_r, c) x^c / C(n, k); E[max] = sum_m P(max > m).
  double expected = 0;
  for (int64_t m = 0; m < k; ++m) {
    std::vector<double> ways(static_cast<size_t>(k + 1), 0.0);
    ways[0] = 1.0;
    for (int64_t nr : experts_per_rank) {
      std::vector<double> next(ways.size(), 0.0);
      for (int64_t have = 0; have <= k; ++have) {
        if (ways[static_cast<size_t>(have)] == 0) continue;
        for (int64_t c = 0; c <= std::min({m, nr, k - have}); ++c) {
          next[static_cast<size_t>(have + c)] +=
              ways[static_cast<size_t>(have)] * std::exp(log_choose(static_cast<double>(nr), static_cast<double>(c)));
        }
      }
      ways = std::move(next);
    }
    expected += 1.0 - std::min(1.0, ways[static_cast<size_t>(k)] / std::exp(all));
  }
  return expected;
}

double expected_dealt_imbalance(const ExpertHolders& holders, int64_t k, int draws) {
  const int64_t n = holders.n_expert();
  const int ranks = holders.n_ranks();
  if (k <= 0 || k > n || draws <= 0) return 1;
  std::mt19937_64 rng(0x7e55e7a);
  std::vector<int64_t> experts(static_cast<size_t>(n));
  std::vector<double> load(static_cast<size_t>(ranks));
  std::vector<int> dealt(static_cast<size_t>(k));
  std::vector<int64_t> picks(static_cast<size_t>(k));
  double sum = 0;
  for (int d = 0; d < draws; ++d) {
    std::iota(experts.begin(), experts.end(), 0);
    for (int64_t i = 0; i < k; ++i) {  // the first k of a shuffle
      const auto j = i + static_cast<int64_t>(rng() % static_cast<uint64_t>(n - i));
      std::swap(experts[static_cast<size_t>(i)], experts[static_cast<size_t>(j)]);
      picks[static_cast<size_t>(i)] = experts[static_cast<size_t>(i)];
    }
    std::fill(load.begin(), load.end(), 0.0);
    holders.deal(picks.data(), k, load, dealt.data());
    std::vector<int64_t> count(static_cast<size_t>(ranks), 0);
    for (int r : dealt) ++count[static_cast<size_t>(r)];
    double most = 0;
    for (int r = 0; r < ranks; ++r) {
      const double expected = static_cast<double>(k * holders.own(r)) / static_cast<double>(n);
      most = std::max(most, static_cast<double>(count[static_cast<size_t>(r)]) / expected);
    }
    sum += most;
  }
  return std::max(1.0, sum / draws);
}

ParallelLayout parallel_layout(const ModelCost& m, ParallelMode mode, int ranks, const std::vector<double>& shares,
                               double ep_redundancy) {
  const ModelConfig& c = m.config;
  if (ranks < 2) fail("internal: a parallel layout needs at least two ranks");
  if (mode != ParallelMode::Tensor && c.n_expert == 0) fail("{}: expert parallelism needs a MoE model", m.label);
  ParallelLayout out;
  out.mode = mode;
  out.ranks = ranks;
  out.shares = shares;
  const bool tp = mode != ParallelMode::Expert;
  const bool ep = mode != ParallelMode::Tensor;
  out.ep_redundancy = ep ? ep_redundancy : 0.0;
  std::shared_ptr<const ExpertHolders> holders;  // the layers' (the MoE layers all have the same experts)
  const bool gemma = arch_info(c.arch).gemma;
  out.rank.resize(static_cast<size_t>(ranks));
  std::vector<int64_t> kv0(static_cast<size_t>(ranks)), ff0(kv0), ex0(kv0), voc(kv0);
  bool attn0 = false;
  for (int r = 0; r < ranks; ++r) {
    ShardSpec spec;
    spec.rank = r;
    spec.n_ranks = ranks;
    spec.shares = shares;
    spec.tp = tp;
    spec.ep = ep;
    spec.ep_redundancy = out.ep_redundancy;
    RankShare& sh = out.rank[static_cast<size_t>(r)];
    for (int64_t il = 0; il < m.n_layer(); ++il) {
      const LayerShape s = c.layer(il);
      const LayerCost& l = m.layers[static_cast<size_t>(il)];
      const std::string where = fmt::format("layer {}", il);
      double fq = 1, fkv = 1, fff = 1, fex = 1, held = 1;
      bool split = false;
      if (tp && s.n_head_kv > 0) {
        const int64_t group = s.n_head / s.n_head_kv;
        const int64_t bs = std::max<int64_t>(l.wo_block, 1);
        const int64_t unit = bs / std::gcd(bs, std::max<int64_t>(s.head_dim_v, 1));
        const auto fits = [&](int64_t step) { return s.n_head % step == 0 && s.n_head / step >= ranks; };
        int64_t step = std::lcm(unit, group);
        if (!fits(step)) step = unit;
        split = fits(step);
        if (split) {
          const auto [u0, u1] = share_range(s.n_head / step, spec, where + "'s attention heads");
          const int64_t q0 = u0 * step, q1 = u1 * step;
          const int64_t k0 = q0 / group, k1 = (q1 - 1) / group + 1;
          fq = static_cast<double>(q1 - q0) / static_cast<double>(s.n_head);
          fkv = static_cast<double>(k1 - k0) / static_cast<double>(s.n_head_kv);
          if (il == 0) kv0[static_cast<size_t>(r)] = k1 - k0;
        }
        if (s.n_ff > 0) {
          const auto [f0, f1] = column_share(s.n_ff, l.ffn_down_block, spec, where + "'s FFN");
          fff = static_cast<double>(f1 - f0) / static_cast<double>(s.n_ff);
          if (il == 0) ff0[static_cast<size_t>(r)] = f1 - f0;
        }
      }
      if (s.moe && s.n_expert > 0) {
        if (ep) {
          const auto [e0, e1] = share_range(s.n_expert, spec, where + "'s experts");
          fex = held = static_cast<double>(e1 - e0) / static_cast<double>(s.n_expert);
          if (spec.ep_redundancy > 0) {
            if (!holders || holders->n_expert() != s.n_expert) {
              holders = std::make_shared<const ExpertHolders>(s.n_expert, spec, where + "'s experts");
            }
            held = static_cast<double>(holders->held(r).size()) / static_cast<double>(s.n_expert);
          }
          if (il == 0 || ex0[static_cast<size_t>(r)] == 0) ex0[static_cast<size_t>(r)] = e1 - e0;
        } else {
          // As ModelWeights::sharded: pieces of whole blocks (expert_pieces), or a share of a partial block's rows.
          const int64_t bs = std::max<int64_t>(l.exp_down_block, 1);
          int64_t rows = 0;  // of all experts together
          double run = 0;    // of those, what the rank runs per routed token (a shared block: 1 / ranks of them)
          if (s.n_ff_exp % bs == 0) {
            for (const ExpertPiece& p : expert_pieces(s.n_expert, s.n_ff_exp / bs, spec, where + "'s expert FFN")) {
              rows += p.count * bs;
              run += static_cast<double>(p.count * bs) / (p.shared >= 0 ? spec.n_ranks : 1);
            }
          } else {
            const auto [f0, f1] = column_share(s.n_ff_exp, l.exp_down_block, spec, where + "'s expert FFN");
            rows = (f1 - f0) * s.n_expert;
            run = static_cast<double>(rows);
          }
          fex = run / static_cast<double>(s.n_ff_exp * s.n_expert);
          held = static_cast<double>(rows) / static_cast<double>(s.n_ff_exp * s.n_expert);
          if (il == 0 || ex0[static_cast<size_t>(r)] == 0) ex0[static_cast<size_t>(r)] = rows / s.n_expert;
        }
      }
      sh.q.push_back(fq);
      sh.kv.push_back(fkv);
      sh.ffn.push_back(fff);
      sh.experts.push_back(fex);
      sh.experts_held.push_back(held);
      if (r == 0) {
        if (il == 0) attn0 = split;
        // As Stage::forward: one after attention when its heads are split; after the FFN, one for a dense FFN
        // under --tp, one for the experts under either; Gemma 4's MoE layers also sum their dense MLP under --tp.
        int n = split ? 1 : 0;
        if (s.moe) {
          n += 1 + (gemma && tp && s.n_ff > 0 ? 1 : 0);
        } else if (tp) {
          n += 1;
        }
        out.reduces.push_back(n);
      }
    }
    ShardSpec vspec;
    vspec.rank = r;
    vspec.n_ranks = ranks;
    vspec.shares = shares;
    const auto [v0, v1] = share_range(c.n_vocab, vspec, "the vocabulary");
    sh.vocab = static_cast<double>(v1 - v0) / static_cast<double>(c.n_vocab);
    voc[static_cast<size_t>(r)] = v1 - v0;
  }
  std::vector<std::string> parts;
  if (tp) {
    const LayerShape s0 = c.layer(0);
    parts.push_back(attn0 ? fmt::format("KV heads {}", counts_text(kv0, s0.n_head_kv))
                          : std::string("attention whole on every rank"));
    if (s0.n_ff > 0) parts.push_back(fmt::format("FFN rows {}", counts_text(ff0, s0.n_ff)));
  }
  if (c.n_expert > 0) {
    parts.push_back(ep ? fmt::format("experts {}", counts_text(ex0, c.n_expert))
                       : fmt::format("expert rows {}", counts_text(ex0, c.n_ff_exp)));
    if (holders && holders->redundant()) {
      std::vector<int64_t> copies;
      for (int r = 0; r < ranks; ++r) {
        copies.push_back(static_cast<int64_t>(holders->held(r).size()) - holders->own(r));
      }
      std::string text;
      for (size_t i = 0; i < copies.size(); ++i) text += fmt::format("{}{}", i == 0 ? "" : "/", copies[i]);
      parts.push_back(fmt::format("copies of the next rank's {} (dealt per token)", text));
    }
  }
  parts.push_back(fmt::format("vocab {}", counts_text(voc, c.n_vocab)));
  for (size_t i = 0; i < parts.size(); ++i) out.cuts += (i == 0 ? "" : ", ") + parts[i];
  if (ep) {
    const int64_t most = *std::max_element(ex0.begin(), ex0.end());
    const double mean_most =
        static_cast<double>(c.n_expert_used) * static_cast<double>(most) / static_cast<double>(c.n_expert);
    out.expert_imbalance = mean_most > 0 ? std::max(1.0, expected_busiest_picks(ex0, c.n_expert_used) / mean_most) : 1;
    if (holders && holders->redundant()) out.expert_imbalance = expected_dealt_imbalance(*holders, c.n_expert_used);
  }
  return out;
}

}  // namespace tessera::plan
