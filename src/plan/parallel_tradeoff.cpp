// The sentence that says why a tensor/expert-parallel row wins or loses: what its collectives cost per decoded
// token against what its shares save on the row it would replace.
#include <fmt/format.h>

#include "plan/collective_model.h"
#include "plan/plan_explain.h"

namespace tessera::plan {
namespace {

// The fastest row for one stream that is not a group (local, one node, a pipeline): what a group replaces.
const Strategy* reference_row(const Plan& plan) {
  const Strategy* ref = nullptr;
  for (const auto& s : plan.strategies) {
    const bool plain =
        s.kind == StrategyKind::Local || s.kind == StrategyKind::Single || s.kind == StrategyKind::Pipeline;
    if (!plain || !s.feasible || s.pred.decode_tps_1 <= 0) continue;
    if (!ref || s.pred.decode_tps_1 > ref->pred.decode_tps_1) ref = &s;
  }
  return ref;
}

// "0.21 ms RTT, 9.4 Gbit/s (local <-> b)" or "measured at start".
std::string link_text(const CollectiveProfile& c) {
  if (c.measured()) return "measured at start";
  const std::string pair = c.link_pair.empty() ? "" : fmt::format(", {}", c.link_pair);
  return fmt::format("{} RTT, {:.3g} Gbit/s{}", seconds_text(c.link_rtt_s), c.link_bytes_per_s * 8 / 1e9, pair);
}

}  // namespace

void explain_tradeoffs(Plan& plan) {
  const Strategy* row = reference_row(plan);
  if (row == nullptr) return;
  const double ref_token = 1.0 / row->pred.decode_tps_1;
  // "local", "b alone", "pipeline x2"
  const std::string ref = row->kind == StrategyKind::Single ? row->nodes.front() + " alone" : row->name;
  for (auto& s : plan.strategies) {
    if (!s.is_parallel() || !s.feasible || s.pred.decode_tps_1 <= 0) continue;
    const double token = 1.0 / s.pred.decode_tps_1;
    double collectives = 0;
    int reduces = 0, others = 0;
    for (const auto& g : s.parallel) {
      collectives += g.decode.collectives.total();
      reduces += g.decode.all_reduces;
      others += g.decode.other_collectives;
    }
    const ParallelStage& g = s.parallel.front();
    const double shards = token - collectives;  // the slowest ranks' shares (and any hops)
    const double saved = ref_token - shards;
    const std::string cost =
        fmt::format("{} all-reduces x {} ({}) + {} small collectives = {} per token", reduces,
                    seconds_text(g.decode.all_reduce_s), link_text(g.collectives), others, seconds_text(collectives));
    const bool wins = token < ref_token;
    if (saved <= 0) {
      s.why +=
          fmt::format(" Loses to {}: {}, and the shares save nothing on its {} per token (the slowest rank takes {}).",
                      ref, cost, seconds_text(ref_token), seconds_text(shards));
    } else {
      s.why += fmt::format(" {} {}: {} {} the {} its shares save on {}'s {} per token.", wins ? "Beats" : "Loses to",
                           ref, cost, wins ? "<" : ">", seconds_text(saved), ref, seconds_text(ref_token));
    }
  }
}

}  // namespace tessera::plan
