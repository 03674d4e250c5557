// plan_for_cli: profiles the chosen nodes, plans the requests the command will serve, and renders the table with a
// plain sentence when one machine would beat the split that is about to run.
#include "plan/plan_cli.h"

#include <algorithm>
#include <filesystem>

#include "cluster/pipeline_executor.h"
#include "gguf/gguf_file.h"
#include "model/model_config.h"
#include "model/model_profile.h"
#include "plan/cluster_file.h"
#include "plan/local_node.h"
#include "plan/plan_report.h"
#include "util/error.h"

namespace tessera::plan {
namespace {

// The split the runtime will run, in the planner's names: the user's, or an even one over the workers
// (build_pipeline's default: the same byte-balanced cut).
std::optional<SplitSpec> runtime_split(const CliPlanRequest& r, const std::vector<WorkerEndpoint>& workers,
                                       const std::vector<uint64_t>& layer_bytes) {
  if (workers.empty() || !r.place_stages.empty()) return std::nullopt;
  const auto rename = [&](std::string_view typed) {
    if (typed == "local") return std::string("local");
    for (const auto& w : workers) {
      if (w.name == typed) return plan_node_name(w.name);
    }
    return std::string(typed);  // resolve_split names it as unknown, with the valid names
  };
  if (!r.split.empty()) {
    SplitSpec spec = parse_split(r.split);
    for (auto& part : spec.parts) part.node = rename(part.node);
    return spec;
  }
  const std::vector<double> even(workers.size(), 1.0);
  const auto counts = proportional_counts(layer_bytes, even);
  std::vector<LayerRange> ranges;
  int64_t first = 0;
  for (size_t i = 0; i < workers.size(); ++i) {
    if (counts[i] <= 0) fail("an even split leaves worker {} without layers", workers[i].name);
    ranges.push_back({plan_node_name(workers[i].name), first, first + counts[i] - 1});
    first += counts[i];
  }
  return parse_split(format_ranges(ranges));
}

// The --place stages in the planner's names, with the layers build_pipeline gives them: --split naming each stage by
// its first node, or an even cut by bytes over the stages.
PlanOptions::PlaceRun runtime_place(const CliPlanRequest& r, const std::vector<WorkerEndpoint>& workers,
                                    const std::vector<uint64_t>& layer_bytes) {
  const auto rename = [&](const std::string& typed) {
    for (const auto& w : workers) {
      if (w.name == typed) return plan_node_name(w.name);
    }
    return typed;
  };
  PlanOptions::PlaceRun place{r.place, r.place_stages};
  std::vector<std::string> leaders;
  for (auto& st : place.stages) {
    leaders.push_back(st.nodes.front());
    for (auto& n : st.nodes) n = rename(n);
  }
  std::vector<LayerRange> ranges;
  if (!r.split.empty()) {
    ranges = resolve_split(parse_split(r.split), leaders, layer_bytes);
  } else {
    const auto counts = proportional_counts(layer_bytes, std::vector<double>(leaders.size(), 1.0));
    int64_t first = 0;
    for (size_t i = 0; i < leaders.size(); ++i) {
      if (counts[i] <= 0) fail("an even split over the --place stages leaves {} without layers", leaders[i]);
      ranges.push_back({leaders[i], first, first + counts[i] - 1});
      first += counts[i];
    }
  }
  if (ranges.size() != place.stages.size()) {
    fail("--split {} gives layers to {} of the {} stages of --place {}", r.split, ranges.size(), place.stages.size(),
         r.place);
  }
  for (size_t i = 0; i < ranges.size(); ++i) {
    // resolve_split keeps the split's order; the stages follow it.
    const auto at = std::find(leaders.begin(), leaders.end(), ranges[i].node);
    const auto k = static_cast<size_t>(at - leaders.begin());
    place.stages[k].first = ranges[i].first;
    place.stages[k].last = ranges[i].last;
  }
  std::stable_sort(place.stages.begin(), place.stages.end(),
                   [](const PlaceStage& a, const PlaceStage& b) { return a.first < b.first; });
  return place;
}

std::string tps(double v) { return v >= 100 ? fmt::format("{:.0f}", v) : fmt::format("{:.1f}", v); }

// The ranks of an mpirun as nodes (rank0 the head) with the collectives they measured. Without profiles rank 0
// probes this machine and stands for every rank.
Cluster rank_cluster(const ParallelRun& run, const LocalProbeOptions& probe) {
  std::vector<NodeProfile> nodes = run.ranks;
  if (nodes.empty()) {
    const NodeProfile here = probe_local_node(probe);
    for (int i = 0; i < run.collectives.ranks * run.pp; ++i) {
      NodeProfile n = here;
      n.name = fmt::format("rank{}", i);
      n.source = i == 0 ? here.source : "not profiled: as rank0";
      nodes.push_back(std::move(n));
    }
  }
  // A nominal link between the ranks, for what a cluster needs of one: the ring's numbers, backwards.
  const CollectiveProfile& c = run.collectives;
  const double steps = 2.0 * std::max(c.ranks - 1, 1);
  LinkProfile link{"*", "*", std::max(0.0, 2.0 * c.latency_s / steps), 10000.0, "measured collectives"};
  if (c.seconds_per_byte > 0) {
    link.gbit_per_s = std::clamp(steps / c.ranks / c.seconds_per_byte * 8.0 / 1e9, 1e-3, 10000.0);
  }
  if (run.pp > 1 && run.p2p.measured()) {
    // Under --pp the hops between stages are the measured messages: the latency stands for RTT/2 and the message
    // overhead together (make_cli_plan zeroes the planner's own), the cost per byte for the bandwidth.
    link = {"*", "*", 2.0 * run.p2p.latency_s, 10000.0, "point-to-point measured at start"};
    if (run.p2p.seconds_per_byte > 0) link.gbit_per_s = std::clamp(8.0 / run.p2p.seconds_per_byte / 1e9, 1e-3, 1e4);
  }
  const std::string head = nodes.front().name;
  Cluster cluster(std::move(nodes), head, {}, link);
  // Under --pp the sweep ran in a stage's group, not over every rank.
  if (run.pp == 1) cluster.set_collectives(c);
  return cluster;
}

}  // namespace

CliPlan make_cli_plan(const CliPlanRequest& r, const Cluster* cluster) {
  const auto workers = parse_worker_list(r.workers);
  const auto file = gguf::GgufFile::open(r.model_path);
  const ModelConfig config = ModelConfig::from_gguf(file);
  const GgmlType kv = r.kv_type == "f32" ? GgmlType::F32 : GgmlType::F16;
  CliPlan out;
  out.model = model_cost_from_file(file, config, kv, std::filesystem::path(r.model_path).filename().string());

  LiveProbeOptions lo;
  lo.local.seconds = r.probe_seconds;
  lo.local.threads = r.threads;
  lo.worker_seconds = r.probe_seconds;
  lo.key_file = r.key_file;
  lo.group_wire_bytes = r.wire_type == "f32" ? 4 : 2;
  if (cluster != nullptr) {
    out.cluster.emplace(*cluster);
  } else if (!r.plan_cluster.empty() && !r.parallel) {
    // A deterministic plan (tests, what-ifs): the head named local, the workers as --workers names them.
    out.cluster.emplace(load_cluster_file(r.plan_cluster));
    out.cluster->set_worker_groups(r.wire_type == "f32" ? 4 : 2);
  } else if (r.parallel) {
    out.cluster.emplace(rank_cluster(*r.parallel, lo.local));
  } else if (workers.empty()) {
    out.cluster.emplace(std::vector<NodeProfile>{probe_local_node(lo.local)}, "local");
  } else {
    out.cluster.emplace(probe_live_cluster(workers, lo));
  }
  // The head's --repack packs the head's own stage only; a worker packs by its own flag, which its profile reports
  // (and its --mem-limit counts the copy).
  out.cluster->set_repack(out.cluster->head_index(), r.repack);

  PlanOptions o;
  // Over --workers a group runs with the cluster key (its members link to each other, and only the key
  // authenticates them).
  o.over_workers = !workers.empty() && !r.parallel;
  o.parallel = o.over_workers && r.key_file.empty() ? ParallelRows::Shown : ParallelRows::Runnable;
  if (o.parallel == ParallelRows::Shown) o.parallel_blocked = "over --workers it needs --key-file";
  PlanConstants constants;
  if (r.parallel) {
    o.mpi_ranks = true;
    o.run = PlanOptions::ParallelRun{r.parallel->mode, r.parallel->shares, r.parallel->ep_redundancy};
    if (r.parallel->pp > 1) {
      o.run->pp = r.parallel->pp;
      o.run->stage_layers = r.parallel->stage_layers;
      if (r.parallel->collectives.measured()) o.run->stage_collectives = r.parallel->collectives;
      // Over MPI the activations travel as f32, and the measured point-to-point already holds a message's overhead.
      constants.wire_bytes_per_value = 4.0;
      if (r.parallel->p2p.measured()) constants.message_overhead_s = 0;
    }
  }
  o.workload.prompt_tokens = r.prompt_tokens;
  o.workload.n_gen = r.n_gen;
  o.workload.concurrency = r.concurrency;
  o.workload.n_batch = r.n_batch;
  const int64_t ctx = r.n_ctx > 0 ? r.n_ctx : std::min<int64_t>(config.n_ctx_train, 4096);
  o.workload.n_ctx = std::max(ctx, r.prompt_tokens + r.n_gen);
  const auto layer_bytes = profile_model(file, config).layer_bytes;
  o.split = runtime_split(r, workers, layer_bytes);
  if (!r.place_stages.empty()) o.place = runtime_place(r, workers, layer_bytes);
  if (o.split || o.place) {
    // Predict the micro-batches that will run: the user's, or PipelineExecutor's rule (about four per stage of
    // each prompt batch, at least 16 tokens, the first and last halved).
    const auto stages = static_cast<int64_t>(o.split ? o.split->parts.size() : o.place->stages.size());
    const auto chunks =
        cluster::PipelineExecutor::prompt_chunks(std::min(r.prompt_tokens, r.n_batch), stages, r.micro_batch);
    const bool halved = chunks.size() > 2 && chunks.front() < chunks[1];
    o.workload.micro_batch = halved ? chunks[1] : chunks.front();
    o.workload.end_batch = halved ? chunks.front() : 0;
  }
  if (r.parallel && r.parallel->pp > 1) {
    // LocalExecutor's micro-batches under --pp: a prompt batch in parts of at least 64 tokens, at most 2 per stage.
    const int64_t batch = std::min(r.prompt_tokens, r.n_batch);
    const int64_t parts = std::clamp<int64_t>(batch / 64, 1, 2 * static_cast<int64_t>(r.parallel->pp));
    o.workload.micro_batch = (batch + parts - 1) / parts;
  }
  out.plan = make_plan(out.model, *out.cluster, o, constants);
  for (size_t i = 0; i < out.plan.strategies.size(); ++i) {
    const auto kind = out.plan.strategies[i].kind;
    if (kind == (o.split || o.place ? StrategyKind::UserSplit : StrategyKind::Local)) out.user = i;
  }
  if (r.parallel) out.user = out.plan.strategies.size() - 1;  // mpi_rows puts the run's own row last

  out.text = plan_text(out.plan, out.model, *out.cluster);
  const bool yours = out.user && (out.plan.strategies[*out.user].kind == StrategyKind::UserSplit || r.parallel);
  if (yours) {
    const Strategy& u = out.plan.strategies[*out.user];
    const Strategy& local = out.plan.strategies.front();
    const std::string what = r.parallel || o.place ? u.name
                             : r.split.empty()     ? "the even split over the workers (no --split given)"
                                                   : "your split";
    if (local.kind == StrategyKind::Local && local.feasible && u.feasible && local.pred.score_s < u.pred.score_s) {
      out.text += fmt::format(
          "One machine would be faster: local alone predicts {} tok/s prefill, {} tok/s decode against {} and {} "
          "for {}. Running {} as asked.\n",
          tps(local.pred.prefill_tps), tps(local.pred.decode_tps_c), tps(u.pred.prefill_tps), tps(u.pred.decode_tps_c),
          what, what);
    } else {
      out.text += fmt::format("Running {} as asked.\n", what);
    }
  }
  return out;
}

std::string plan_for_cli(const CliPlanRequest& request) {
  try {
    return make_cli_plan(request).text;
  } catch (const Error& e) {
    return fmt::format("plan: not available: {}\n", e.what());
  }
}

}  // namespace tessera::plan
