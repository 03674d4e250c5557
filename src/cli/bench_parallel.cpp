// The per-token arithmetic of bench --check-plan under --tp/--ep.
#include "cli/bench_parallel.h"

#include <fmt/format.h>

#include <numeric>

namespace tessera {

std::optional<std::string> parallel_check_arithmetic(const plan::Strategy& s, const BenchResult& r) {
  const BenchTest& t = r.timing.test;
  if (!s.is_parallel() || !s.feasible || t.n_prompt > 0 || t.n_seq != 1 || t.n_gen <= 0) return std::nullopt;
  if (!r.timing.collectives) return std::nullopt;
  const double ns = std::accumulate(r.timing.samples_ns.begin(), r.timing.samples_ns.end(), 0.0);
  const double tokens = static_cast<double>(t.n_tokens()) * static_cast<double>(r.timing.samples_ns.size());
  if (tokens <= 0 || ns <= 0) return std::nullopt;
  const double token_s = ns / 1e9 / tokens;
  const double coll_s = r.timing.collectives->seconds;
  const plan::GroupPass& d = s.parallel.front().decode;
  const double shard_s = d.ranks[d.slowest].t.total();
  return fmt::format(
      "{} x{} {}: measured {:.2f} ms per token = {:.2f} ms in rank 0's shard + {:.2f} ms in collectives; predicted "
      "{:.2f} ms = {:.2f} ms slowest shard + {:.2f} ms collectives",
      plan::parallel_mode_name(s.parallel.front().mode), s.parallel.front().nodes.size(), t.name(), token_s * 1e3,
      (token_s - coll_s) * 1e3, coll_s * 1e3, 1e3 / s.pred.decode_tps_1, shard_s * 1e3, d.collectives.total() * 1e3);
}

}  // namespace tessera
