// Building serve's replicas: local copies, or pipelines over groups of workers, with their node descriptions.
#include "cli/serve_replicas.h"

#include "cluster/pipeline_executor.h"
#include "cluster/remote_stage_endpoint.h"
#include "model/kv_cache.h"
#include "model/model_profile.h"
#include "util/error.h"

namespace tessera {
namespace {

std::vector<std::string> split_on(const std::string& text, char sep) {
  std::vector<std::string> out;
  size_t start = 0;
  while (true) {
    const size_t at = text.find(sep, start);
    out.push_back(text.substr(start, at == std::string::npos ? std::string::npos : at - start));
    if (at == std::string::npos) return out;
    start = at + 1;
  }
}

std::string join(const std::vector<std::string>& items, size_t begin, size_t end) {
  std::string out;
  for (size_t i = begin; i < end; ++i) out += (out.empty() ? "" : ",") + items[i];
  return out;
}

// The serving process's part of a pipeline: the bytes of its layers, plus the embedding and head it holds.
uint64_t local_stage_bytes(const ModelProfile& p, LayerRange layers, bool embedding, bool head) {
  uint64_t bytes = 0;
  for (int64_t l = layers.begin; l < layers.end; ++l) bytes += p.layer_bytes.at(static_cast<size_t>(l));
  if (embedding) bytes += p.embd_bytes;
  if (head) bytes += p.output_bytes;
  return bytes;
}

}  // namespace

std::vector<std::string> group_workers(const std::string& workers, int replicas) {
  if (replicas < 1) fail("--replicas must be at least 1");
  if (workers.empty()) return std::vector<std::string>(static_cast<size_t>(replicas));
  if (workers.find(';') != std::string::npos) {
    auto groups = split_on(workers, ';');
    if (static_cast<int>(groups.size()) != replicas) {
      fail("--workers has {} group(s) separated by ';' but --replicas is {}: give one group of workers per replica",
           groups.size(), replicas);
    }
    for (size_t i = 0; i < groups.size(); ++i) {
      if (groups[i].empty()) fail("--workers: group {} (for replica {}) is empty", i + 1, i);
    }
    return groups;
  }
  const auto list = split_on(workers, ',');
  if (list.size() % static_cast<size_t>(replicas) != 0) {
    fail(
        "--workers lists {} worker(s), which do not divide into {} replicas of equal size; group them per replica "
        "with ';' (a=h:1,b=h:2;c=h:3)",
        list.size(), replicas);
  }
  const size_t per = list.size() / static_cast<size_t>(replicas);
  std::vector<std::string> groups;
  for (size_t r = 0; r < static_cast<size_t>(replicas); ++r) groups.push_back(join(list, r * per, (r + 1) * per));
  return groups;
}

server::ReplicaSpec local_replica(const ModelOptions& o, int64_t n_slots) {
  LoadedModel m = load_model(o, n_slots);
  server::ReplicaSpec spec;
  spec.nodes.push_back(server::local_node_info(*m.weights, *m.executor));
  spec.executor = std::move(m.executor);
  return spec;
}

server::ReplicaSpec pipeline_replica(const ModelOptions& o, const ClusterOptions& cluster, int64_t n_slots) {
  // The head's copy of the weights is only read while stages load (tensors a worker lacks, the head's own layers
  // are mapped again by its stage), so it can go once the pipeline stands.
  const LoadedModel m = load_model(o, n_slots, false);
  auto executor = build_pipeline(m, o, cluster, n_slots);
  auto* pipeline = dynamic_cast<cluster::PipelineExecutor*>(executor.get());
  if (!pipeline) fail("internal error: a distributed replica is not a pipeline");
  const ModelProfile profile = profile_model(m.weights->source(), m.weights->config());
  const GgmlType kv_type = o.kv_type == "f32" ? GgmlType::F32 : GgmlType::F16;

  server::ReplicaSpec spec;
  for (size_t i = 0; i < pipeline->n_stages(); ++i) {
    const cluster::StageEndpoint& stage = pipeline->stage(i);
    server::NodeInfo n;
    n.name = stage.node();
    n.layers = stage.layers();
    n.embedding = i == 0;
    n.head = i + 1 == pipeline->n_stages();
    if (const auto* remote = dynamic_cast<const cluster::RemoteStageEndpoint*>(&stage)) {
      n.address = remote->address();
      n.weight_bytes = remote->load_report().weights_bytes;
      n.kv_bytes = remote->load_report().kv_bytes;
    } else {
      n.weight_bytes = local_stage_bytes(profile, n.layers, n.embedding, n.head);
      // What the stage's cache allocates: rings on sliding-window layers, none where a layer reuses K/V.
      n.kv_bytes = kv_cache_config(m.weights->config(), n.layers.begin, n.layers.end, pipeline->n_slots(),
                                   pipeline->n_ctx(), kv_type)
                       .bytes();
    }
    spec.nodes.push_back(std::move(n));
  }
  // Read from HTTP threads while the scheduler's thread may replace a failed stage: through visit_stages.
  spec.live = [pipeline] {
    std::vector<server::NodeLive> out(pipeline->n_stages());
    pipeline->visit_stages([&](size_t i, const cluster::StageEndpoint& stage) {
      out[i].on = stage.where().empty() ? stage.node() : stage.where();
      if (const auto* remote = dynamic_cast<const cluster::RemoteStageEndpoint*>(&stage)) {
        const net::LinkStats s = remote->link_stats();
        out[i].bytes_sent = s.bytes_sent;
        out[i].bytes_received = s.bytes_received;
        out[i].link_rtt_seconds = remote->link().rtt_s;
        out[i].up = remote->up();
      }
    });
    return out;
  };
  spec.recovery = [pipeline] {
    return server::RecoveryStats{pipeline->failovers(), pipeline->replayed_tokens(), pipeline->recovering()};
  };
  spec.executor = std::move(executor);
  return spec;
}

}  // namespace tessera
