// Building a pipeline from the command line: parse the worker list and the split, then create the stages in
// layer order (the head's own part, `local`, runs on the head).
#include "cli/cluster_options.h"

#include <map>
#include <thread>

#include "cli/place_spec.h"
#include "cli/table.h"
#include "cluster/local_stage_endpoint.h"
#include "cluster/micro_batches.h"
#include "cluster/model_identity.h"
#include "cluster/pipeline_executor.h"
#include "cluster/progress.h"
#include "cluster/remote_stage_endpoint.h"
#include "cluster/stage_group.h"
#include "cluster/stage_memory.h"
#include "cluster/stage_recovery.h"
#include "model/model_profile.h"
#include "plan/split_spec.h"
#include "util/error.h"
#include "util/log.h"

namespace tessera {

void add_cluster_options(CLI::App& app, ClusterOptions& o) {
  app.add_option("--workers", o.workers, "Worker daemons: name=host:port,... (the head itself is 'local')");
  app.add_option("--split", o.split, "Layers per node: 0-10@local,11-21@b or proportions a:1,b:2 (default: even)");
  app.add_option("--place", o.place,
                 "Pipeline stages in order, each a node or a group of nodes sharing its layers: local,tp(a,b) or "
                 "tp(local,a),ep(b,c) (default: each worker a stage)");
  app.add_option("--key-file", o.key_file, "The cluster key (tessera keygen); required off loopback");
  app.add_option("--wire-type", o.wire_type, "Activations on the wire: f32, f16 or bf16")
      ->check(CLI::IsMember({"f32", "f16", "bf16"}))
      ->capture_default_str();
  app.add_option("--micro-batch", o.micro_batch, "Prompt tokens per pipeline micro-batch (0: automatic)")
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 20));
  app.add_option("--plan-cluster", o.plan_cluster,
                 "Plan with the nodes and links of this cluster.json (docs/planner.md; the head named local, the "
                 "workers as --workers names them) instead of probing the workers");
  app.add_option("--spare", o.spares,
                 "A spare worker HOST:PORT that takes a failed stage (repeatable); 'local': this process, if it fits");
  app.add_option("--deadline-factor", o.deadline_factor,
                 "A worker's step that takes more than this x its usual time (+ --deadline-slack) is a fault")
      ->check(CLI::Range(1.0, 1000.0))
      ->capture_default_str();
  app.add_option("--deadline-slack", o.deadline_slack, "Seconds added to every step deadline")
      ->check(CLI::Range(0.0, 3600.0))
      ->capture_default_str();
  app.add_option("--recovery-timeout", o.recovery_timeout,
                 "Seconds to replace a failed worker and replay its sequences before their requests fail (0: no "
                 "recovery)")
      ->check(CLI::Range(0.0, 86400.0))
      ->capture_default_str();
}

std::vector<WorkerAddress> parse_workers(const std::string& text) {
  if (text.empty()) fail("--workers: no workers given");
  return plan::parse_worker_list(text);
}

std::vector<std::string> worker_names(const std::string& text) {
  std::vector<std::string> out;
  for (const auto& w : parse_workers(text)) out.push_back(w.name);
  return out;
}

void use_workers_as_ranks(ModelOptions& mo, ClusterOptions& co) {
  if (!co.place.empty() && !co.enabled()) fail("--place {}: needs --workers (the nodes it names)", co.place);
  if (!co.place.empty() && !mo.tp_shares.empty()) {
    fail(
        "--place gives a group's shares after its members' names (tp(local:2,a): local holds 2 parts, a 1): leave "
        "out --tp-shares");
  }
  if (!co.enabled() || (mo.tp <= 1 && mo.ep <= 1)) return;
  if (!co.place.empty()) fail("--place gives each stage's group itself (tp(a,b)): leave out --tp/--ep");
  if (!co.split.empty()) fail("--split is for pipelines: under --tp/--ep every worker holds a share of every layer");
  if (!co.spares.empty()) fail("--spare is for pipelines: a group over --workers has no spare ranks");
  mo.rank_workers = co.workers;
  mo.rank_key_file = co.key_file;
  mo.rank_wire = co.wire_type;
  co.workers.clear();
}

std::unique_ptr<Executor> build_pipeline(const LoadedModel& model, const ModelOptions& mo, const ClusterOptions& co,
                                         int64_t n_slots) {
  const auto workers = parse_workers(co.workers);
  const ModelConfig& c = model.weights->config();
  const ModelProfile profile = profile_model(model.weights->source(), c);
  std::vector<std::string> names = {"local"};
  for (const auto& w : workers) names.push_back(w.name);

  std::vector<std::string> worker_names;
  for (const auto& w : workers) worker_names.push_back(w.name);
  const std::vector<PlacedStage> placed =
      co.place.empty() ? std::vector<PlacedStage>{} : parse_place(co.place, worker_names);
  std::vector<std::string> leaders;
  for (const auto& p : placed) leaders.push_back(p.leader());

  std::vector<plan::LayerRange> ranges;
  if (!co.split.empty()) {
    ranges = plan::resolve_split(plan::parse_split(co.split), placed.empty() ? names : leaders, profile.layer_bytes);
    if (!placed.empty() && ranges.size() != placed.size()) {
      fail("--split {} gives layers to {} of the {} stages of --place {}: name every stage by its first node", co.split,
           ranges.size(), placed.size(), co.place);
    }
  } else {
    // Even by bytes over the stages: the --place stages, or each worker.
    const std::vector<std::string>& stage_nodes = placed.empty() ? worker_names : leaders;
    const std::vector<double> even(stage_nodes.size(), 1.0);
    const auto counts = plan::proportional_counts(profile.layer_bytes, even);
    int64_t first = 0;
    for (size_t i = 0; i < stage_nodes.size(); ++i) {
      if (counts[i] <= 0) {
        fail(
            "an even split of {} layers over {} stages leaves {} without layers; name fewer stages or "
            "use --split",
            c.n_layer, stage_nodes.size(), placed.empty() ? stage_nodes[i] : placed[i].text());
      }
      ranges.push_back({stage_nodes[i], first, first + counts[i] - 1});
      first += counts[i];
    }
  }
  // The stage each range's node leads: its --place entry, or the node alone.
  const auto stage_of = [&](const std::string& node) {
    const auto it =
        std::find_if(placed.begin(), placed.end(), [&](const PlacedStage& p) { return p.leader() == node; });
    return it != placed.end() ? *it : PlacedStage{{node}};
  };
  const auto address_of = [&](const std::string& node) {
    return std::find_if(workers.begin(), workers.end(), [&](const auto& w) { return w.name == node; })->address;
  };

  const auto pool = co.pool ? co.pool : std::make_shared<cluster::WorkerPool>();
  for (const auto& spare : co.spares) pool->add_spare(spare);
  std::optional<net::ClusterKey> key;
  if (!co.key_file.empty()) key = net::load_cluster_key(co.key_file);
  const bool grouped = std::any_of(placed.begin(), placed.end(), [](const PlacedStage& p) { return p.group(); });
  if (grouped && !key) {
    fail(
        "--place {}: a group's members link to each other, and only the cluster key authenticates them: give "
        "--key-file",
        co.place);
  }
  const net::Hash128 model_hash = grouped ? cluster::model_identity(model.weights->file()) : net::Hash128{};
  const auto wire = net::wire_type_from_name(co.wire_type);
  const StageOptions so = stage_options(mo, c, n_slots);
  // The largest micro-batch a stage sees: a prompt chunk of n_batch tokens, or one token of every slot.
  const int64_t max_batch = std::max<int64_t>(mo.n_batch, so.n_slots);
  cluster::PipelineOptions po;
  po.micro_batch = co.micro_batch;
  po.deadline.factor = co.deadline_factor;
  po.deadline.slack_seconds = co.deadline_slack;
  po.replay_chunk = mo.n_batch;
  po.recovery_timeout = std::chrono::milliseconds(static_cast<int64_t>(co.recovery_timeout * 1000));
  auto pipeline = std::make_unique<cluster::PipelineExecutor>(c, so.n_ctx, so.n_slots, po);
  const int threads = mo.threads > 0 ? mo.threads : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  std::map<int, cluster::StageGroupPlan> group_plans;  // the group stages, for recovery to re-form

  TextTable table({"node", "layers", "weights", "KV cache", "buffers", "sent", "prompt t/s by batch (measured)",
                   "link (measured at connect)"});
  for (size_t i = 0; i < ranges.size(); ++i) {
    const auto& r = ranges[i];
    const LayerRange layers{r.first, r.last + 1};
    const bool first = i == 0;
    const bool last = i + 1 == ranges.size();
    const PlacedStage placed_stage = stage_of(r.node);
    const std::string node = placed_stage.text();
    // A group's members (ranks 1..): the workers after its leader.
    std::vector<cluster::GroupWorker> members;
    for (size_t m = 1; m < placed_stage.members.size(); ++m) {
      members.push_back({placed_stage.members[m], address_of(placed_stage.members[m])});
      pool->add_busy(members.back().address);
    }
    net::GroupJoin join;
    if (placed_stage.group()) {
      join.file_name = std::filesystem::path(model.weights->file().name()).filename().string();
      join.file_size = model.weights->file().file_size();
      join.model_hash = model_hash;
      join.tp = placed_stage.tp;
      join.ep = placed_stage.ep;
      join.n_slots = static_cast<uint32_t>(so.n_slots);
      join.n_ctx = static_cast<uint32_t>(so.n_ctx);
      join.kv_type = so.kv_type;
      join.wire_type = *wire;
      join.threads = static_cast<uint16_t>(std::max(0, mo.threads));
      join.exact_gelu = so.exact_gelu;
      join.timeout_s = static_cast<float>(mo.collective_timeout);
      join.layer_begin = static_cast<uint32_t>(layers.begin);
      join.layer_end = static_cast<uint32_t>(layers.end);
      join.shares = placed_stage.shares_text();
      join.ep_redundancy = placed_stage.ep ? mo.ep_redundancy : 0.0f;
      if (placed_stage.ep && c.n_expert == 0) fail("--place {}: {} has no experts", node, mo.model);
      log_info("--place: {} holds layers {}-{}{}{}", node, r.first, r.last,
               join.shares.empty() ? ", equal shares" : ", shares " + join.shares,
               placed_stage.ep ? fmt::format(", --ep-redundancy {:g}", join.ep_redundancy) : "");
    }
    if (r.node == "local") {
      auto w = ModelWeights::load(model.weights->file().name(), layers, first, last);
      StageOptions stage_so = so;
      std::shared_ptr<collective::Communicator> group;
      if (placed_stage.group()) {
        // A member without the model receives its share of these layers from the head, which leads.
        group = cluster::start_stage_group(join, "head", members, *key,
                                           cluster::stage_shares(w, join, static_cast<int>(members.size()) + 1));
        stage_so.shard = cluster::stage_group_shard(join, 0, static_cast<int>(placed_stage.members.size()));
        // For recovery: the head, still alive when a member dies, leads the re-formed group.
        cluster::StageGroupPlan gp;
        gp.nodes = {{"local", ""}};
        gp.head_join = join;
        for (const auto& m : members) gp.nodes.push_back({m.name, m.address});
        group_plans[static_cast<int>(i)] = std::move(gp);
      }
      uint64_t mapped = first ? profile.embd_bytes : 0;
      if (last) mapped += profile.output_bytes + (c.tied_output && !first ? profile.embd_bytes : 0);
      for (int64_t l = r.first; l <= r.last; ++l) mapped += profile.layer_bytes[static_cast<size_t>(l)];
      auto ep = std::make_unique<cluster::LocalStageEndpoint>("local", static_cast<int>(i), w, stage_so, threads,
                                                              pipeline->completions(), mo.pin, group);
      // A group's row shows the head's share (copied), not the layers' bytes in the file.
      if (group) mapped = ep->weight_bytes();
      // As a worker reports it: the weights column includes the packed copy of --repack.
      const uint64_t packed = ep->packed_bytes();
      const std::string how =
          fmt::format(" ({}{})", so.copy_weights ? "copied" : "mapped", packed > 0 ? " + packed" : "");
      table.add_row({node, fmt::format("{}-{}", r.first, r.last), human_bytes(mapped + packed) + how,
                     human_bytes(ep->kv_bytes()),
                     human_bytes(cluster::stage_buffer_bytes(c, max_batch, so.n_ctx, last)), "0 B",
                     cluster::describe_batch_times(ep->batch_times()), "-"});
      pipeline->add_stage(std::move(ep));
      continue;
    }
    cluster::RemoteStageOptions ro;
    ro.stage = so;
    ro.wire = *wire;
    ro.max_batch = max_batch;
    for (const auto& m : members) ro.group.push_back({m.name, m.address});
    ro.group_tp = placed_stage.tp;
    ro.group_ep = placed_stage.ep;
    ro.group_timeout_s = static_cast<float>(mo.collective_timeout);
    ro.group_shares = join.shares;
    ro.group_ep_redundancy = join.ep_redundancy;
    ro.model_hash = model_hash;
    std::unique_ptr<cluster::TransferProgress> sending;
    ro.progress = [&](uint64_t done, uint64_t total) {
      if (!sending)
        sending = std::make_unique<cluster::TransferProgress>(fmt::format("sending weights to {}", r.node), total);
      sending->update(done);
    };
    auto ep = std::make_unique<cluster::RemoteStageEndpoint>(r.node, address_of(r.node), key ? &*key : nullptr,
                                                             static_cast<int>(i), *model.weights, layers, first, last,
                                                             ro, pipeline->completions());
    pool->add_busy(address_of(r.node));
    if (placed_stage.group()) {
      cluster::StageGroupPlan gp{{{r.node, address_of(r.node)}}, ro.group_tp,        ro.group_ep, ro.group_shares,
                                 ro.group_ep_redundancy,         ro.group_timeout_s, model_hash,  std::nullopt};
      gp.nodes.insert(gp.nodes.end(), ro.group.begin(), ro.group.end());
      group_plans[static_cast<int>(i)] = std::move(gp);
    }
    const auto& rep = ep->load_report();
    table.add_row({node, fmt::format("{}-{}", r.first, r.last), human_bytes(rep.weights_bytes),
                   human_bytes(rep.kv_bytes), human_bytes(rep.buffer_bytes), human_bytes(rep.weight_bytes_sent),
                   cluster::describe_batch_times(ep->batch_times()), net::describe(ep->link())});
    pipeline->add_stage(std::move(ep));
  }
  pipeline->check_complete();
  if (co.recovery_timeout > 0) {
    cluster::ReplacementOptions ro;
    ro.remote.stage = so;
    ro.remote.wire = *wire;
    ro.remote.max_batch = max_batch;
    ro.key = key;
    ro.local_stage = so;
    ro.local_threads = threads;
    ro.local_pin = mo.pin;
    ro.groups = group_plans;
    auto replacer = std::make_shared<cluster::StageReplacer>(model.weights, pool, std::move(ro));
    pipeline->set_recovery([replacer](int index, const cluster::StageEndpoint& failed, bool first, bool last,
                                      cluster::CompletionQueue& done, std::chrono::steady_clock::time_point deadline) {
      return replacer->replace(index, failed, first, last, done, deadline);
    });
  }
  log_info("pipeline: {}\n{}{}-token prompt chunks: {}{}", plan::format_ranges(ranges), table.render("  "), mo.n_batch,
           cluster::describe_chunks(pipeline->prompt_cut(mo.n_batch)),
           co.micro_batch > 0 ? " (--micro-batch)" : " (the fastest the stages' measured batch times predict)");
  return pipeline;
}

}  // namespace tessera
