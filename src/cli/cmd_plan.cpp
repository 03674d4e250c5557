// `tessera plan`: predicts prefill and decode speed of every way to run a model on this machine or a cluster (real
// or described in cluster.json), picks the fastest that fits and says why. Exit 1 when nothing fits.
#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "cli/commands.h"
#include "cli/model_options.h"
#include "cli/place_spec.h"
#include "model/model_config.h"
#include "plan/cluster_file.h"
#include "plan/live_cluster.h"
#include "plan/local_node.h"
#include "plan/plan_report.h"
#include "util/error.h"

namespace tessera {
namespace {

struct PlanArgs {
  std::string model;
  std::string shape;
  std::string type = "q4_k_m";
  bool list_shapes = false;
  std::string cluster;
  std::vector<std::string> workers;
  std::string key_file;
  std::string wire_type = "f16";
  std::string local_profile;
  double probe_seconds = 1.0;
  bool no_probe_cache = false;
  int64_t prompt = 512;
  int64_t n_gen = 128;
  int64_t concurrency = 1;
  int64_t n_ctx = 0;
  int64_t n_batch = 512;
  int64_t micro_batch = 0;
  std::string kv_type = "f16";
  std::string split;
  std::string place;
  double ep_redundancy = kDefaultEpRedundancy;
  bool distribute = false;
  bool no_parallel = false;
  bool all_subsets = false;
  bool json = false;
  bool repack = false;
};

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail("{}: cannot open", path);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

int list_shapes() {
  fmt::print("{:<18} {:<9} {:>6} {:>6} {:>6} {:>7} {:>8}\n", "shape", "arch", "layers", "embd", "heads", "experts",
             "params");
  for (const auto& p : plan::shape_presets()) {
    const auto cost = plan::model_cost_from_shape(p.config, quant_mix_from_name("f16"), GgmlType::F16, "");
    fmt::print("{:<18} {:<9} {:>6} {:>6} {:>6} {:>7} {:>7.1f}B\n", p.name, p.config.arch_name, p.config.n_layer,
               p.config.n_embd, p.config.n_head,
               p.config.n_expert ? fmt::format("{}/{}", p.config.n_expert_used, p.config.n_expert) : "-",
               static_cast<double>(cost.n_params) / 1e9);
  }
  return 0;
}

int run_plan(const PlanArgs& a) {
  if (a.list_shapes) return list_shapes();
  if (!a.workers.empty() && !a.cluster.empty()) fail("give either --workers (live) or --cluster (described), not both");
  if (!a.shape.empty() && !a.model.empty()) fail("give either -m FILE or --model-shape NAME, not both");
  if (!a.cluster.empty() && !a.local_profile.empty()) {
    fail("--local-profile describes this machine when there is no --cluster; describe the head in the cluster file");
  }
  const GgmlType kv = a.kv_type == "f32" ? GgmlType::F32 : GgmlType::F16;

  plan::ModelCost model;
  if (!a.shape.empty()) {
    const auto preset = plan::shape_preset(a.shape);
    const QuantMix mix = quant_mix_from_name(a.type);
    std::string upper(mix.name);
    for (auto& ch : upper) ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
    model = plan::model_cost_from_shape(preset.config, mix, kv, fmt::format("{} {} (estimate)", preset.display, upper));
    model.type = upper;
  } else {
    const std::string path = a.model.empty() ? default_model_path() : a.model;
    const auto file = gguf::GgufFile::open(path);
    const ModelConfig config = ModelConfig::from_gguf(file);
    model = plan::model_cost_from_file(file, config, kv, std::filesystem::path(path).filename().string());
  }

  plan::PlanOptions o;
  o.workload.prompt_tokens = a.prompt;
  o.workload.n_gen = a.n_gen;
  o.workload.concurrency = a.concurrency;
  o.workload.n_batch = a.n_batch;
  o.workload.micro_batch = a.micro_batch;
  // The default context is the model's, at most 4096 as for run, and never shorter than the request.
  o.workload.n_ctx =
      a.n_ctx > 0 ? a.n_ctx : std::max<int64_t>(std::min<int64_t>(model.config.n_ctx_train, 4096), a.prompt + a.n_gen);
  o.distribute = a.distribute;
  // A cluster file's nodes can be MPI ranks (mpirun -np N --host ...); live workers form groups over their own
  // links (run --tp N --workers ...), which needs the cluster key.
  o.over_workers = !a.workers.empty();
  o.parallel = a.no_parallel                          ? plan::ParallelRows::Off
               : o.over_workers && a.key_file.empty() ? plan::ParallelRows::Shown
                                                      : plan::ParallelRows::Runnable;
  if (o.parallel == plan::ParallelRows::Shown) o.parallel_blocked = "over --workers it needs --key-file";
  o.all_subsets = a.all_subsets;
  if (!a.split.empty()) o.split = plan::parse_split(a.split);

  std::optional<plan::Cluster> cluster;
  if (!a.cluster.empty()) {
    cluster.emplace(plan::load_cluster_file(a.cluster));
  } else {
    plan::NodeProfile local;
    if (!a.local_profile.empty()) {
      local = plan::node_from_probe_json(read_text(a.local_profile), a.local_profile);
    } else {
      plan::LocalProbeOptions po;
      po.seconds = a.probe_seconds;
      po.use_cache = !a.no_probe_cache;
      local = plan::probe_local_node(po);
    }
    if (a.workers.empty()) {
      cluster.emplace(std::vector<plan::NodeProfile>{local}, "local");
    } else {
      // Each worker reports its own profile and the link to it is measured (docs/planner.md, "Live workers").
      std::string list;
      for (const auto& w : a.workers) list += (list.empty() ? "" : ",") + w;
      plan::LiveProbeOptions lo;
      lo.worker_seconds = a.probe_seconds;
      lo.key_file = a.key_file;
      lo.group_wire_bytes = a.wire_type == "f32" ? 4 : 2;
      cluster.emplace(plan::live_cluster(local, plan::parse_worker_list(list), lo));
    }
  }
  if (a.distribute && cluster->size() < 2) fail("--distribute needs at least two nodes (--cluster or --workers)");
  // Every node packs as run/worker --repack would on this CPU: each stage then also needs the packed copy.
  for (size_t i = 0; a.repack && i < cluster->size(); ++i) cluster->set_repack(i, true);

  if (!a.place.empty()) {
    // The nodes by the cluster's names, the head as `local`.
    std::vector<std::string> others;
    for (size_t i = 0; i < cluster->size(); ++i) {
      if (i != cluster->head_index()) others.push_back(cluster->nodes()[i].name);
    }
    auto stages = place_for_plan(a.place, others, a.ep_redundancy);
    for (auto& st : stages) {
      for (auto& n : st.nodes) {
        if (n == "local") n = cluster->head().name;
      }
    }
    o.place = plan::PlanOptions::PlaceRun{a.place, std::move(stages)};
  }
  const plan::Plan p = plan::make_plan(model, *cluster, o);
  if (a.json) {
    fmt::print("{}\n", plan::plan_json(p, model, *cluster).dump(2));
  } else {
    fmt::print("{}", plan::plan_text(p, model, *cluster));
  }
  std::fflush(stdout);
  if (!p.chosen) {
    fmt::print(stderr, "error: no plan to run: {}\n", p.decision);
    return 1;
  }
  return 0;
}

}  // namespace

Command add_plan_command(CLI::App& root) {
  auto a = std::make_shared<PlanArgs>();
  CLI::App* app = root.add_subcommand(
      "plan", "Predict the speed of running a model locally or split across nodes, and choose the fastest that fits");
  app->add_option("-m,--model", a->model, "GGUF model file (default: the bundled stories260K)");
  app->add_option("--model-shape", a->shape,
                  "Plan a popular model from its hyperparameters instead of a file "
                  "(see --list-shapes)");
  app->add_option("--type", a->type, "Weight type mix for --model-shape")->capture_default_str();
  app->add_flag("--list-shapes", a->list_shapes, "List the --model-shape presets");
  app->add_option("--cluster", a->cluster, "Nodes and links to plan for (cluster.json; see docs/planner.md)");
  app->add_option("--workers", a->workers, "Live workers to ask for their profiles: name=host:port,...")
      ->delimiter(',');
  app->add_option("--key-file", a->key_file, "The cluster key (tessera keygen); required off loopback");
  app->add_option("--wire-type", a->wire_type, "With --workers: the partial sums' type of a tensor-parallel group")
      ->check(CLI::IsMember({"f32", "f16", "bf16"}))
      ->capture_default_str();
  app->add_option("--local-profile", a->local_profile,
                  "This machine's profile from `tessera probe --json` "
                  "instead of probing now");
  app->add_option("--probe-seconds", a->probe_seconds, "Time to probe this machine when no fresh probe is cached")
      ->check(CLI::Range(0.05, 60.0))
      ->capture_default_str();
  app->add_flag("--no-probe-cache", a->no_probe_cache, "Probe again even if a recent probe is cached");
  app->add_option("-p,--prompt-len", a->prompt, "Prompt length the prefill prediction is for")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 24))
      ->capture_default_str();
  app->add_option("-n,--n-predict", a->n_gen, "Tokens generated per request")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 24))
      ->capture_default_str();
  app->add_option("--concurrency", a->concurrency, "Sequences decoding at the same time")
      ->check(CLI::Range(int64_t{1}, int64_t{65536}))
      ->capture_default_str();
  app->add_option("-c,--ctx-size", a->n_ctx, "Context per sequence (default: the model's, at most 4096)")
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 24));
  app->add_option("-b,--batch-size", a->n_batch, "Prompt tokens per forward pass")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 20))
      ->capture_default_str();
  app->add_option("--micro-batch", a->micro_batch,
                  "Prompt tokens per pipeline micro-batch to predict (0: the fastest the planner finds)")
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 20));
  app->add_option("--kv-type", a->kv_type, "KV cache type")
      ->check(CLI::IsMember({"f16", "f32"}))
      ->capture_default_str();
  app->add_option("--split", a->split, "Your layer placement to check: ranges 0-10@a,11-21@b or shares a:1,b:2");
  app->add_option("--place", a->place,
                  "Your pipeline of groups to check, as run --place takes it: local,tp(a,b) or tp(local:2,a),b "
                  "(the head is local; --split names each stage by its first node)");
  app->add_option("--ep-redundancy", a->ep_redundancy, "The --ep-redundancy of --place's ep groups")
      ->check(CLI::Range(0.0, 1.0))
      ->capture_default_str();
  app->add_flag("--distribute", a->distribute, "Choose a split over several nodes even when one node is faster");
  app->add_flag("--no-parallel", a->no_parallel,
                "Leave out tensor/expert-parallel rows (for nodes that cannot run MPI ranks)");
  app->add_flag("--all-subsets", a->all_subsets, "List every pipeline subset, not only the best per node count");
  app->add_flag("--repack", a->repack,
                "Plan for weights packed at load on every node (run/worker --repack): each stage also needs the "
                "packed copy, sized for this CPU's kernels");
  app->add_flag("--json", a->json, "Print the plan as JSON");
  return {app, [a] { return run_plan(*a); }};
}

}  // namespace tessera
