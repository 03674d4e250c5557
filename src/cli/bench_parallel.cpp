// The per-token arithmetic of bench --check-plan under --tp/--ep, and under --pp.
#include "cli/bench_parallel.h"

#include <fmt/format.h>

#include <numeric>

namespace tessera {

namespace {

// Under --pp rank 0 leads the last stage: a token is its shard, its stage's collectives, and the wait for the stages
// before (their shards, collectives and the hops between them), against the planner's same terms.
std::string pipeline_arithmetic(const plan::Strategy& s, const BenchTest& t, double token_s, double coll_s,
                                double wait_s) {
  const std::string measured = fmt::format(
      "{} {}: measured {:.2f} ms per token = {:.2f} ms in rank 0's shard + {:.2f} ms in collectives + "
      "{:.2f} ms waiting for the stage before",
      s.name, t.name(), token_s * 1e3, (token_s - coll_s - wait_s) * 1e3, coll_s * 1e3, wait_s * 1e3);
  const double pred_s = 1.0 / s.pred.decode_tps_1;
  if (!s.is_parallel()) return fmt::format("{}; predicted {:.2f} ms", measured, pred_s * 1e3);
  const plan::GroupPass& last = s.parallel.back().decode;
  const double shard_s = last.ranks[last.slowest].t.total();
  const double last_coll_s = last.collectives.total();
  return fmt::format(
      "{}; predicted {:.2f} ms = {:.2f} ms the last stage's slowest shard + {:.2f} ms its collectives + {:.2f} ms the "
      "stages before and the hops",
      measured, pred_s * 1e3, shard_s * 1e3, last_coll_s * 1e3, (pred_s - shard_s - last_coll_s) * 1e3);
}

}  // namespace

std::optional<std::string> parallel_check_arithmetic(const plan::Strategy& s, const BenchResult& r) {
  const BenchTest& t = r.timing.test;
  const bool piped = r.timing.pipeline_wait_s.has_value();
  if ((!s.is_parallel() && !piped) || !s.feasible || t.n_prompt > 0 || t.n_seq != 1 || t.n_gen <= 0) {
    return std::nullopt;
  }
  if (!r.timing.collectives) return std::nullopt;
  const double ns = std::accumulate(r.timing.samples_ns.begin(), r.timing.samples_ns.end(), 0.0);
  const double tokens = static_cast<double>(t.n_tokens()) * static_cast<double>(r.timing.samples_ns.size());
  if (tokens <= 0 || ns <= 0) return std::nullopt;
  const double token_s = ns / 1e9 / tokens;
  const double coll_s = r.timing.collectives->seconds;
  if (r.timing.pipeline_wait_s) return pipeline_arithmetic(s, t, token_s, coll_s, *r.timing.pipeline_wait_s);
  const plan::GroupPass& d = s.parallel.front().decode;
  const double shard_s = d.ranks[d.slowest].t.total();
  return fmt::format(
      "{} x{} {}: measured {:.2f} ms per token = {:.2f} ms in rank 0's shard + {:.2f} ms in collectives; predicted "
      "{:.2f} ms = {:.2f} ms slowest shard + {:.2f} ms collectives",
      plan::parallel_mode_name(s.parallel.front().mode), s.parallel.front().nodes.size(), t.name(), token_s * 1e3,
      (token_s - coll_s) * 1e3, coll_s * 1e3, 1e3 / s.pred.decode_tps_1, shard_s * 1e3, d.collectives.total() * 1e3);
}

}  // namespace tessera
