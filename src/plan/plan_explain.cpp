// Explanations: one sentence per strategy built from the numbers behind its prediction, and the plan's decision.
#include "plan/plan_explain.h"

#include <algorithm>
#include <cctype>
#include <cmath>

#include "plan/collective_model.h"
#include "util/error.h"

namespace tessera::plan {
namespace {

std::string capitalized(std::string s) {
  if (!s.empty()) s[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(s[0])));
  return s;
}

std::string list_text(const std::vector<std::string>& items) {
  std::string out;
  for (const auto& i : items) out.append(out.empty() ? "" : ", ").append(i);
  return out;
}

// The range of effective read bandwidths over the strategy's nodes, "24 GB/s" or "19-24 GB/s".
std::string bandwidth_text(const Strategy& s, const Cluster& c, const CostModel& cm) {
  double lo = INFINITY, hi = 0;
  for (const auto& n : s.nodes) {
    const double r = cm.read_rate(*c.find(n)) / 1e9;
    lo = std::min(lo, r);
    hi = std::max(hi, r);
  }
  return std::abs(hi - lo) < 0.05 * hi ? fmt::format("{:.0f} GB/s", hi) : fmt::format("{:.0f}-{:.0f} GB/s", lo, hi);
}

// Network hops one decoded token makes round the ring (head -> first stage -> ... -> last stage -> head).
int ring_hops(const Strategy& s, const Cluster& c) {
  if (s.stages.empty()) return 0;
  int hops = 0;
  std::string at = c.head().name;
  for (const auto& st : s.stages) {
    hops += st.node != at;
    at = st.node;
  }
  return hops + (at != c.head().name);
}

double hop_ms(const Strategy& s, const Cluster& c) {
  double worst = 0;
  for (size_t i = 0; i < s.nodes.size(); ++i) {
    for (size_t j = 0; j < s.nodes.size(); ++j) {
      if (i != j) worst = std::max(worst, c.link(s.nodes[i], s.nodes[j]).rtt_s);
    }
    if (s.nodes[i] != c.head().name) worst = std::max(worst, c.link(s.nodes[i], c.head().name).rtt_s);
  }
  return worst / 2.0 * 1e3;
}

double min_link_gbit(const Strategy& s, const Cluster& c) {
  double lo = INFINITY;
  for (size_t i = 0; i + 1 < s.nodes.size(); ++i) lo = std::min(lo, c.link(s.nodes[i], s.nodes[i + 1]).gbit_per_s);
  for (const auto& n : s.nodes) {
    if (n != c.head().name) lo = std::min(lo, c.link(n, c.head().name).gbit_per_s);
  }
  return std::isfinite(lo) ? lo : 0.0;
}

// Totals over a parallel row's groups for one decoded token.
int all_reduces(const Strategy& s) {
  int n = 0;
  for (const auto& g : s.parallel) n += g.decode.all_reduces;
  return n;
}

// "14.3-14.6 GiB" or "14.6 GiB": what the ranks read per decoded token.
std::string rank_bytes_text(const Strategy& s) {
  double lo = INFINITY, hi = 0;
  for (const auto& g : s.parallel) {
    for (const auto& r : g.decode.ranks) {
      lo = std::min(lo, r.bytes);
      hi = std::max(hi, r.bytes);
    }
  }
  if (hi - lo < 0.05 * 1073741824.0) return gib_text(static_cast<uint64_t>(hi));
  return fmt::format("{:.1f}-{}", lo / 1073741824.0, gib_text(static_cast<uint64_t>(hi)));
}

// The ranks' read rates (shared with the other ranks of their machine), "34 GB/s" or "12-34 GB/s".
std::string rank_rate_text(const Strategy& s) {
  double lo = INFINITY, hi = 0;
  for (const auto& g : s.parallel) {
    for (double r : g.read_rate) {
      lo = std::min(lo, r / 1e9);
      hi = std::max(hi, r / 1e9);
    }
  }
  return std::abs(hi - lo) < 0.05 * hi ? fmt::format("{:.0f} GB/s", hi) : fmt::format("{:.0f}-{:.0f} GB/s", lo, hi);
}

std::string cause_text(const Strategy& s, const ModelCost& m, const Cluster& c, const CostModel& cm,
                       const Workload& w) {
  const Prediction& p = s.pred;
  const bool prefill = p.prefill_dominates;
  if (s.is_parallel() && !prefill) {
    const ParallelStage& g = s.parallel.front();
    switch (p.bottleneck) {
      case Bottleneck::MemoryBandwidth:
        return fmt::format("each rank streams its share of the weights, {} of {} per token, at ~{}", rank_bytes_text(s),
                           gib_text(m.decode_bytes_per_token()), rank_rate_text(s));
      case Bottleneck::LinkLatency:
        return fmt::format("{} all-reduces per token at ~{} each dominate", all_reduces(s),
                           seconds_text(g.collectives.latency_for(g.decode.all_reduce_bytes)));
      case Bottleneck::LinkBandwidth:
        return fmt::format("all-reduces of {} per token saturate the links ({:.2f} GB/s per all-reduced byte)",
                           bytes_text(g.decode.all_reduce_bytes * w.concurrency * all_reduces(s)),
                           g.collectives.seconds_per_byte_for(g.decode.all_reduce_bytes) > 0
                               ? 1e-9 / g.collectives.seconds_per_byte_for(g.decode.all_reduce_bytes)
                               : 0.0);
      case Bottleneck::Compute:
        break;
    }
  }
  switch (p.bottleneck) {
    case Bottleneck::MemoryBandwidth:
      if (prefill) {
        return fmt::format("prefill re-reads the weights for every {}-token micro-batch at ~{}", p.micro_batch,
                           bandwidth_text(s, c, cm));
      }
      return fmt::format("each decode step streams {} of weights at ~{}", gib_text(m.decode_bytes_per_token()),
                         bandwidth_text(s, c, cm));
    case Bottleneck::Compute:
      if (prefill) {
        return fmt::format("a {}-token prompt is {:.1f} TFLOP of matmuls, compute-bound at ~{:.1f} TFLOPS effective",
                           w.prompt_tokens, m.flops_per_token() * static_cast<double>(w.prompt_tokens) / 1e12,
                           m.flops_per_token() * static_cast<double>(w.prompt_tokens) / p.prefill_s / 1e12);
      }
      return w.concurrency > 1
                 ? fmt::format("decoding {} sequences at once makes each step compute-bound", w.concurrency)
                 : std::string("per-layer overheads and dequantization outweigh the memory reads");
    case Bottleneck::LinkLatency:
      if (s.is_parallel()) {
        return fmt::format("{} all-reduces per prompt micro-batch at ~{} each dominate", all_reduces(s),
                           seconds_text(s.parallel.front().collectives.latency_s));
      }
      return fmt::format("{} network hop{} per token at ~{:.2f} ms each outweigh the compute", ring_hops(s, c),
                         ring_hops(s, c) == 1 ? "" : "s", hop_ms(s, c));
    case Bottleneck::LinkBandwidth:
      if (s.is_parallel()) {
        return fmt::format("all-reduces of the prompt's activations ({} each) saturate the links",
                           bytes_text(static_cast<double>(p.micro_batch) * static_cast<double>(m.config.n_embd) * 4));
      }
      return fmt::format("{} of activations per token saturate the {:.0f} Gbit/s links",
                         gib_text(static_cast<uint64_t>(cm.activation_bytes())), min_link_gbit(s, c));
  }
  return "";
}

std::string shape_text(const Strategy& s, const ModelCost& m, const Workload& w) {
  switch (s.kind) {
    case StrategyKind::Local:
      return "; nothing crosses the network";
    case StrategyKind::Single:
      return fmt::format("; token ids also travel from the head to {} and back every step", s.nodes[0]);
    case StrategyKind::Pipeline:
    case StrategyKind::UserSplit: {
      std::string t = fmt::format(
          "; {} {} ({}), the stages take turns on one stream",
          s.kind == StrategyKind::UserSplit ? "your layers" : "layers by speed and memory", format_ranges(s.stages),
          s.pred.micro_batch > 0 ? fmt::format("prompt in {}-token micro-batches", s.pred.micro_batch) : "");
      if (s.pred.decode_groups > 1) {
        t += fmt::format(" while {} groups of the {} sequences keep them busy together", s.pred.decode_groups,
                         w.concurrency);
      }
      return t;
    }
    case StrategyKind::Replicas:
      return fmt::format(
          "; {} full copies each decode their share of the {} sequences, so throughput adds up "
          "while one stream runs at one node's speed",
          s.nodes.size(), w.concurrency);
    case StrategyKind::TensorParallel:
    case StrategyKind::ExpertParallel:
    case StrategyKind::TensorExpertParallel:
    case StrategyKind::TensorPipeline: {
      const ParallelStage& g = s.parallel.front();
      const auto n = g.nodes.size();
      std::string t;
      if (s.kind == StrategyKind::TensorParallel) {
        t = fmt::format("; every layer split {} ways ({})", n, g.cuts);
      } else if (s.kind == StrategyKind::ExpertParallel) {
        t = fmt::format("; whole experts on {} ranks, attention whole on each ({})", n, g.cuts);
      } else if (s.kind == StrategyKind::TensorExpertParallel) {
        t = fmt::format("; attention split {} ways, whole experts on each rank ({})", n, g.cuts);
      } else {
        std::string ranges;
        for (const auto& st : s.parallel) {
          std::string who;
          for (const auto& node : st.nodes) who += (who.empty() ? "" : "+") + node;
          ranges += fmt::format("{}{}-{}@{}", ranges.empty() ? "" : ",", st.first, st.last, who);
        }
        t = fmt::format("; tensor-parallel groups of {} as pipeline stages {} ({})", n, ranges, g.cuts);
      }
      if (!g.shares.empty()) {
        std::string sh;
        for (double x : g.shares) sh += fmt::format("{}{:g}", sh.empty() ? "" : ",", x);
        t += fmt::format(", shares {} by read bandwidth", sh);
      }
      t += fmt::format(", then {} all-reduce{} per token", all_reduces(s), all_reduces(s) == 1 ? "" : "s");
      if (!s.blocked.empty()) t += fmt::format(" ({})", s.blocked);
      return t;
    }
    case StrategyKind::Requant:
      return fmt::format(
          "; needs a {} file, estimated at {} from the parameter count ({:.2f} bits per weight; "
          "fewer bits cost some quality)",
          m.type, gib_text(s.model_bytes),
          8.0 * static_cast<double>(s.model_bytes) / static_cast<double>(std::max<uint64_t>(m.n_params, 1)));
  }
  return "";
}

std::string tps_text(double tps) {
  return tps >= 100 ? fmt::format("{:.0f}", tps) : tps >= 10 ? fmt::format("{:.1f}", tps) : fmt::format("{:.2f}", tps);
}

// "local: needs 41.2 GiB, has 29.8 GiB" for the node that falls shortest.
std::string shortfall_text(const Strategy& s) {
  const NodeMemory* worst = nullptr;
  for (const auto& mem : s.memory) {
    if (!mem.fits() && (!worst || mem.needs - mem.has > worst->needs - worst->has)) worst = &mem;
  }
  if (!worst) return "";
  return fmt::format("needs {} on {}, has {}", gib_text(worst->needs), worst->node, gib_text(worst->has));
}

std::string speeds_text(const Strategy& s, const Workload& w) {
  std::string t = fmt::format("{} tok/s decode", tps_text(s.pred.decode_tps_1));
  if (w.concurrency > 1) t += fmt::format(" ({} at {} sequences)", tps_text(s.pred.decode_tps_c), w.concurrency);
  return t;
}

}  // namespace

std::string gib_text(uint64_t bytes) {
  const double g = static_cast<double>(bytes) / 1073741824.0;
  if (g >= 0.1) return fmt::format("{:.1f} GiB", g);
  return fmt::format("{:.1f} MiB", static_cast<double>(bytes) / 1048576.0);
}

void explain_strategy(Strategy& s, const ModelCost& model, const Cluster& c, const CostModel& cm, const Workload& w) {
  s.bottleneck =
      fmt::format("{} ({})", bottleneck_name(s.pred.bottleneck), s.pred.prefill_dominates ? "prefill" : "decode");
  if (!s.feasible) {
    const NodeMemory* worst = nullptr;
    int short_nodes = 0;
    for (const auto& mem : s.memory) {
      if (mem.fits()) continue;
      ++short_nodes;
      if (!worst || mem.needs - mem.has > worst->needs - worst->has) worst = &mem;
    }
    const std::string packed =
        worst->packed > 0 ? fmt::format(" + {} packed copy (--repack)", gib_text(worst->packed)) : std::string();
    s.why = fmt::format("Needs {} on {}, has {} ({} weights + {} KV cache + {} buffers{}){}.", gib_text(worst->needs),
                        worst->node, gib_text(worst->has), gib_text(worst->weights), gib_text(worst->kv_cache),
                        gib_text(worst->buffers), packed,
                        short_nodes > 1 ? fmt::format("; {} nodes fall short", short_nodes) : "");
    return;
  }
  s.why = capitalized(cause_text(s, model, c, cm, w) + shape_text(s, model, w)) + ".";
  s.arithmetic.clear();
  if (!s.is_parallel()) return;
  // One decoded token: each rank's share at its read rate (or compute), the slowest rank, then the collectives.
  const double total_s = 1.0 / s.pred.decode_tps_1;
  double accounted = 0;
  for (const auto& g : s.parallel) {
    const GroupPass& d = g.decode;
    std::string reads;
    for (size_t r = 0; r < d.ranks.size(); ++r) {
      reads +=
          fmt::format("{}{} {}", r == 0 ? "" : ", ", g.nodes[r], gib_text(static_cast<uint64_t>(d.ranks[r].bytes)));
    }
    const std::string layers = s.parallel.size() > 1 ? fmt::format("layers {}-{}: ", g.first, g.last) : "";
    if (g.nodes.size() == 1) {
      // A stage of one node among groups (--place): its pass, no collectives.
      const RankPass& alone = d.ranks.front();
      s.arithmetic.push_back(fmt::format("{}{} {} read per token ({}) / {:.1f} GB/s = {}, + {} overheads", layers,
                                         g.nodes.front(), gib_text(static_cast<uint64_t>(alone.bytes)), g.cuts,
                                         g.read_rate.front() / 1e9, seconds_text(alone.t.memory),
                                         seconds_text(alone.t.compute)));
      accounted += d.total.total();
      continue;
    }
    s.arithmetic.push_back(fmt::format("{}{} read per token ({}; {})", layers, reads,
                                       parallel_flags(g.mode, static_cast<int>(g.nodes.size()), g.ep_redundancy),
                                       g.cuts));
    const RankPass& slow = d.ranks[d.slowest];
    const double overheads = slow.t.compute;  // memory-bound: the compute part is the fixed overheads
    if (slow.t.memory > 0) {
      s.arithmetic.push_back(
          fmt::format("  slowest rank {}: {} / {:.1f} GB/s = {}, + {} per-layer and per-pass overheads",
                      g.nodes[d.slowest], gib_text(static_cast<uint64_t>(slow.bytes)), g.read_rate[d.slowest] / 1e9,
                      seconds_text(slow.t.memory), seconds_text(overheads)));
    } else {
      s.arithmetic.push_back(fmt::format("  slowest rank {}: {:.1f} GFLOP, compute-bound with overheads: {}",
                                         g.nodes[d.slowest], slow.flops / 1e9, seconds_text(slow.t.compute)));
    }
    const CollectiveProfile& col = g.collectives;
    const double b = d.all_reduce_bytes;
    if (col.measured()) {
      s.arithmetic.push_back(fmt::format("  + {} all-reduces of {} x {} = {}", d.all_reduces, bytes_text(b),
                                         seconds_text(d.all_reduce_s), seconds_text(d.all_reduces * d.all_reduce_s)));
    } else {
      const double per_byte = col.seconds_per_byte_for(b);
      const std::string bytes_part =
          per_byte > 0 ? fmt::format("{} / {:.2f} GB/s", bytes_text(b), 1e-9 / per_byte) : std::string("0");
      s.arithmetic.push_back(fmt::format("  + {} all-reduces of {} x ({} + {}) = {}", d.all_reduces, bytes_text(b),
                                         seconds_text(col.latency_for(b)), bytes_part,
                                         seconds_text(d.all_reduces * d.all_reduce_s)));
    }
    s.arithmetic.push_back("    " + collective_formula_text(col, b));
    s.arithmetic.push_back(
        fmt::format("  + {} small collectives (rank 0's broadcast of the step, the logits' gather) = {}",
                    d.other_collectives, seconds_text(d.other_s)));
    accounted += d.total.total();
  }
  if (s.parallel.size() > 1) {
    // TP x PP: each stage hands one token's activations to the next stage's ranks.
    const double act = cm.activation_bytes();
    double hops_s = 0;
    for (size_t i = 0; i + 1 < s.parallel.size(); ++i) {
      hops_s +=
          cm.hop_time(*c.find(s.parallel[i].nodes.front()), *c.find(s.parallel[i + 1].nodes.front()), act).total();
    }
    const LinkProfile l = c.link(s.parallel[0].nodes.front(), s.parallel[1].nodes.front());
    s.arithmetic.push_back(
        fmt::format("  + {} hop{} of {} activations between stages x ({} + {} / {:.2f} GB/s; {}) = {}",
                    s.parallel.size() - 1, s.parallel.size() == 2 ? "" : "s", bytes_text(act),
                    seconds_text(l.rtt_s / 2.0 + cm.constants().message_overhead_s), bytes_text(act),
                    l.bytes_per_s() / 1e9, l.source, seconds_text(hops_s)));
    accounted += hops_s;
  }
  const double rest = total_s - accounted;
  const std::string hops =
      rest > 1e-6 ? fmt::format(" + {} of {}", seconds_text(rest), s.parallel.size() > 1 ? "token ids' hops" : "hops")
                  : "";
  s.arithmetic.push_back(
      fmt::format("  ={} {} per token: {} tok/s decode", hops, seconds_text(total_s), tps_text(s.pred.decode_tps_1)));
}

void explain_plan(Plan& plan, const ModelCost& m, const Cluster& c, const PlanOptions& o, std::optional<size_t> user,
                  double min_gain) {
  const Workload& w = o.workload;
  const auto& all = plan.strategies;
  const Strategy& local = all.front();
  const std::string model = m.label;

  for (const auto& s : all) {
    if (s.kind == StrategyKind::Requant && s.feasible) {
      // Compared with the chosen split, or else the fastest split of the file the user has, for the same requests.
      const Strategy* split = plan.chosen && all[*plan.chosen].nodes.size() > 1 ? &all[*plan.chosen] : nullptr;
      for (const auto& t : all) {
        if (plan.chosen && split == &all[*plan.chosen]) break;
        if (t.feasible && t.runnable && t.nodes.size() > 1 && (!split || t.pred.score_s < split->pred.score_s)) {
          split = &t;
        }
      }
      std::string compare;
      if (split) {
        compare = s.pred.score_s < split->pred.score_s
                      ? fmt::format(", faster than {} ({})", split->name, speeds_text(*split, w))
                      : fmt::format(", though {} predicts {}", split->name, speeds_text(*split, w));
      }
      plan.advice.push_back(fmt::format("Before splitting, consider {}: estimated {}, it fits {} alone at {}{}.",
                                        s.name.substr(s.name.rfind(' ') + 1), gib_text(s.model_bytes), s.nodes[0],
                                        speeds_text(s, w), compare));
      break;
    }
  }
  const Skipped* crowd = nullptr;
  for (const auto& sk : plan.skipped) {
    if (sk.reason.find("would take turns") != std::string::npos) {
      crowd = &sk;
      plan.advice.push_back(
          fmt::format("Nodes that share CPUs are not combined ({}); give each CPUs of its own "
                      "(taskset) or fewer threads (-t).",
                      sk.reason));
      break;
    }
  }
  for (const auto& sk : plan.skipped) {
    if (sk.reason.find("would hold no layer") != std::string::npos) {
      plan.advice.push_back(
          fmt::format("Pipelines over more than {} nodes are not considered: the model has {} "
                      "layers and every stage needs one.",
                      m.n_layer(), m.n_layer()));
      break;
    }
  }
  if (w.n_ctx > m.config.n_ctx_train) {
    plan.advice.push_back(
        fmt::format("The context {} is longer than the model's training context {}.", w.n_ctx, m.config.n_ctx_train));
  }

  if (user) {
    const Strategy& u = all[*user];
    // "Your split", or "Your --tp 2 run" under mpirun.
    const std::string yours =
        u.is_parallel() ? fmt::format("Your {} run", u.name.substr(u.name.find(' ') + 1)) : std::string("Your split");
    if (!u.feasible) {
      plan.decision = fmt::format("{} does not fit: it {}.", yours, shortfall_text(u));
      if (plan.best) plan.decision += fmt::format(" The planner would choose {}.", all[*plan.best].name);
      return;
    }
    if (plan.best && *plan.best == *user) {
      const double ratio = local.pred.score_s / u.pred.score_s;
      plan.decision = fmt::format(
          "{} is the planner's choice too: it predicts {}, {:.0f}% {} than local ({}) for {} "
          "request{} of {}+{} tokens.",
          yours, speeds_text(u, w), std::abs(ratio - 1.0) * 100.0, ratio >= 1.0 ? "faster" : "slower",
          speeds_text(local, w), w.concurrency, w.concurrency == 1 ? "" : "s", w.prompt_tokens, w.n_gen);
    } else if (plan.best) {
      const Strategy& b = all[*plan.best];
      const double ratio = b.pred.score_s / u.pred.score_s;
      plan.decision = fmt::format(
          "{} predicts {} against {} for the planner's choice ({} on {}); for {} request{} of {}+{} tokens "
          "it is {:.0f}% {}.",
          yours, speeds_text(u, w), speeds_text(b, w), b.name, list_text(b.nodes), w.concurrency,
          w.concurrency == 1 ? "" : "s", w.prompt_tokens, w.n_gen, std::abs(1.0 - ratio) * 100.0,
          ratio < 1.0 ? "slower" : "faster");
    } else {
      plan.decision = fmt::format("{} predicts {}; nothing else fits.", yours, speeds_text(u, w));
    }
    return;
  }

  if (!plan.chosen) {
    const Strategy* closest = nullptr;
    for (const auto& s : all) {
      if (s.runnable && s.nodes.size() > (o.distribute ? 1u : 0u)) {
        auto short_by = [](const Strategy& x) {
          double worst = 0;
          for (const auto& mem : x.memory) worst = std::max(worst, double(mem.needs) - double(mem.has));
          return worst;
        };
        if (!closest || short_by(s) < short_by(*closest)) closest = &s;
      }
    }
    if (o.distribute && closest == nullptr && crowd != nullptr) {
      plan.decision = fmt::format("No split can run with --distribute: {}.", crowd->reason);
      return;
    }
    plan.decision = fmt::format("Nothing fits{}: {} weighs {}", o.distribute ? " with --distribute" : "", model,
                                gib_text(m.total_bytes()));
    if (closest && !closest->feasible) {
      plan.decision += fmt::format(", and the closest plan ({}) {}", closest->name, shortfall_text(*closest));
    } else if (closest && o.distribute) {
      plan.decision += ", and no split over two or more nodes fits";
    }
    plan.decision += ".";
    if (!plan.advice.empty()) plan.decision += " " + plan.advice.front();
    return;
  }

  const Strategy& ch = all[*plan.chosen];
  const double local_ratio = local.pred.score_s / ch.pred.score_s;
  if (ch.kind == StrategyKind::Local) {
    plan.decision = fmt::format("Local wins: {} fits here ({} of {}) at {}", model, gib_text(ch.memory[0].needs),
                                gib_text(ch.memory[0].has), speeds_text(ch, w));
    const Strategy* split = nullptr;
    for (const auto& s : all) {
      if (s.runnable && s.nodes.size() > 1 && s.kind != StrategyKind::UserSplit &&
          (!split || (s.feasible && !split->feasible) ||
           (s.feasible == split->feasible && s.pred.score_s < split->pred.score_s))) {
        split = &s;
      }
    }
    if (c.size() == 1) {
      plan.decision += "; the cluster has no other node.";
    } else if (!split || !split->feasible) {
      plan.decision += "; no split over several nodes fits.";
    } else if (split->pred.score_s < ch.pred.score_s) {
      plan.decision += fmt::format(
          "; {} would be only {:.0f}% faster, less than the {:.0f}% it takes to add "
          "machines.",
          split->name, (ch.pred.score_s / split->pred.score_s - 1.0) * 100.0, 100.0 * min_gain);
    } else if (split->is_parallel()) {
      plan.decision += fmt::format(
          "; the best split ({} over {}) predicts {}: its {} all-reduces per token cost more than sharing out the "
          "reads saves.",
          split->name, list_text(split->nodes), speeds_text(*split, w), all_reduces(*split));
    } else if (split->kind == StrategyKind::Replicas) {
      plan.decision +=
          fmt::format("; {} predict {} in total, no gain at this load.", split->name, speeds_text(*split, w));
    } else {
      plan.decision += fmt::format(
          "; the best split ({} over {}) predicts {}, because every token still reads "
          "every weight once and adds {} network hop{}.",
          split->name, list_text(split->nodes), speeds_text(*split, w), ring_hops(*split, c),
          ring_hops(*split, c) == 1 ? "" : "s");
    }
    return;
  }

  std::string reason;
  if (!local.feasible) {
    const std::string where = ch.kind == StrategyKind::Single
                                  ? fmt::format("{} alone holds it", ch.nodes[0])
                                  : fmt::format("{} over {} fits", ch.name, list_text(ch.nodes));
    reason = fmt::format("{} does not fit local (needs {}, has {}); {} at {}", model, gib_text(local.memory[0].needs),
                         gib_text(local.memory[0].has), where, speeds_text(ch, w));
  } else {
    std::string how;
    if (ch.kind == StrategyKind::Replicas) {
      how = "each copy decodes its own sequences";
    } else if (ch.kind == StrategyKind::Single) {
      how = fmt::format("{} is faster than this machine", ch.nodes[0]);
    } else if (ch.is_parallel()) {
      std::string shares;
      for (double x : ch.parallel.front().shares) shares += fmt::format("{}{:g}", shares.empty() ? "" : ",", x);
      const std::string flags = parallel_flags(ch.parallel.front().mode, static_cast<int>(ch.nodes.size()),
                                               ch.parallel.front().ep_redundancy) +
                                (shares.empty() ? "" : " --tp-shares " + shares);
      std::string workers;
      for (const auto& n : ch.nodes) {
        if (n != c.head().name) workers += (workers.empty() ? "" : ",") + n;
      }
      const std::string run =
          o.over_workers ? fmt::format("tessera ... {} --workers {} (those workers, in this order)", flags, workers)
                         : fmt::format("mpirun -np {} tessera ... {}", ch.nodes.size(), flags);
      how = fmt::format(
          "every rank reads its share of each layer at the same time ({} per token instead of {}), for {} "
          "all-reduces per token (run it as {})",
          rank_bytes_text(ch), gib_text(m.decode_bytes_per_token()), all_reduces(ch), run);
    } else {
      // Which phase the gain comes from: the prompts' prefill or the decode steps.
      const double seqs = static_cast<double>(w.concurrency), n = static_cast<double>(w.n_gen);
      const double decode_gain = n * seqs / local.pred.decode_tps_c - n * seqs / ch.pred.decode_tps_c;
      const double prefill_gain = (local.pred.score_s - ch.pred.score_s) - decode_gain;
      if (prefill_gain >= decode_gain) {
        how = fmt::format(
            "prompt micro-batches flow through the stages at the same time (prefill {} against {} "
            "tok/s), while decode gains little",
            tps_text(ch.pred.prefill_tps), tps_text(local.pred.prefill_tps));
      } else if (ch.pred.decode_groups > 1) {
        how = "groups of sequences keep every stage busy at once";
      } else {
        how = "its nodes read the weights faster together";
      }
    }
    reason = fmt::format("{} over {} predicts {}, {:.0f}% {} than local for {} request{} of {}+{} tokens: {}", ch.name,
                         list_text(ch.nodes), speeds_text(ch, w), std::abs(local_ratio - 1.0) * 100.0,
                         local_ratio >= 1.0 ? "faster" : "slower", w.concurrency, w.concurrency == 1 ? "" : "s",
                         w.prompt_tokens, w.n_gen, how);
  }
  plan.decision = (o.distribute ? "--distribute: " : "") + capitalized(reason) + ".";
  if (!plan.advice.empty() && !local.feasible) plan.decision += " " + plan.advice.front();
}

}  // namespace tessera::plan
