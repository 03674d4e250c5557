// Renders a plan as a terminal table with numbered reasons, or as JSON. Predictions of plans that do not fit are
// left out (shown as "-" and null): only their memory numbers mean something.
#include "plan/plan_report.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>

#include "plan/plan_explain.h"

namespace tessera::plan {
namespace {

using nlohmann::ordered_json;

double gib(uint64_t b) { return static_cast<double>(b) / 1073741824.0; }

std::string tps(double v) {
  return v >= 100 ? fmt::format("{:.0f}", v) : v >= 10 ? fmt::format("{:.1f}", v) : fmt::format("{:.2f}", v);
}

// Columns whose cells all start like numbers (or are "-") are right-aligned.
std::string render_table(const std::vector<std::string>& header, const std::vector<std::vector<std::string>>& rows) {
  const size_t cols = header.size();
  std::vector<size_t> width(cols, 0);
  std::vector<bool> numeric(cols, true);
  for (size_t c = 0; c < cols; ++c) width[c] = header[c].size();
  for (const auto& row : rows) {
    for (size_t c = 0; c < cols; ++c) {
      width[c] = std::max(width[c], row[c].size());
      const bool num = row[c] == "-" || (!row[c].empty() && std::isdigit(static_cast<unsigned char>(row[c][0])));
      if (!num) numeric[c] = false;
    }
  }
  std::string out;
  auto emit = [&](const std::vector<std::string>& row) {
    std::string line = " ";
    for (size_t c = 0; c < cols; ++c) {
      if (c > 0) line += "  ";
      line += numeric[c] ? fmt::format("{:>{}}", row[c], width[c]) : fmt::format("{:<{}}", row[c], width[c]);
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    out += line + "\n";
  };
  emit(header);
  for (const auto& row : rows) emit(row);
  return out;
}

std::string memory_cell(const Strategy& s) {
  std::string out;
  for (const auto& m : s.memory) {
    out += fmt::format("{}{} {:.1f}/{:.1f}{}", out.empty() ? "" : ", ", m.node, gib(m.needs), gib(m.has),
                       m.fits() ? "" : "!");
  }
  return out;
}

std::string nodes_cell(const Strategy& s) {
  const bool split = s.kind == StrategyKind::Pipeline || s.kind == StrategyKind::UserSplit;
  if (split && s.stages.size() > 1) return format_ranges(s.stages);
  if (s.is_parallel()) {
    // Ranks joined by "+" within a group, stages by ","; uneven shares after the ranks.
    std::string out;
    for (const auto& g : s.parallel) {
      std::string who;
      for (const auto& n : g.nodes) who.append(who.empty() ? "" : "+").append(n);
      if (!out.empty()) out += ",";
      out += s.parallel.size() > 1 ? fmt::format("{}-{}@{}", g.first, g.last, who) : who;
      if (!g.shares.empty()) {
        std::string sh;
        for (double x : g.shares) sh += fmt::format("{}{:g}", sh.empty() ? "" : ",", x);
        out += fmt::format(" ({})", sh);
      }
    }
    return out;
  }
  std::string out;
  for (const auto& n : s.nodes) out.append(out.empty() ? "" : ",").append(n);
  return out;
}

ordered_json nullable(bool valid, double v) { return valid ? ordered_json(v) : ordered_json(nullptr); }

// K and V of one position over the layers with a cache of their own (the cache per position where none is a ring).
uint64_t kv_per_position(const ModelCost& m) {
  uint64_t t = 0;
  for (const auto& l : m.layers) t += l.kv_own ? l.kv_bytes_per_token : 0;
  return t;
}

ordered_json collectives_json(const CollectiveProfile& c) {
  ordered_json samples = ordered_json::array();
  for (const auto& x : c.samples) samples.push_back({{"bytes", x.bytes}, {"seconds", x.seconds}});
  return {{"ranks", c.ranks},
          {"latency_s", c.latency_s},
          {"seconds_per_byte", c.seconds_per_byte},
          {"source", c.source},
          {"measured", samples},
          {"link_rtt_s", c.link_rtt_s},
          {"link_bytes_per_s", c.link_bytes_per_s},
          {"slowest_link", c.link_pair},
          {"direct_max_bytes", c.direct_max_bytes},
          {"direct_latency_s", c.direct_latency_s},
          {"direct_seconds_per_byte", c.direct_seconds_per_byte}};
}

ordered_json links_json(const std::vector<LinkProfile>& links) {
  ordered_json out = ordered_json::array();
  for (const auto& l : links) {
    out.push_back({{"between", {l.a, l.b}}, {"rtt_s", l.rtt_s}, {"gbit_per_s", l.gbit_per_s}, {"source", l.source}});
  }
  return out;
}

// A parallel row's groups: ranks, shares, cuts, and one decoded token's arithmetic in numbers.
ordered_json parallel_json(const Strategy& s) {
  if (!s.is_parallel()) return nullptr;
  ordered_json groups = ordered_json::array();
  for (const auto& g : s.parallel) {
    ordered_json ranks = ordered_json::array();
    for (size_t r = 0; r < g.nodes.size(); ++r) {
      const RankPass& p = g.decode.ranks[r];
      ranks.push_back({{"node", g.nodes[r]},
                       {"decode_bytes", p.bytes},
                       {"decode_flops", p.flops},
                       {"read_bytes_per_s", g.read_rate[r]},
                       {"decode_s", p.t.total()}});
    }
    groups.push_back({{"mode", parallel_mode_name(g.mode)},
                      {"flags", parallel_flags(g.mode, static_cast<int>(g.nodes.size()), g.ep_redundancy)},
                      {"first", g.first},
                      {"last", g.last},
                      {"shares", g.shares},
                      {"cuts", g.cuts},
                      {"ranks", ranks},
                      {"all_reduces_per_token", g.decode.all_reduces},
                      {"all_reduce_bytes", g.decode.all_reduce_bytes},
                      {"all_reduce_s", g.decode.all_reduce_s},
                      {"other_collectives", g.decode.other_collectives},
                      {"other_collectives_s", g.decode.other_s},
                      {"collectives", collectives_json(g.collectives)}});
  }
  return groups;
}

}  // namespace

ordered_json plan_json(const Plan& plan, const ModelCost& m, const Cluster& c, const PlanConstants& k) {
  const Workload& w = plan.workload;
  ordered_json j;
  j["chosen"] = plan.chosen ? ordered_json(*plan.chosen) : ordered_json(nullptr);
  j["best"] = plan.best ? ordered_json(*plan.best) : ordered_json(nullptr);
  j["decision"] = plan.decision;
  j["advice"] = plan.advice;
  j["model"] = {{"label", m.label},
                {"type", m.type},
                {"from_file", m.from_file},
                {"architecture", m.config.arch_name},
                {"n_layer", m.n_layer()},
                {"n_embd", m.config.n_embd},
                {"n_expert", m.config.n_expert},
                {"n_expert_used", m.config.n_expert_used},
                {"n_params", m.n_params},
                {"weight_bytes", m.total_bytes()},
                {"packed_bytes", m.total_packed_bytes()},
                {"bits_per_weight", m.bits_per_weight()},
                {"decode_bytes_per_token", m.decode_bytes_per_token()},
                {"flops_per_token", m.flops_per_token()},
                {"kv_bytes_per_token", kv_per_position(m)},
                {"kv_cache_bytes_per_sequence", m.kv_cache_bytes(w.n_ctx)}};
  j["workload"] = {{"prompt_tokens", w.prompt_tokens},
                   {"n_gen", w.n_gen},
                   {"concurrency", w.concurrency},
                   {"n_ctx", w.n_ctx},
                   {"n_batch", w.n_batch}};
  ordered_json nodes = ordered_json::array();
  for (const auto& n : c.nodes()) {
    nodes.push_back({{"name", n.name},
                     {"head", &n == &c.head()},
                     {"mem_available_bytes", n.mem_available_bytes},
                     {"mem_read_gbps", n.mem_read_gbps},
                     {"int8_gops", n.int8_gops},
                     {"f32_gflops", n.f32_gflops},
                     {"cores", n.cores},
                     {"repack", n.repack},
                     {"source", n.source}});
  }
  j["nodes"] = nodes;
  j["collectives"] = c.collectives() ? collectives_json(*c.collectives()) : ordered_json(nullptr);
  // The links pipeline hops take, and the direct ones between workers that a group's collectives take.
  j["links"] = links_json(c.links());
  j["group_links"] = links_json(c.group_links());
  ordered_json strategies = ordered_json::array();
  for (const auto& s : plan.strategies) {
    ordered_json mem = ordered_json::array();
    for (const auto& n : s.memory) {
      mem.push_back({{"node", n.node},
                     {"layers", n.layers},
                     {"needs_bytes", n.needs},
                     {"has_bytes", n.has},
                     {"weights_bytes", n.weights},
                     {"kv_cache_bytes", n.kv_cache},
                     {"buffer_bytes", n.buffers},
                     {"packed_bytes", n.packed},
                     {"fits", n.fits()}});
    }
    ordered_json stages = ordered_json::array();
    for (const auto& st : s.stages) stages.push_back({{"node", st.node}, {"first", st.first}, {"last", st.last}});
    const bool ok = s.feasible;
    const bool split = s.stages.size() > 1 && (s.kind == StrategyKind::Pipeline || s.kind == StrategyKind::UserSplit);
    strategies.push_back({{"name", s.name},
                          {"kind", strategy_kind_name(s.kind)},
                          {"nodes", s.nodes},
                          {"feasible", s.feasible},
                          {"runnable", s.runnable},
                          {"memory_per_node", mem},
                          {"pred_prefill_tps", nullable(ok, s.pred.prefill_tps)},
                          {"pred_decode_tps", nullable(ok, s.pred.decode_tps_1)},
                          {"pred_decode_tps_concurrent", nullable(ok, s.pred.decode_tps_c)},
                          {"pred_seconds", nullable(ok, s.pred.score_s)},
                          {"bottleneck", ok ? ordered_json(s.bottleneck) : ordered_json("memory capacity")},
                          {"why", s.why},
                          {"model", s.model_label},
                          {"model_bytes", s.model_bytes},
                          {"split", split ? ordered_json(format_ranges(s.stages)) : ordered_json(nullptr)},
                          {"stages", stages},
                          {"micro_batch", s.pred.micro_batch},
                          {"decode_groups", s.pred.decode_groups},
                          {"parallel", parallel_json(s)},
                          {"arithmetic", s.arithmetic}});
  }
  j["strategies"] = strategies;
  ordered_json skipped = ordered_json::array();
  for (const auto& sk : plan.skipped) skipped.push_back({{"nodes", sk.nodes}, {"reason", sk.reason}});
  j["skipped"] = skipped;
  j["constants"] = {{"bandwidth_efficiency", k.bandwidth_efficiency},
                    {"int8_efficiency", k.int8_efficiency},
                    {"f32_efficiency", k.f32_efficiency},
                    {"small_batch_compute_factor", k.small_batch_compute_factor},
                    {"few_token_compute_factor", k.few_token_compute_factor},
                    {"few_token_batch", k.few_token_batch},
                    {"full_rate_batch", k.full_rate_batch},
                    {"full_rate_batch_packed", k.full_rate_batch_packed},
                    {"layer_overhead_s", k.layer_overhead_s},
                    {"stage_overhead_s", k.stage_overhead_s},
                    {"message_overhead_s", k.message_overhead_s},
                    {"link_direct_max_bytes", k.link_direct_max_bytes},
                    {"node_base_bytes", k.node_base_bytes},
                    {"memory_headroom", k.memory_headroom},
                    {"min_gain_to_add_nodes", k.min_gain_to_add_nodes}};
  return j;
}

std::string plan_text(const Plan& plan, const ModelCost& m, const Cluster& c) {
  const Workload& w = plan.workload;
  std::string out;
  out += fmt::format("model:     {}: {} in {} layers, reads {} per token, {:.1f} GFLOP per token\n", m.label,
                     gib_text(m.total_bytes()), m.n_layer(), gib_text(m.decode_bytes_per_token()),
                     m.flops_per_token() / 1e9);
  out += fmt::format("workload:  {}-token prompt, {} generated, {} concurrent sequence{}, context {}\n",
                     w.prompt_tokens, w.n_gen, w.concurrency, w.concurrency == 1 ? "" : "s", w.n_ctx);
  bool first = true;
  for (const auto& n : c.nodes()) {
    // --repack's copy is the model's packed bytes on this CPU's kernels (none without AVX-512), shown once per node.
    const uint64_t packed = m.total_packed_bytes();
    const std::string packs = !n.repack ? std::string()
                              : packed > 0
                                  ? fmt::format("; --repack: +{} packed copy for the whole model", gib_text(packed))
                                  : std::string("; --repack: this CPU's kernels pack none of these weights");
    out += fmt::format("{}{}{}: {} free, {:.1f} GB/s read, {:.0f} int8 GOPS, {:.0f} f32 GFLOPS ({}){}\n",
                       first ? "nodes:     " : "           ", n.name, &n == &c.head() ? " (head)" : "",
                       gib_text(n.mem_available_bytes), n.mem_read_gbps, n.int8_gops, n.f32_gflops, n.source, packs);
    first = false;
  }
  if (c.collectives()) {
    out += "collectives: " + collectives_text(*c.collectives()) + "\n";
  } else if (c.size() > 1) {
    std::string net;
    if (const auto& d = c.default_link())
      net = fmt::format("{:g} Gbit/s, {:g} ms RTT between any two nodes", d->gbit_per_s, d->rtt_s * 1e3);
    for (const auto& l : c.links()) {
      net += fmt::format("{}{} <-> {}: {:g} Gbit/s, {:g} ms RTT", net.empty() ? "" : "; ", l.a, l.b, l.gbit_per_s,
                         l.rtt_s * 1e3);
    }
    out += "network:   " + net + "\n";
    for (const auto& l : c.group_links()) {
      out += fmt::format(
          "           {} <-> {} direct (tensor/expert-parallel groups): {:.3g} Gbit/s, {:.3g} ms RTT ({})\n", l.a, l.b,
          l.gbit_per_s, l.rtt_s * 1e3, l.source);
    }
  }
  out += "\n";

  const std::string at_c = fmt::format("decode x{}", w.concurrency);
  std::vector<std::string> header = {
      "", "#", "strategy", "nodes", "memory GiB (needs/has)", "prefill tok/s", "decode tok/s"};
  if (w.concurrency > 1) header.push_back(at_c);
  header.push_back("bottleneck");
  std::vector<std::vector<std::string>> rows;
  bool any_missing = false, any_estimate = false;
  for (size_t i = 0; i < plan.strategies.size(); ++i) {
    const Strategy& s = plan.strategies[i];
    const bool chosen = plan.chosen && *plan.chosen == i;
    std::string mark = chosen ? "*" : !s.feasible ? "x" : !s.runnable ? "~" : "";
    any_missing = any_missing || !s.feasible;
    any_estimate = any_estimate || (!s.runnable && s.feasible);
    std::vector<std::string> row = {mark,
                                    std::to_string(i + 1),
                                    s.name,
                                    nodes_cell(s),
                                    memory_cell(s),
                                    s.feasible ? tps(s.pred.prefill_tps) : "-",
                                    s.feasible ? tps(s.pred.decode_tps_1) : "-"};
    if (w.concurrency > 1) row.push_back(s.feasible ? tps(s.pred.decode_tps_c) : "-");
    row.push_back(s.feasible ? s.bottleneck : "memory capacity");
    rows.push_back(std::move(row));
  }
  out += render_table(header, rows);
  std::string legend = "  * chosen";
  if (any_missing) legend += "   x does not fit (! marks the node)";
  if (any_estimate) legend += "   ~ not runnable as is (why says what it needs)";
  out += legend + "\n\nwhy:\n";
  for (size_t i = 0; i < plan.strategies.size(); ++i) {
    out += fmt::format("  {:>2}  {}\n", i + 1, plan.strategies[i].why);
  }
  bool arithmetic = false;
  for (size_t i = 0; i < plan.strategies.size(); ++i) {
    const auto& lines = plan.strategies[i].arithmetic;
    if (lines.empty()) continue;
    if (!arithmetic)
      out += "\ntensor/expert parallel, one decoded token (each rank its share, then the collectives):\n";
    arithmetic = true;
    for (size_t l = 0; l < lines.size(); ++l) {
      out += l == 0 ? fmt::format("  {:>2}  {}\n", i + 1, lines[l]) : fmt::format("      {}\n", lines[l]);
    }
  }
  out += "\ndecision:  " + plan.decision + "\n";
  for (size_t i = 0; i < plan.advice.size(); ++i) {
    // The decision may already quote the first piece of advice.
    if (plan.decision.find(plan.advice[i]) != std::string::npos) continue;
    out += "advice:    " + plan.advice[i] + "\n";
  }
  return out;
}

}  // namespace tessera::plan
