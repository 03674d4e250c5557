// The cost model: stage rooflines plus fixed overheads, hops, pipelined prefill, decode at a concurrency, memory per
// node, and tensor/expert-parallel terms for when the runtime has them. Equations: docs/planner.md.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "plan/cluster.h"
#include "plan/model_shape.h"
#include "plan/plan_constants.h"

namespace tessera::plan {

enum class Bottleneck { MemoryBandwidth, Compute, LinkLatency, LinkBandwidth };
std::string_view bottleneck_name(Bottleneck b);  // "memory bandwidth", "compute", "link latency", "link bandwidth"

// Where time goes: a stage's roofline term is memory or compute (its fixed overheads count as compute, they are
// CPU work); a hop's RTT/2 and message overhead are latency, its transfer is bandwidth.
struct TimeParts {
  double memory = 0, compute = 0, latency = 0, bandwidth = 0;
  double total() const { return memory + compute + latency + bandwidth; }
  TimeParts& operator+=(const TimeParts& o);
  TimeParts scaled(double f) const;
  Bottleneck dominant() const;
};

// What a run asks of a plan.
struct Workload {
  int64_t prompt_tokens = 512;  // prefill is predicted for one prompt of this length
  int64_t n_gen = 128;          // tokens generated per request
  int64_t concurrency = 1;      // sequences decoding at once (each has its own KV slot)
  int64_t n_ctx = 4096;         // KV cache positions per sequence
  int64_t n_batch = 512;        // largest prompt batch per forward pass
  // Prompt micro-batch of a pipeline: > 0 this size (what --micro-batch or the runtime's own rule runs), 0 the
  // fastest of PlanConstants::kMicroBatches (what the planner would advise).
  int64_t micro_batch = 0;
  // > 0: the first and last micro-batches have this size instead (the runtime's automatic rule halves them).
  int64_t end_batch = 0;
};

// A contiguous run of layers on one node of the cluster; `fraction` < 1 when a tensor-parallel group shares them.
struct StageSpec {
  size_t node = 0;
  int64_t first = 0, last = -1;  // inclusive; last < first for a node that holds only the embedding/head
  bool first_stage = false, last_stage = false;
  double fraction = 1.0;
  bool experts = true;  // false: the stage holds the layers' dense parts only (expert parallel home)
  int64_t layers() const { return last - first + 1; }
};

struct MemoryNeed {
  size_t node = 0;
  uint64_t weights = 0, kv_cache = 0, buffers = 0;
  uint64_t packed = 0;     // the weights' packed copy on a node that packs at load (NodeProfile::repack)
  uint64_t available = 0;  // after the headroom constant
  uint64_t total() const { return weights + kv_cache + buffers + packed; }
  bool fits() const { return total() <= available; }
};

struct Prediction {
  double prefill_s = 0;  // one prompt of prompt_tokens
  double prefill_tps = 0;
  int64_t micro_batch = 0;
  TimeParts prefill_parts;
  double decode_tps_1 = 0;  // one stream
  TimeParts decode_parts_1;
  double decode_tps_c = 0;  // all sequences together at the workload's concurrency
  TimeParts decode_parts_c;
  int64_t decode_groups = 1;  // sequence groups in flight round the ring at that concurrency
  double score_s = 0;         // `concurrency` requests: their prefills, then n_gen decode steps for all
  // The phase that takes longer in score_s, and where its time goes.
  bool prefill_dominates = false;
  Bottleneck bottleneck = Bottleneck::MemoryBandwidth;
};

class CostModel {
 public:
  CostModel(const ModelCost& model, const Cluster& cluster, const PlanConstants& constants);

  // One forward pass over the stage of `tokens` tokens from `seqs` sequences, each attending to `ctx` cached
  // positions on average, with logits for `logit_tokens` of them (last stage).
  TimeParts stage_time(const StageSpec& s, double tokens, double seqs, double ctx, double logit_tokens) const;
  // One message of `bytes` from node a to node b (zero on the same node).
  TimeParts hop_time(size_t a, size_t b, double bytes) const;
  MemoryNeed stage_memory(const StageSpec& s, const Workload& w) const;
  // Compute rate (FLOPs/s) of a node for quantized or float weights at a batch of `tokens`.
  double compute_rate(size_t node, bool quantized, double tokens) const;
  double read_rate(size_t node) const;  // bytes/s

  // A pipeline ring: the head sends token ids to the first stage, activations go stage to stage, the last stage's
  // sampled tokens return to the head. One stage on the head is a local run.
  Prediction predict_pipeline(std::span<const StageSpec> stages, const Workload& w) const;
  // Tensor parallel over `nodes`: each layer's heads and FFN columns split evenly, the embedding and head on the
  // first node, two ring all-reduces of the activations per layer.
  Prediction predict_tensor_parallel(std::span<const size_t> nodes, const Workload& w) const;
  std::vector<MemoryNeed> tensor_parallel_memory(std::span<const size_t> nodes, const Workload& w) const;
  // Expert parallel over `nodes` (MoE only): attention, router, embedding and head on nodes[0]; each layer's experts
  // spread evenly over all nodes; a scatter/gather round trip to the other nodes per layer.
  Prediction predict_expert_parallel(std::span<const size_t> nodes, const Workload& w) const;
  std::vector<MemoryNeed> expert_parallel_memory(std::span<const size_t> nodes, const Workload& w) const;

  const ModelCost& model() const { return model_; }
  const Cluster& cluster() const { return cluster_; }
  const PlanConstants& constants() const { return k_; }
  // Bytes of one token's activations on the wire.
  double activation_bytes() const;

 private:
  // Expected distinct experts (of n) that `tokens` tokens choosing k each touch: n (1 - (1 - k/n)^tokens).
  double distinct_experts(double tokens) const;
  // Tokens per expert matmul in a pass of `tokens`: each of the experts the pass touches sees its share of the
  // tokens' k picks.
  double expert_batch(double tokens) const;
  uint64_t buffer_bytes(const Workload& w, bool last_stage) const;
  Prediction finish(double prefill_s, int64_t micro_batch, TimeParts prefill_parts, double d1_s, TimeParts d1_parts,
                    double dc_tps, TimeParts dc_parts, int64_t groups, double prefill_c_s, const Workload& w) const;

  const ModelCost& model_;
  const Cluster& cluster_;
  PlanConstants k_;
};

}  // namespace tessera::plan
