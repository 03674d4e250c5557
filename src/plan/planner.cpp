// Planner: builds the candidate strategies, evaluates each with the cost model, and picks the fastest that fits,
// preferring fewer nodes unless more nodes win clearly. The sentences that explain each row are in plan_explain.cpp.
#include "plan/planner.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>
#include <set>
#include <tuple>

#include "hw/probe.h"
#include "plan/plan_explain.h"
#include "plan/planner_internal.h"
#include "util/error.h"

namespace tessera::plan {
namespace {

// Nodes of one machine whose threads outnumber the CPUs they may use between them (workers pinned to the head's
// core, three one-thread nodes on two cores) would take turns on those CPUs while each node's rates were measured
// alone: the reason such a set cannot work at the predicted speed, or nothing.
std::optional<std::string> crowded(const Cluster& c, const std::vector<size_t>& set) {
  std::map<std::string, std::vector<size_t>> by_machine;
  for (size_t i : set) {
    if (!c.nodes()[i].machine.empty()) by_machine[c.nodes()[i].machine].push_back(i);
  }
  for (const auto& [machine, nodes] : by_machine) {
    if (nodes.size() < 2) continue;
    std::set<int> cpus;
    int threads = 0;
    std::string who;
    for (size_t i : nodes) {
      const NodeProfile& n = c.nodes()[i];
      cpus.insert(n.cpus.begin(), n.cpus.end());
      threads += std::max(1, n.threads);
      who += (who.empty() ? "" : ", ") + n.name;
    }
    if (threads <= static_cast<int>(cpus.size())) continue;
    return fmt::format("{} run on one machine with {} threads on {} CPU{} ({}): their stages would take turns", who,
                       threads, cpus.size(), cpus.size() == 1 ? "" : "s",
                       cpu_list_text(std::vector<int>(cpus.begin(), cpus.end())));
  }
  return std::nullopt;
}

}  // namespace

namespace detail {

std::vector<std::string> Planner::names(const std::vector<size_t>& nodes) const {
  std::vector<std::string> out;
  for (size_t n : nodes) out.push_back(c_.nodes()[n].name);
  return out;
}

double Planner::overflow(const Strategy& s) {
  double worst = 0;
  for (const auto& mem : s.memory) {
    worst = std::max(worst, static_cast<double>(mem.needs) - static_cast<double>(mem.has));
  }
  return worst;
}

Strategy Planner::evaluate_stages(std::string name, StrategyKind kind, const std::vector<StageSpec>& specs,
                                  const CostModel& cm, const Workload& w) const {
  Strategy s;
  s.name = std::move(name);
  s.kind = kind;
  s.model_label = cm.model().label;
  s.model_bytes = cm.model().total_bytes();
  s.feasible = true;
  for (const auto& spec : specs) {
    const std::string& node = c_.nodes()[spec.node].name;
    s.nodes.push_back(node);
    s.stages.push_back({node, spec.first, spec.last});
    const MemoryNeed need = cm.stage_memory(spec, w);
    NodeMemory mem{node,         specs.size() == 1 ? "all" : range_text(spec.first, spec.last),
                   need.weights, need.kv_cache,
                   need.buffers, need.packed,
                   need.total(), need.available};
    s.feasible = s.feasible && mem.fits();
    s.memory.push_back(std::move(mem));
  }
  s.pred = cm.predict_pipeline(specs, w);
  return s;
}

Strategy Planner::single(size_t node, const CostModel& cm, const Workload& w) const {
  const bool head = node == c_.head_index();
  std::vector<StageSpec> specs{{node, 0, cm.model().n_layer() - 1, true, true}};
  return evaluate_stages(head ? "local" : "on " + c_.nodes()[node].name,
                         head ? StrategyKind::Local : StrategyKind::Single, specs, cm, w);
}

std::vector<size_t> Planner::ring_order(std::vector<size_t> nodes) const {
  // The head first when it takes part (its stage needs no hop for the token ids), then the cluster's order.
  std::stable_sort(nodes.begin(), nodes.end(), [&](size_t a, size_t b) {
    const bool ha = a == c_.head_index(), hb = b == c_.head_index();
    return ha != hb ? ha : a < b;
  });
  return nodes;
}

std::vector<std::vector<size_t>> Planner::subsets() const {
  const size_t n = c_.size();
  std::vector<std::vector<size_t>> out;
  if (n <= static_cast<size_t>(PlanConstants::kMaxNodesForAllSubsets)) {
    for (uint64_t mask = 1; mask < (uint64_t{1} << n); ++mask) {
      std::vector<size_t> set;
      for (size_t i = 0; i < n; ++i) {
        if (mask & (uint64_t{1} << i)) set.push_back(i);
      }
      out.push_back(ring_order(set));
    }
    return out;
  }
  // Too many for every subset: for each size, the head plus the fastest others, and the fastest nodes alone.
  std::vector<size_t> by_speed(n);
  std::iota(by_speed.begin(), by_speed.end(), size_t{0});
  std::stable_sort(by_speed.begin(), by_speed.end(),
                   [&](size_t a, size_t b) { return c_.nodes()[a].mem_read_gbps > c_.nodes()[b].mem_read_gbps; });
  for (size_t size = 1; size <= n; ++size) {
    std::vector<size_t> with_head{c_.head_index()}, fastest;
    for (size_t i : by_speed) {
      if (with_head.size() < size && i != c_.head_index()) with_head.push_back(i);
      if (fastest.size() < size) fastest.push_back(i);
    }
    out.push_back(ring_order(with_head));
    if (ring_order(fastest) != out.back()) out.push_back(ring_order(fastest));
  }
  return out;
}

std::optional<std::vector<StageSpec>> Planner::proportional_split(const std::vector<size_t>& nodes,
                                                                  std::string& reason) const {
  const Workload& w = o_.workload;
  const size_t s = nodes.size();
  const int64_t n_layer = m_.n_layer();
  if (static_cast<int64_t>(s) > n_layer) {
    reason = fmt::format("{} nodes for {} layers: a node would hold no layer", s, n_layer);
    return std::nullopt;
  }
  // What each layer occupies: its weights and its KV cache for every sequence.
  std::vector<uint64_t> layer_mem;
  double total = 0;
  for (const auto& l : m_.layers) {
    layer_mem.push_back(l.weight_bytes + l.kv_cache_bytes(w.n_ctx) * static_cast<uint64_t>(w.concurrency));
    total += static_cast<double>(layer_mem.back());
  }
  // A node that packs at load holds a packed copy next to each layer: its room, in unpacked layer bytes, shrinks by
  // the model's packed-to-layer ratio (the edge moves below then check each stage exactly).
  double packed = 0;
  for (const auto& l : m_.layers) packed += static_cast<double>(l.packed_dense_bytes + l.packed_expert_bytes);
  std::vector<double> cap(s), speed(s), share(s, 0.0);
  for (size_t i = 0; i < s; ++i) {
    const MemoryNeed fixed = cm_.stage_memory({nodes[i], 0, -1, i == 0, i + 1 == s}, w);
    cap[i] = std::max(0.0, static_cast<double>(fixed.available) - static_cast<double>(fixed.total()));
    if (c_.nodes()[nodes[i]].repack && total > 0) cap[i] *= total / (total + packed);
    speed[i] = cm_.read_rate(nodes[i]);
  }
  // Water-filling: shares follow speed; a node whose share exceeds its memory is held at its capacity and the rest
  // is spread over the others by speed again.
  std::vector<bool> capped(s, false);
  for (bool changed = true; changed;) {
    changed = false;
    double rest = total, weight = 0;
    for (size_t i = 0; i < s; ++i) {
      if (capped[i]) {
        rest -= cap[i];
      } else {
        weight += speed[i];
      }
    }
    for (size_t i = 0; i < s; ++i) {
      if (capped[i]) {
        share[i] = cap[i];
      } else {
        share[i] = weight > 0 ? std::max(rest, 0.0) * speed[i] / weight : 0.0;
        if (share[i] > cap[i]) capped[i] = changed = true;
      }
    }
    if (std::all_of(capped.begin(), capped.end(), [](bool b) { return b; })) {
      // Not enough memory anywhere: split by capacity so the table shows by how much each node falls short.
      for (size_t i = 0; i < s; ++i) share[i] = std::max(cap[i], 1.0);
      break;
    }
  }
  std::vector<int64_t> counts = proportional_counts(layer_mem, share);
  for (size_t i = 0; i < s; ++i) {
    if (counts[i] == 0) {
      reason = fmt::format("{}'s share ({:.1f}% of the bytes by its speed and memory) rounds to 0 of {} layers",
                           c_.nodes()[nodes[i]].name, 100.0 * share[i] / total, n_layer);
      return std::nullopt;
    }
  }
  auto specs_from_counts = [&] {
    std::vector<StageSpec> specs;
    int64_t first = 0;
    for (size_t i = 0; i < s; ++i) {
      specs.push_back({nodes[i], first, first + counts[i] - 1, i == 0, i + 1 == s});
      first += counts[i];
    }
    return specs;
  };
  // Rounding to whole layers can push a node just over its memory: move edge layers to a neighbour with room.
  for (int64_t guard = 0; guard < n_layer * static_cast<int64_t>(s); ++guard) {
    const auto specs = specs_from_counts();
    bool moved = false;
    for (size_t i = 0; i < s && !moved; ++i) {
      const MemoryNeed need = cm_.stage_memory(specs[i], w);
      if (need.fits() || counts[i] <= 1) continue;
      for (size_t j : {i + 1, i - 1}) {
        if (j >= s) continue;
        StageSpec grown = specs[j];
        (j > i ? grown.first : grown.last) += (j > i ? -1 : 1);
        if (cm_.stage_memory(grown, w).fits()) {
          --counts[i];
          ++counts[j];
          moved = true;
          break;
        }
      }
    }
    if (!moved) break;
  }
  return specs_from_counts();
}

std::optional<Strategy> Planner::replicas() const {
  const Workload& w = o_.workload;
  if (w.concurrency < 2 || c_.size() < 2) return std::nullopt;
  // Nodes that hold the whole model; the fastest first.
  std::vector<std::pair<double, size_t>> fit;
  for (size_t i = 0; i < c_.size(); ++i) {
    Workload one = w;
    one.concurrency = 1;
    const Strategy s = single(i, cm_, one);
    if (s.feasible) fit.push_back({s.pred.decode_tps_1, i});
  }
  std::stable_sort(fit.begin(), fit.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
  // Copies that would share CPUs are no more copies: keep the fastest of them.
  std::vector<std::pair<double, size_t>> apart;
  std::vector<size_t> chosen;
  for (const auto& f : fit) {
    chosen.push_back(f.second);
    if (crowded(c_, chosen)) {
      chosen.pop_back();
    } else {
      apart.push_back(f);
    }
  }
  fit = std::move(apart);
  if (fit.size() > static_cast<size_t>(w.concurrency)) fit.resize(static_cast<size_t>(w.concurrency));
  if (fit.size() < 2) return std::nullopt;
  // Sequences in proportion to each copy's speed at an even share; every copy gets at least one.
  std::vector<double> rate;
  double sum = 0;
  for (const auto& f : fit) {
    Workload even = w;
    even.concurrency = std::max<int64_t>(1, w.concurrency / static_cast<int64_t>(fit.size()));
    rate.push_back(single(f.second, cm_, even).pred.decode_tps_c);
    sum += rate.back();
  }
  std::vector<int64_t> seqs(fit.size(), 1);
  int64_t left = w.concurrency - static_cast<int64_t>(fit.size());
  for (size_t i = 0; i < fit.size(); ++i) {
    const auto extra = static_cast<int64_t>(std::floor(static_cast<double>(left) * rate[i] / sum));
    seqs[i] += extra;
  }
  int64_t assigned = std::accumulate(seqs.begin(), seqs.end(), int64_t{0});
  for (size_t i = 0; assigned < w.concurrency; i = (i + 1) % fit.size(), ++assigned) ++seqs[i];

  Strategy r;
  r.name = fmt::format("{} replicas", fit.size());
  r.kind = StrategyKind::Replicas;
  r.model_label = m_.label;
  r.model_bytes = m_.total_bytes();
  r.feasible = true;
  double tps = 0, worst_score = 0;
  for (size_t i = 0; i < fit.size(); ++i) {
    Workload part = w;
    part.concurrency = seqs[i];
    Strategy s = single(fit[i].second, cm_, part);
    r.nodes.push_back(s.nodes[0]);
    r.stages.push_back(s.stages[0]);
    r.sequences.push_back(seqs[i]);
    s.memory[0].layers = fmt::format("all, {} seq", seqs[i]);
    r.memory.push_back(s.memory[0]);
    r.feasible = r.feasible && s.feasible;
    tps += s.pred.decode_tps_c;
    if (i == 0) r.pred = s.pred;  // one prompt or one stream goes to the fastest copy
    if (s.pred.score_s > worst_score) {
      worst_score = s.pred.score_s;
      r.pred.decode_parts_c = s.pred.decode_parts_c;
      r.pred.bottleneck = s.pred.bottleneck;
      r.pred.prefill_dominates = s.pred.prefill_dominates;
    }
  }
  r.pred.decode_tps_c = tps;
  r.pred.score_s = worst_score;
  return r;
}

std::vector<Strategy> Planner::requant_rows() const {
  std::vector<Strategy> out;
  for (const char* name : {"q4_k_m", "q3_k_m", "q2_k"}) {
    const QuantMix mix = quant_mix_from_name(name);
    std::string upper(name);
    for (auto& ch : upper) ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
    ModelCost alt = model_cost_from_shape(
        m_.config, mix, m_.kv_type,
        fmt::format("{} as {} (estimate)", m_.config.name.empty() ? m_.label : m_.config.name, upper));
    // Only quantizations that are clearly smaller than what the user has.
    if (static_cast<double>(alt.total_bytes()) > 0.95 * static_cast<double>(m_.total_bytes())) continue;
    alt.type = upper;
    const CostModel cm(alt, c_, k_);
    std::optional<Strategy> best;
    for (size_t i = 0; i < c_.size(); ++i) {
      Strategy s = single(i, cm, o_.workload);
      if (!best || (s.feasible && !best->feasible) ||
          (s.feasible == best->feasible && s.pred.score_s < best->pred.score_s * (1.0 - 1e-9))) {
        best = std::move(s);
      }
    }
    best->kind = StrategyKind::Requant;
    best->runnable = false;
    best->name = fmt::format("{} as {}", best->nodes[0] == c_.head().name ? "local" : "on " + best->nodes[0], upper);
    explain_strategy(*best, alt, c_, cm, o_.workload);
    out.push_back(std::move(*best));
  }
  return out;
}

Plan Planner::run() {
  const Workload& w = o_.workload;
  Plan plan;
  plan.model_label = m_.label;
  plan.model_bytes = m_.total_bytes();
  plan.decode_bytes_per_token = m_.decode_bytes_per_token();
  plan.workload = w;

  std::optional<size_t> user;
  if (o_.mpi_ranks) {
    user = mpi_rows(plan);
  } else {
    user = cluster_rows(plan);
  }
  choose(plan, user);
  return plan;
}

std::optional<size_t> Planner::mpi_rows(Plan& plan) const {
  const Workload& w = o_.workload;
  // The head alone (a run without mpirun), then every rank as one group in each layout; the run's own last.
  plan.strategies.push_back(single(c_.head_index(), cm_, w));
  std::vector<size_t> all(c_.size());
  std::iota(all.begin(), all.end(), size_t{0});
  all = ring_order(all);
  const auto why = crowded(c_, all);
  if (why) plan.skipped.push_back({names(all), *why});
  std::vector<Strategy> rows;
  if (!why && all.size() > 1) rows = parallel_rows({all}, plan.skipped);
  const bool piped = o_.run && o_.run->pp > 1;
  for (auto& s : rows) {
    // The run's own layout is the user's row below.
    const bool same = o_.run && !piped && s.parallel.front().mode == o_.run->mode &&
                      s.parallel.front().shares == o_.run->shares &&
                      s.parallel.front().ep_redundancy == o_.run->ep_redundancy;
    if (!same) plan.strategies.push_back(std::move(s));
  }
  // Under --pp, the other ways to cut the ranks into groups as stages (--tp N --pp P); the run's own below.
  if (!why && piped) {
    for (auto& s : tensor_pipeline_rows({all})) {
      const bool own =
          o_.run->mode == ParallelMode::Tensor && o_.run->shares.empty() &&
          s.name == fmt::format("tensor x{} pipeline x{}", all.size() / static_cast<size_t>(o_.run->pp), o_.run->pp);
      if (!own) plan.strategies.push_back(std::move(s));
    }
  }
  if (piped) {
    plan.strategies.push_back(run_pipeline_row());
    return plan.strategies.size() - 1;
  }
  if (!o_.run || all.size() < 2) return std::nullopt;
  std::vector<double> shares = o_.run->shares;
  // The run itself cut it this way: no error here.
  const auto group = cm_.make_group(all, o_.run->mode, shares, o_.run->ep_redundancy);
  const std::vector<StageSpec> specs{{all.front(), 0, m_.n_layer() - 1, true, true, group}};
  Strategy s = evaluate_groups(
      fmt::format("your {}", parallel_flags(o_.run->mode, static_cast<int>(all.size()), o_.run->ep_redundancy)),
      kind_of(o_.run->mode), specs);
  s.runnable = true;
  plan.strategies.push_back(std::move(s));
  return plan.strategies.size() - 1;
}

std::optional<size_t> Planner::cluster_rows(Plan& plan) const {
  const Workload& w = o_.workload;
  // Every subset of nodes: one node runs the whole model, several form a pipeline.
  std::vector<std::vector<size_t>> sets;
  for (auto& set : subsets()) {
    const auto why = set.size() > 1 ? crowded(c_, set) : std::nullopt;
    if (why) {
      plan.skipped.push_back({names(set), *why});
    } else {
      sets.push_back(std::move(set));
    }
  }
  std::vector<Strategy> singles, pipelines;
  for (const auto& set : sets) {
    if (set.size() == 1) {
      singles.push_back(single(set[0], cm_, w));
      continue;
    }
    std::string reason;
    const auto specs = proportional_split(set, reason);
    if (!specs) {
      plan.skipped.push_back({names(set), reason});
      continue;
    }
    pipelines.push_back(
        evaluate_stages(fmt::format("pipeline x{}", set.size()), StrategyKind::Pipeline, *specs, cm_, w));
  }
  auto better = [](const Strategy& a, const Strategy& b) {
    if (a.feasible != b.feasible) return a.feasible;
    if (!a.feasible) return overflow(a) < overflow(b);
    return a.pred.score_s < b.pred.score_s;
  };

  const Strategy* local = nullptr;
  const Strategy* best_remote = nullptr;
  for (const auto& s : singles) {
    if (s.kind == StrategyKind::Local) local = &s;
    if (s.kind == StrategyKind::Single && (!best_remote || better(s, *best_remote))) best_remote = &s;
  }
  plan.strategies.push_back(*local);
  if (best_remote && best_remote->feasible && (!local->feasible || better(*best_remote, *local))) {
    plan.strategies.push_back(*best_remote);
  }
  const bool any_single_fits =
      std::any_of(singles.begin(), singles.end(), [](const Strategy& s) { return s.feasible; });
  if (o_.requant_advice && !any_single_fits) {
    for (auto& s : requant_rows()) plan.strategies.push_back(std::move(s));
  }
  if (o_.all_subsets) {
    for (const auto& s : singles) {
      if (s.kind == StrategyKind::Single && &s != best_remote) plan.strategies.push_back(s);
    }
    std::stable_sort(pipelines.begin(), pipelines.end(),
                     [](const Strategy& a, const Strategy& b) { return a.nodes.size() < b.nodes.size(); });
    for (const auto& s : pipelines) plan.strategies.push_back(s);
  } else {
    for (size_t size = 2; size <= c_.size(); ++size) {
      const Strategy* best = nullptr;
      for (const auto& s : pipelines) {
        if (s.nodes.size() == size && (!best || better(s, *best))) best = &s;
      }
      if (best) plan.strategies.push_back(*best);
    }
  }
  if (auto r = replicas()) plan.strategies.push_back(std::move(*r));
  if (o_.parallel != ParallelRows::Off) {
    for (auto& s : parallel_rows(sets, plan.skipped)) plan.strategies.push_back(std::move(s));
    for (auto& s : tensor_pipeline_rows(sets)) plan.strategies.push_back(std::move(s));
  }
  std::optional<size_t> user;
  if (o_.place) {
    user = plan.strategies.size();
    plan.strategies.push_back(place_row());
  } else if (o_.split) {
    const auto node_names = c_.node_name_list();
    const auto ranges = resolve_split(*o_.split, node_names, m_.layer_weight_bytes());
    std::vector<StageSpec> specs;
    for (size_t i = 0; i < ranges.size(); ++i) {
      specs.push_back({*c_.find(ranges[i].node), ranges[i].first, ranges[i].last, i == 0, i + 1 == ranges.size()});
    }
    Strategy s = evaluate_stages("your split", StrategyKind::UserSplit, specs, cm_, w);
    if (specs.size() > 1) {
      for (size_t i = 0; i < specs.size(); ++i) s.memory[i].layers = range_text(ranges[i].first, ranges[i].last);
    }
    user = plan.strategies.size();
    plan.strategies.push_back(std::move(s));
  }
  return user;
}

void Planner::choose(Plan& plan, std::optional<size_t> user) const {
  const Workload& w = o_.workload;
  // The planner's choice: the fastest that fits and can run; among those within min_gain_to_add_nodes of it, the
  // one that needs the fewest machines besides the head, then the fewest nodes: moving the whole model to a worker
  // that probes a little faster than the head adds a hop and a machine that can fail, for a gain within the noise.
  std::optional<size_t> fastest;
  // The run's own --tp/--ep layout under mpirun is a layout like the planner's (which leaves out its duplicate), so
  // it may be the planner's choice too; a --split is the user's, never the planner's.
  auto eligible = [&](const Strategy& s) {
    return s.feasible && s.runnable && s.kind != StrategyKind::UserSplit && (!o_.distribute || s.nodes.size() > 1);
  };
  for (size_t i = 0; i < plan.strategies.size(); ++i) {
    const auto& s = plan.strategies[i];
    if (eligible(s) && (!fastest || s.pred.score_s < plan.strategies[*fastest].pred.score_s)) fastest = i;
  }
  plan.best = fastest;
  if (fastest) {
    const double limit = plan.strategies[*fastest].pred.score_s * (1.0 + k_.min_gain_to_add_nodes);
    for (size_t i = 0; i < plan.strategies.size(); ++i) {
      const auto& s = plan.strategies[i];
      const auto& b = plan.strategies[*plan.best];
      if (!eligible(s) || s.pred.score_s > limit) continue;
      const auto machines = [&](const Strategy& x) {
        const auto remote =
            std::count_if(x.nodes.begin(), x.nodes.end(), [&](const std::string& n) { return n != c_.head().name; });
        return std::make_tuple(remote, x.nodes.size(), x.pred.score_s);
      };
      if (machines(s) < machines(b)) plan.best = i;
    }
  }
  plan.chosen = user ? (plan.strategies[*user].feasible ? user : std::nullopt) : plan.best;
  for (auto& s : plan.strategies) {
    if (s.kind != StrategyKind::Requant) explain_strategy(s, m_, c_, cm_, w);  // requant rows explain themselves
  }
  explain_tradeoffs(plan);
  explain_plan(plan, m_, c_, o_, user, k_.min_gain_to_add_nodes);
}

}  // namespace detail

std::string_view strategy_kind_name(StrategyKind k) {
  switch (k) {
    case StrategyKind::Local:
      return "local";
    case StrategyKind::Single:
      return "single";
    case StrategyKind::Pipeline:
      return "pipeline";
    case StrategyKind::Replicas:
      return "replicas";
    case StrategyKind::TensorParallel:
      return "tensor_parallel";
    case StrategyKind::ExpertParallel:
      return "expert_parallel";
    case StrategyKind::TensorExpertParallel:
      return "tensor_expert_parallel";
    case StrategyKind::TensorPipeline:
      return "tensor_pipeline";
    case StrategyKind::Requant:
      return "requant";
    case StrategyKind::UserSplit:
      return "user_split";
  }
  return "?";
}

Plan make_plan(const ModelCost& model, const Cluster& cluster, const PlanOptions& options,
               const PlanConstants& constants) {
  const Workload& w = options.workload;
  if (w.prompt_tokens < 1 || w.prompt_tokens > (int64_t{1} << 24))
    fail("prompt length {} is out of range", w.prompt_tokens);
  if (w.n_gen < 1 || w.n_gen > (int64_t{1} << 24)) fail("generated tokens {} is out of range", w.n_gen);
  if (w.concurrency < 1 || w.concurrency > 65536) fail("concurrency {} must be between 1 and 65536", w.concurrency);
  if (w.n_batch < 1) fail("batch size {} must be positive", w.n_batch);
  if (w.prompt_tokens + w.n_gen > w.n_ctx) {
    fail("a prompt of {} tokens plus {} generated tokens needs a context of {}, but the context is {} (raise -c)",
         w.prompt_tokens, w.n_gen, w.prompt_tokens + w.n_gen, w.n_ctx);
  }
  if (model.n_layer() < 1) fail("{}: the model has no layers", model.label);
  return detail::Planner(model, cluster, options, constants).run();
}

}  // namespace tessera::plan
