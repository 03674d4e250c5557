// bench --shard-alone: each rank's share loaded and timed alone over a SoloCommunicator, beside the planner's
// prediction of that shard on a machine that reads as this one does, and the group's collectives per token.
#include "cli/bench_shard_alone.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <nlohmann/json.hpp>

#include "cli/bench_output.h"
#include "collective/solo_communicator.h"
#include "engine/local_executor.h"
#include "hw/probe.h"
#include "plan/cluster_file.h"
#include "plan/local_node.h"
#include "plan/plan_cli.h"
#include "tensor/kernels.h"
#include "util/error.h"
#include "util/log.h"

namespace tessera {
namespace {

using Json = nlohmann::ordered_json;

plan::ParallelMode mode_of(const ModelOptions& o) {
  return o.tp > 1 && o.ep > 1 ? plan::ParallelMode::TensorExpert
         : o.tp > 1           ? plan::ParallelMode::Tensor
                              : plan::ParallelMode::Expert;
}

// The planner's view of the group for one thread count: every rank on a machine of its own that reads as this one
// probed (the same formula as any plan: its share's bytes / (read rate x bandwidth_efficiency) + overheads), joined
// by the links of --plan-cluster.
struct Prediction {
  plan::Strategy group;  // "your --tp N"
  plan::Strategy local;  // this machine alone
  double read_gbps = 0;
  bool links = false;  // the collectives are priced (--plan-cluster)
  std::string link_text;
};

Prediction predict(const ShardAloneRun& run, int n, int threads, int64_t n_gen) {
  plan::LocalProbeOptions po;
  po.seconds = run.probe_seconds;
  po.threads = threads;
  po.use_cache = false;  // a cached probe may be of another load
  plan::NodeProfile here = plan::probe_local_node(po);
  // Machines of their own: no machine id, so the cost model gives each rank the whole read rate.
  here.machine.clear();
  here.cpus.clear();
  std::vector<plan::NodeProfile> nodes;
  for (int r = 0; r < n; ++r) {
    plan::NodeProfile node = here;
    node.name = fmt::format("rank{}", r);
    node.source = "this machine's probe, as a machine of its own";
    nodes.push_back(std::move(node));
  }
  Prediction p;
  p.read_gbps = here.mem_read_gbps;
  plan::LinkProfile link{"*", "*", 0.0, 10000.0, "none (no --plan-cluster)"};
  if (!run.plan_cluster.empty()) {
    const plan::Cluster file = plan::load_cluster_file(run.plan_cluster);
    const auto names = file.node_name_list();
    if (names.size() < 2) fail("--plan-cluster {}: the collectives need a link, and it has one node", run.plan_cluster);
    link = file.link(names[0], names[1]);
    p.links = true;
    p.link_text = fmt::format("{} <-> {} of {} ({:.3g} Gbit/s, {:.3g} ms RTT)", names[0], names[1], run.plan_cluster,
                              link.gbit_per_s, link.rtt_s * 1e3);
    link.a = link.b = "*";
  }
  const plan::Cluster cluster(std::move(nodes), "rank0", {}, link);
  plan::CliPlanRequest req;
  req.model_path = run.model.model;
  req.threads = threads;
  req.prompt_tokens = 1;  // a generation test starts from a one-token context
  req.n_gen = std::max<int64_t>(n_gen, 1);
  req.n_ctx = run.model.n_ctx;
  req.n_batch = run.model.n_batch;
  req.kv_type = run.model.kv_type;
  req.repack = run.model.repack;
  auto pr = std::make_shared<plan::ParallelRun>();
  pr->mode = mode_of(run.model);
  pr->ep_redundancy = run.model.ep > 1 ? run.model.ep_redundancy : 0.0;
  if (!run.model.tp_shares.empty()) pr->shares = parse_shares(run.model.tp_shares, n);
  pr->collectives.ranks = n;
  req.parallel = pr;
  const plan::CliPlan plan = plan::make_cli_plan(req, &cluster);
  if (!plan.user) fail("internal: the plan has no row for the layout");
  p.group = plan.plan.strategies[*plan.user];
  p.local = plan.plan.strategies.front();
  if (!p.group.is_parallel()) fail("internal: the layout's row is not a group");
  return p;
}

std::string ms(double s) { return fmt::format("{:.2f}", s * 1e3); }

// One rank's row: its measured test, what it holds, and the planner's figures for a generation test.
struct ShardRow {
  int rank = 0;
  uint64_t weight_bytes = 0;  // the rank's weights as loaded (the table at load's "weights")
  BenchResult result;
  const Prediction* pred = nullptr;
  bool decode() const {
    const BenchTest& t = result.timing.test;
    return t.n_prompt == 0 && t.n_gen > 0 && t.n_seq == 1 && t.n_depth == 0;  // as the plan's workload
  }
  double s_per_token() const { return result.timing.avg_ts > 0 ? 1.0 / result.timing.avg_ts : 0.0; }
  const plan::RankPass& planned() const {
    return pred->group.parallel.front().decode.ranks.at(static_cast<size_t>(rank));
  }
};

class ShardPrinter {
 public:
  ShardPrinter(std::string format, std::string layout, int ranks)
      : format_(std::move(format)), layout_(std::move(layout)), ranks_(ranks), cpu_(cpu_model_name()) {}

  void header() {
    if (format_ == "json") fmt::print("[");
    if (format_ != "md") return;
    std::vector<std::string> names, rules;
    for (const auto& [name, width] : kColumns) {
      names.push_back(name);
      rules.push_back(std::string(static_cast<size_t>(std::abs(width) - 1), '-') + (width > 0 ? ":" : "-"));
    }
    print_line(names);
    print_line(rules);
  }

  void row(const ShardRow& s) {
    const BenchResult& r = s.result;
    const auto& coll = r.timing.collectives;
    const bool dec = s.decode();
    const double pred_s = dec ? s.planned().t.total() : 0.0;
    if (format_ == "md") {
      print_line({r.model.type, layout_, fmt::format("{}", s.rank), fmt::format("{}", r.n_threads),
                  r.timing.test.name(), fmt::format("{:.2f} ± {:.2f}", r.timing.avg_ts, r.timing.stddev_ts),
                  ms(s.s_per_token()), fmt::format("{:.1f}", static_cast<double>(s.weight_bytes) / (1 << 20)),
                  dec ? fmt::format("{:.1f}", s.planned().bytes / 1e6) : "", dec ? ms(pred_s) : "",
                  dec && pred_s > 0 ? fmt::format("{:.2f}", s.s_per_token() / pred_s) : "",
                  coll ? fmt::format("{:.2f}", coll->calls) : "", coll ? fmt::format("{:.0f}", coll->bytes) : ""});
    } else {
      Json j = bench_result_json(r, cpu_);
      Json shard = {{"rank", s.rank},
                    {"ranks", ranks_},
                    {"layout", layout_},
                    {"weight_bytes", s.weight_bytes},
                    {"read_bytes_per_token", dec ? Json(s.planned().bytes) : Json(nullptr)},
                    {"predicted_shard_s", dec ? Json(pred_s) : Json(nullptr)},
                    {"read_gbps", s.pred->read_gbps}};
      if (format_ == "csv") {
        for (const auto& [k, v] : shard.items()) j["shard_" + k] = v;
        print_bench_csv(j, first_);
      } else {
        j["shard_alone"] = shard;
        std::string text = j.dump(2);
        std::string indented = "  ";
        for (char c : text) indented += c == '\n' ? std::string("\n  ") : std::string(1, c);
        fmt::print("{}\n{}", first_ ? "" : ",", indented);
      }
    }
    first_ = false;
    std::fflush(stdout);
  }

  void footer() {
    if (format_ == "json") fmt::print("\n]\n");
    std::fflush(stdout);
  }

 private:
  // bench's markdown style: a width per column, negative for left-aligned.
  static constexpr std::pair<const char*, int> kColumns[] = {
      {"model", -30},   {"layout", -16},    {"rank", 4},         {"threads", 7},        {"test", 13},
      {"t/s", 20},      {"ms/token", 9},    {"weights MiB", 11}, {"read MB/token", 13}, {"predicted ms", 12},
      {"meas/pred", 9}, {"coll/token", 10}, {"coll B/token", 12}};
  static void print_line(const std::vector<std::string>& cells) {
    std::string line = "|";
    for (size_t i = 0; i < cells.size(); ++i) {
      const int w = std::abs(kColumns[i].second);
      line += kColumns[i].second < 0 ? fmt::format(" {:<{}} |", cells[i], w) : fmt::format(" {:>{}} |", cells[i], w);
    }
    fmt::print("{}\n", line);
  }
  std::string format_, layout_;
  int ranks_;
  std::string cpu_;
  bool first_ = true;
};

// The per-token arithmetic for machines of their own: the slowest shard measured alone, plus the collectives the
// group makes per token (priced over --plan-cluster's links), against the planner's same sum.
std::string arithmetic(const std::vector<ShardRow>& rows, const std::string& layout, int n) {
  std::map<std::pair<int, std::string>, std::vector<const ShardRow*>> tests;
  for (const ShardRow& s : rows) {
    if (s.decode()) tests[{s.result.n_threads, s.result.timing.test.name()}].push_back(&s);
  }
  std::string out;
  for (const auto& [key, list] : tests) {
    const Prediction& p = *list.front()->pred;
    const plan::GroupPass& d = p.group.parallel.front().decode;
    const ShardRow* slowest = *std::max_element(list.begin(), list.end(), [](const ShardRow* a, const ShardRow* b) {
      return a->s_per_token() < b->s_per_token();
    });
    out += fmt::format(
        "\n{} {}, {} thread(s), each rank alone on this machine ({:.1f} GB/s read, probed now), as on {} machines of "
        "their own:\n",
        layout, key.second, key.first, p.read_gbps, n);
    for (const ShardRow* s : list) {
      out += fmt::format(
          "  rank {}: measured {} ms per token, predicted {} ms ({:.1f} MB at {:.1f} GB/s x {:.2f} + "
          "overheads)\n",
          s->rank, ms(s->s_per_token()), ms(s->planned().t.total()), s->planned().bytes / 1e6, p.read_gbps,
          plan::PlanConstants{}.bandwidth_efficiency);
    }
    const auto& coll = slowest->result.timing.collectives;
    out += fmt::format(
        "  the group's collectives per token: {} all-reduces of {:.1f} KiB and {} small (the planner); "
        "counted alone: {:.2f} calls, {:.0f} bytes sent by rank {}\n",
        d.all_reduces, d.all_reduce_bytes / 1024, d.other_collectives, coll ? coll->calls : 0.0,
        coll ? coll->bytes : 0.0, slowest->rank);
    const double shard_s = slowest->s_per_token();
    const double planned_shard_s = d.ranks[d.slowest].t.total();
    if (!p.links) {
      out += fmt::format(
          "  slowest shard measured: rank {} {} ms (the planner's slowest: rank {} {} ms); give --plan-cluster FILE to "
          "price the collectives over its links\n",
          slowest->rank, ms(shard_s), d.slowest, ms(planned_shard_s));
      continue;
    }
    const double coll_s = d.collectives.total();
    const double total = shard_s + coll_s;
    const double planned = 1.0 / p.group.pred.decode_tps_1;
    out += fmt::format(
        "  = rank {}'s {} ms measured + collectives over {}: {} x {:.0f} us + {:.0f} us = {} ms\n"
        "  = {} ms per token, {:.1f} tok/s decode; the planner: {} ms slowest shard + {} ms = {} ms, {:.1f} tok/s; "
        "this "
        "machine alone (planner): {:.1f} tok/s\n",
        slowest->rank, ms(shard_s), p.link_text, d.all_reduces, d.all_reduce_s * 1e6, d.other_s * 1e6, ms(coll_s),
        ms(total), 1.0 / total, ms(planned_shard_s), ms(coll_s), ms(planned), p.group.pred.decode_tps_1,
        p.local.pred.decode_tps_1);
  }
  return out;
}

}  // namespace

std::optional<int> parse_shard_alone(const std::string& text) {
  if (text == "all") return std::nullopt;
  try {
    size_t used = 0;
    const int r = std::stoi(text, &used);
    if (used == text.size() && r >= 0) return r;
  } catch (const std::exception&) {
  }
  fail("--shard-alone {}: give a rank (0, 1, ...) or nothing for every rank in turn", text);
}

int run_shard_alone(const ShardAloneRun& run) {
  const ModelOptions& o = run.model;
  const int n = std::max(o.tp, o.ep);
  if (n < 2) fail("--shard-alone times one rank of a group: give --tp N or --ep N (N >= 2)");
  if (o.pp > 1) fail("--shard-alone: one rank of a --tp/--ep group; --pp stages are not timed alone");
  if (o.tp > 1 && o.ep > 1 && o.tp != o.ep) {
    fail("--tp {} and --ep {}: with both, the same ranks split the layers and hold the experts (give equal N)", o.tp,
         o.ep);
  }
  if (run.rank && *run.rank >= n) fail("--shard-alone {}: the group has ranks 0 to {}", *run.rank, n - 1);
  const auto weights = ModelWeights::load(o.model);
  const ModelConfig& c = weights->config();
  if (o.ep > 1 && c.n_expert == 0) fail("--ep {}: {} has no experts", o.ep, o.model);
  const std::string layout = plan::parallel_flags(mode_of(o), n, o.ep > 1 ? o.ep_redundancy : kDefaultEpRedundancy) +
                             (o.tp_shares.empty() ? "" : " --tp-shares " + o.tp_shares);
  log_warn(
      "bench --shard-alone: each rank of {} runs alone with stand-in collectives that add nothing: only the timings "
      "and counts are meaningful, its logits and tokens are not the model's",
      layout);
  const BenchModel model = describe_bench_model(o.model, *weights);
  const int64_t n_slots = bench_slots(run.config);
  std::vector<int> threads = run.config.threads;
  if (threads.empty()) threads.push_back(available_cores());
  int64_t n_gen = 1;
  for (int64_t g : run.config.n_gen) n_gen = std::max(n_gen, g);
  std::map<int, Prediction> preds;
  for (int t : threads) preds.emplace(t, predict(run, n, t, n_gen));

  BenchConfig config = run.config;
  config.probe = false;  // the planner's probe above gives the read rate
  ShardPrinter printer(run.output, layout, n);
  printer.header();
  std::vector<ShardRow> rows;
  for (int r = 0; r < n; ++r) {
    if (run.rank && *run.rank != r) continue;
    const ShardSpec spec = shard_spec(o, r);
    uint64_t held = 0;
    const ExecutorFactory make = [&](int t) -> std::unique_ptr<Executor> {
      StageOptions so = stage_options(o, c, n_slots);
      so.shard = spec;
      // A gather's other parts (the logits of the other ranks' vocabulary) sized as they would come.
      auto vocab = [spec, c](int rank) {
        ShardSpec s = spec;
        s.rank = rank;
        const auto [v0, v1] = share_range(c.n_vocab, s, "the vocabulary");
        return static_cast<size_t>(v1 - v0);
      };
      auto solo = std::make_shared<collective::SoloCommunicator>(r, n, [vocab, r](int peer, size_t mine) {
        const size_t own = vocab(r);
        return own > 0 && mine % own == 0 ? mine / own * vocab(peer) : mine;
      });
      auto e = std::make_unique<LocalExecutor>(weights, so, t, o.pin, solo);
      held = e->stage().copied_bytes();
      log_info("bench --shard-alone: rank {} of {} holds {:.1f} MiB of weights", r, n,
               static_cast<double>(held) / (1 << 20));
      return e;
    };
    const auto on_result = [&](const BenchResult& res) {
      ShardRow s{r, held, res, &preds.at(res.n_threads)};
      printer.row(s);
      rows.push_back(std::move(s));
    };
    run_benchmarks(config, model, make, on_result, {});
  }
  printer.footer();
  fmt::print(run.output == "md" ? stdout : stderr, "{}", arithmetic(rows, layout, n));
  std::fflush(stdout);
  return 0;
}

}  // namespace tessera
