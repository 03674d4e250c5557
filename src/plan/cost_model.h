// The cost model: stage rooflines plus fixed overheads, hops, pipelined prefill, decode at a concurrency, memory per
// node, and tensor/expert-parallel groups (each rank's share plus the collectives). Equations: docs/planner.md.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "engine/sampler.h"
#include "plan/cluster.h"
#include "plan/collective_model.h"
#include "plan/model_shape.h"
#include "plan/parallel_layout.h"
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
  // How the tokens are picked: a tensor-parallel group's last stage exchanges what this sampler needs (the CLI's
  // default unless the run says otherwise; bench samples greedily).
  SamplerParams sampler = {};
};

// A tensor/expert-parallel group: rank r runs on nodes[r] and holds layout.rank[r] of every layer of its stage;
// the ranks add up their partial outputs with all-reduces that cost what `collectives` says.
struct ParallelGroup {
  std::vector<size_t> nodes;
  ParallelLayout layout;
  CollectiveProfile collectives;
};

// A contiguous run of layers on one node of the cluster, or on a tensor/expert-parallel group (node = its rank 0).
struct StageSpec {
  size_t node = 0;
  int64_t first = 0, last = -1;  // inclusive; last < first for a node that holds only the embedding/head
  bool first_stage = false, last_stage = false;
  std::shared_ptr<const ParallelGroup> group = nullptr;  // none: the node alone
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

// A group's collectives of a pass besides the all-reduces, as the runtime makes them (LocalExecutor's broadcast of
// the step, ShardedSampler's exchanges on the last stage): `count` alike, each rank sending `bytes` in each (a
// broadcast: rank 0's message).
struct SmallCollective {
  std::string what;  // "the step's broadcast", "the candidates' all-gather"
  int count = 0;
  double bytes = 0;
  bool all_gather = false;  // else a broadcast from rank 0
};

// The small collectives of one pass of `tokens` tokens over `ranks` ranks, `rows` of them sampled on this stage (0
// unless it is the last) with `sampler` over an `n_vocab`-token vocabulary split by rank.
std::vector<SmallCollective> small_collectives(const SamplerParams& sampler, int ranks, int64_t n_vocab, double tokens,
                                               double rows, const PlanConstants& k);

// One rank of a group in one forward pass: what it reads and computes, and its time.
struct RankPass {
  size_t node = 0;
  double bytes = 0;         // weights and KV read
  double flops = 0;         // all kernel paths
  double expert_bytes = 0;  // of `bytes`, the routed experts' (read at PlanConstants::expert_read_efficiency)
  TimeParts t;              // roofline + fixed overheads
};

// A group stage's pass: each rank's share, then the collectives that join them.
struct GroupPass {
  std::vector<RankPass> ranks;
  size_t slowest = 0;
  int all_reduces = 0;  // of the activations (tokens x n_embd f32) over the stage's layers
  double all_reduce_bytes = 0;
  double all_reduce_s = 0;             // each
  std::vector<SmallCollective> small;  // small_collectives of the pass
  int other_collectives = 0;           // their count
  double other_s = 0;                  // together
  TimeParts collectives;
  TimeParts total;  // the slowest rank + the collectives
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
  // `sampler`: how the last stage of a group picks tokens (Workload::sampler), for its collectives.
  CostModel(const ModelCost& model, const Cluster& cluster, const PlanConstants& constants,
            const SamplerParams& sampler = {});

  // One forward pass over the stage of `tokens` tokens from `seqs` sequences, each attending to `ctx` cached
  // positions on average, with logits for `logit_tokens` of them (last stage). A group stage takes its slowest
  // rank's time plus its collectives (group_pass).
  TimeParts stage_time(const StageSpec& s, double tokens, double seqs, double ctx, double logit_tokens) const;
  GroupPass group_pass(const StageSpec& s, double tokens, double seqs, double ctx, double logit_tokens) const;
  // One message of `bytes` from node a to node b (zero on the same node).
  TimeParts hop_time(size_t a, size_t b, double bytes) const;
  // A node's stage; for a group stage, rank 0's (group_memory has every rank's).
  MemoryNeed stage_memory(const StageSpec& s, const Workload& w) const;
  // One need per rank of a group stage. Ranks of one machine (NodeProfile::machine) share its memory: each has
  // its share of the available bytes.
  std::vector<MemoryNeed> group_memory(const StageSpec& s, const Workload& w) const;
  // Compute rate (FLOPs/s) of a node for quantized or float weights at a batch of `tokens`.
  double compute_rate(size_t node, bool quantized, double tokens) const;
  double read_rate(size_t node) const;  // bytes/s
  // The node's measured compute fraction at `tokens` per pass (NodeProfile::batch_rates), or 0 without one.
  double measured_batch_factor(const NodeProfile& n, double tokens) const;

  // The all-reduce cost over `nodes` as a group: the cluster's measured collectives when the group is all of its
  // nodes in order, else a ring over the slowest of the group's links (ring_all_reduce).
  CollectiveProfile collectives_for(std::span<const size_t> nodes) const;
  // A group over `nodes` (rank r on nodes[r]) holding `shares` of each layer (empty: equal). Throws Error when a
  // rank would hold none of what it must (the runtime's message).
  // How many of the group's ranks run on the machine of rank r (1 for nodes without a machine id): they share its
  // memory.
  double machine_ranks(const ParallelGroup& g, size_t r) const;
  // Rank r's read rate (bytes/s) while the group's other ranks read too: its own, unless ranks on one machine ask
  // for more than the machine gives (NodeProfile::machine_read_gbps, shared in proportion to their threads); a
  // machine rate not measured divides the rank's own between them.
  double rank_read_rate(const ParallelGroup& g, size_t r) const;
  std::shared_ptr<const ParallelGroup> make_group(std::span<const size_t> nodes, ParallelMode mode,
                                                  const std::vector<double>& shares = {},
                                                  double ep_redundancy = kDefaultEpRedundancy) const;

  // A pipeline ring: the head sends token ids to the first stage, activations go stage to stage, the last stage's
  // sampled tokens return to the head. One stage on the head is a local run.
  Prediction predict_pipeline(std::span<const StageSpec> stages, const Workload& w) const;
  // A stage may be a group (StageSpec::group): one group stage is tensor/expert parallel, several are TP x PP.

  const ModelCost& model() const { return model_; }
  const Cluster& cluster() const { return cluster_; }
  const PlanConstants& constants() const { return k_; }
  const SamplerParams& sampler() const { return sampler_; }
  // Bytes of one token's activations on the wire.
  double activation_bytes() const;
  // Bytes of one token's activations in an all-reduce (f32, n_embd).
  double reduce_bytes() const;

  // One rank's pass (rank -1: the stage's node alone, else rank r of its group).
  RankPass rank_pass(const StageSpec& s, int rank, double tokens, double seqs, double ctx, double logit_tokens) const;

 private:
  // Expected distinct experts (of n) that `tokens` tokens choosing k each touch: n (1 - (1 - k/n)^tokens).
  double distinct_experts(double tokens) const;
  // Tokens per expert matmul in a pass of `tokens`: each of the experts the pass touches sees its share of the
  // tokens' k picks.
  double expert_batch(double tokens) const;
  uint64_t buffer_bytes(const Workload& w, bool last_stage) const;
  // Its memory (rank -1: the stage's node alone, else rank r of its group).
  MemoryNeed rank_memory(const StageSpec& s, int rank, const Workload& w) const;

  Prediction finish(double prefill_s, int64_t micro_batch, TimeParts prefill_parts, double d1_s, TimeParts d1_parts,
                    double dc_tps, TimeParts dc_parts, int64_t groups, double prefill_c_s, const Workload& w) const;

  const ModelCost& model_;
  const Cluster& cluster_;
  PlanConstants k_;
  SamplerParams sampler_;
};

}  // namespace tessera::plan
