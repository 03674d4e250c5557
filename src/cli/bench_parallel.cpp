// The collective meter and the per-token arithmetic of bench --check-plan under --tp/--ep.
#include "cli/bench_parallel.h"

#include <fmt/format.h>

#include <numeric>

#include "engine/local_executor.h"

namespace tessera {

WireCounter CollectiveMeter::counter() {
  return [this](const Executor& e) -> std::optional<uint64_t> {
    const auto* local = dynamic_cast<const LocalExecutor*>(&e);
    if (local == nullptr || local->communicator() == nullptr) return std::nullopt;
    const auto& st = local->communicator()->stats();
    // The first call is run_benchmarks' check; then each timed run calls before and after.
    if (!checked_) {
      checked_ = true;
    } else if (start_) {
      timed_ += st.seconds - *start_;
      start_.reset();
    } else {
      start_ = st.seconds;
    }
    return st.bytes;
  };
}

double CollectiveMeter::take() {
  const double t = timed_;
  timed_ = 0;
  return t;
}

std::optional<std::string> parallel_check_arithmetic(const plan::Strategy& s, const BenchResult& r,
                                                     double collective_seconds) {
  const BenchTest& t = r.timing.test;
  if (!s.is_parallel() || !s.feasible || t.n_prompt > 0 || t.n_seq != 1 || t.n_gen <= 0) return std::nullopt;
  const double ns = std::accumulate(r.timing.samples_ns.begin(), r.timing.samples_ns.end(), 0.0);
  const double tokens = static_cast<double>(t.n_tokens()) * static_cast<double>(r.timing.samples_ns.size());
  if (tokens <= 0 || ns <= 0) return std::nullopt;
  const double token_s = ns / 1e9 / tokens;
  const double coll_s = collective_seconds / tokens;
  const plan::GroupPass& d = s.parallel.front().decode;
  const double shard_s = d.ranks[d.slowest].t.total();
  return fmt::format(
      "{} x{} {}: measured {:.2f} ms per token = {:.2f} ms in rank 0's shard + {:.2f} ms in collectives; predicted "
      "{:.2f} ms = {:.2f} ms slowest shard + {:.2f} ms collectives",
      plan::parallel_mode_name(s.parallel.front().mode), s.parallel.front().nodes.size(), t.name(), token_s * 1e3,
      (token_s - coll_s) * 1e3, coll_s * 1e3, 1e3 / s.pred.decode_tps_1, shard_s * 1e3, d.collectives.total() * 1e3);
}

}  // namespace tessera
