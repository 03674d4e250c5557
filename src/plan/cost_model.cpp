// Cost model arithmetic. Every time is a roofline (the larger of memory and compute time) plus fixed overheads;
// pipelines follow the flow-shop makespan of identical micro-batches. docs/planner.md derives each formula.
#include "plan/cost_model.h"

#include <algorithm>
#include <cmath>

#include "util/error.h"
#include "util/flow_shop.h"

namespace tessera::plan {
namespace {

// One element of a ring: a stage or a hop. `busy` is how long it is occupied per micro-batch (a hop's RTT/2 is
// travel, not occupancy: several messages can be in flight).
struct Element {
  TimeParts t;
  double busy = 0;
};

struct RingTime {
  TimeParts sum;      // the first micro-batch's trip through every element
  TimeParts busiest;  // occupancy of the slowest element, as parts
  double busy = 0;
};

RingTime combine(const std::vector<Element>& elems) {
  RingTime r;
  for (const auto& e : elems) {
    r.sum += e.t;
    if (e.busy > r.busy) {
      r.busy = e.busy;
      // A hop's occupancy is its transfer plus the message overhead (counted as latency).
      r.busiest = e.t.latency > 0 || e.t.bandwidth > 0 ? TimeParts{0, 0, e.busy - e.t.bandwidth, e.t.bandwidth} : e.t;
    }
  }
  return r;
}

}  // namespace

std::string_view bottleneck_name(Bottleneck b) {
  switch (b) {
    case Bottleneck::MemoryBandwidth:
      return "memory bandwidth";
    case Bottleneck::Compute:
      return "compute";
    case Bottleneck::LinkLatency:
      return "link latency";
    case Bottleneck::LinkBandwidth:
      return "link bandwidth";
  }
  return "?";
}

TimeParts& TimeParts::operator+=(const TimeParts& o) {
  memory += o.memory;
  compute += o.compute;
  latency += o.latency;
  bandwidth += o.bandwidth;
  return *this;
}

TimeParts TimeParts::scaled(double f) const { return {memory * f, compute * f, latency * f, bandwidth * f}; }

Bottleneck TimeParts::dominant() const {
  Bottleneck b = Bottleneck::MemoryBandwidth;
  double best = memory;
  if (compute > best) b = Bottleneck::Compute, best = compute;
  if (latency > best) b = Bottleneck::LinkLatency, best = latency;
  if (bandwidth > best) b = Bottleneck::LinkBandwidth;
  return b;
}

CostModel::CostModel(const ModelCost& model, const Cluster& cluster, const PlanConstants& constants,
                     const SamplerParams& sampler)
    : model_(model), cluster_(cluster), k_(constants), sampler_(sampler) {}

std::vector<SmallCollective> small_collectives(const SamplerParams& sampler, int ranks, int64_t n_vocab, double tokens,
                                               double rows, const PlanConstants& k) {
  std::vector<SmallCollective> out;
  // Rank 0 sends every pass to the others in one broadcast: the batch and, for sampled rows, their SampleSpec.
  out.push_back({"the step's broadcast", 1,
                 k.step_header_bytes + tokens * k.wire_bytes_per_token_id + rows * k.sample_spec_bytes, false});
  if (rows <= 0) return out;
  // ShardedSampler (engine/sharded_sampling.h): one all-gather of each rank's best token and rank 0's draw, with
  // its top_k best when a top-k row; greedy and top-k rows are settled there.
  const bool greedy = sampler.greedy();
  const bool top_k = !greedy && sampler.top_k > 0 && sampler.top_k < n_vocab;
  const std::string how = greedy ? "greedy" : top_k ? fmt::format("top-k {}", sampler.top_k) : "whole vocabulary";
  out.push_back({fmt::format("the candidates' all-gather ({})", how), 1,
                 rows * (16.0 + (top_k ? 8.0 * sampler.top_k : 0.0)), true});
  if (greedy || top_k) return out;
  // A draw over the whole vocabulary: top-p's cut first, then one broadcast per rank of the running sums, then
  // the picked token from the rank whose range holds the draw (counted: with several ranks it is mostly not 0).
  if (sampler.top_p < 1.0f) {
    out.push_back({"top-p's rounds (all-gathers)", k.nucleus_rounds, rows * k.nucleus_round_bytes, true});
  }
  out.push_back({"the running sums' broadcasts", ranks, rows * 8.0, false});
  out.push_back({"the draw's all-gather", 1, rows * 8.0, true});
  return out;
}

double CostModel::activation_bytes() const {
  return static_cast<double>(model_.config.n_embd) * k_.wire_bytes_per_value;
}

double CostModel::reduce_bytes() const { return static_cast<double>(model_.config.n_embd) * 4.0; }

double CostModel::distinct_experts(double tokens) const {
  const auto n = static_cast<double>(model_.config.n_expert);
  if (n <= 0) return 0;
  const double k = static_cast<double>(model_.config.n_expert_used);
  return n * (1.0 - std::pow(1.0 - k / n, std::max(tokens, 0.0)));
}

double CostModel::expert_batch(double tokens) const {
  const double touched = distinct_experts(tokens);
  if (touched <= 0) return tokens;
  return std::max(1.0, tokens * static_cast<double>(model_.config.n_expert_used) / touched);
}

double CostModel::read_rate(size_t node) const {
  return cluster_.nodes()[node].mem_read_gbps * 1e9 * k_.bandwidth_efficiency;
}

double CostModel::measured_batch_factor(const NodeProfile& n, double tokens) const {
  const std::vector<BatchRate>& r = n.batch_rates;
  if (r.empty() || tokens < 2) return 0;
  // Log-linear between the measured counts (each doubling gains about the same); from 2 tokens up to the smallest
  // count, from the few-token constant to its measured rate; the largest count's rate from there on.
  const auto log_between = [](double t, double t0, double f0, double t1, double f1) {
    return t1 <= t0 ? f1 : f0 + (f1 - f0) * std::clamp(std::log(t / t0) / std::log(t1 / t0), 0.0, 1.0);
  };
  const double few = std::max(k_.small_batch_compute_factor, k_.few_token_compute_factor);
  if (tokens < r.front().tokens)
    return log_between(tokens, 2.0, std::min(few, r.front().fraction), r.front().tokens, r.front().fraction);
  for (size_t i = 1; i < r.size(); ++i) {
    if (tokens <= r[i].tokens)
      return log_between(tokens, r[i - 1].tokens, r[i - 1].fraction, r[i].tokens, r[i].fraction);
  }
  return r.back().fraction;
}

double CostModel::compute_rate(size_t node, bool quantized, double tokens) const {
  const NodeProfile& n = cluster_.nodes()[node];
  double rate = 0;
  const std::string_view key = quantized ? std::string_view(model_.matmul_type) : std::string_view("f32");
  if (const auto it = n.matmul_gflops.find(key); it != n.matmul_gflops.end()) {
    rate = it->second * 1e9;
  } else {
    rate = quantized ? n.int8_gops * 1e9 * k_.int8_efficiency : n.f32_gflops * 1e9 * k_.f32_efficiency;
  }
  // Never below the one-token fraction, so small_batch_compute_factor = 1 still means one rate at every size.
  const double one = k_.small_batch_compute_factor, few = std::max(one, k_.few_token_compute_factor);
  double f = one;
  // The node's measured ramp for its quantized matmuls where it has one (not for --repack's tiles, which it does
  // not time; attention and F32 weights keep the constants).
  if (const double measured = quantized && !n.repack ? measured_batch_factor(n, tokens) : 0.0; measured > 0) {
    f = measured;
  } else if (tokens >= k_.few_token_batch) {
    // Logarithmic in the batch: each doubling of the tokens per pass gains about the same (docs/planner.md).
    const double full = n.repack && quantized ? k_.full_rate_batch_packed : k_.full_rate_batch;
    const double lo = std::max(k_.few_token_batch, 1.0);
    f = full <= lo ? 1.0 : few + (1.0 - few) * std::clamp(std::log(tokens / lo) / std::log(full / lo), 0.0, 1.0);
  } else if (tokens >= 2) {
    f = few;
  } else if (tokens > 1) {
    f = one + (few - one) * (tokens - 1.0);
  }
  return rate * std::max(f, one);
}

RankPass CostModel::rank_pass(const StageSpec& s, int rank, double tokens, double seqs, double ctx,
                              double logit_tokens) const {
  const ModelCost& m = model_;
  const ParallelGroup* g = rank >= 0 ? s.group.get() : nullptr;
  const RankShare* share = g != nullptr ? &g->layout.rank[static_cast<size_t>(rank)] : nullptr;
  const size_t node = g != nullptr ? g->nodes[static_cast<size_t>(rank)] : s.node;
  const bool whole_experts = g != nullptr && g->layout.whole_experts();
  // Expert parallel: every rank waits for the busiest, whose share of a batch's picks evens out with its size.
  const double imbalance =
      whole_experts ? 1.0 + (g->layout.expert_imbalance - 1.0) / std::sqrt(std::max(tokens, 1.0)) : 1.0;
  const double k = static_cast<double>(m.config.n_expert_used);
  const double n = static_cast<double>(m.config.n_expert);
  const double expert_share = n > 0 ? distinct_experts(tokens) / n : 0.0;
  double bytes = 0, fq = 0, ff = 0, eq = 0, ef = 0, expert_read = 0;
  for (int64_t i = s.first; i <= s.last; ++i) {
    const auto li = static_cast<size_t>(i);
    const LayerCost& l = m.layers[li];
    const double q = share ? share->q[li] : 1.0, kv = share ? share->kv[li] : 1.0;
    const double fn = share ? share->ffn[li] : 1.0, ex = share ? share->experts[li] : 1.0;
    // The dense part: what a rank keeps whole (norms, router), its query and KV heads, its FFN rows.
    const auto rest = [](double all, double a, double b, double c) { return std::max(0.0, all - a - b - c); };
    bytes += rest(static_cast<double>(l.dense_bytes), static_cast<double>(l.attn_q.bytes),
                  static_cast<double>(l.attn_kv.bytes), static_cast<double>(l.ffn.bytes)) +
             q * static_cast<double>(l.attn_q.bytes) + kv * static_cast<double>(l.attn_kv.bytes) +
             fn * static_cast<double>(l.ffn.bytes);
    fq += tokens * (rest(l.dense_flops_q, l.attn_q.flops_q, l.attn_kv.flops_q, l.ffn.flops_q) + q * l.attn_q.flops_q +
                    kv * l.attn_kv.flops_q + fn * l.ffn.flops_q);
    ff += tokens * (rest(l.dense_flops_f, l.attn_q.flops_f, l.attn_kv.flops_f, l.ffn.flops_f) + q * l.attn_q.flops_f +
                    kv * l.attn_kv.flops_f + fn * l.ffn.flops_f);
    // Experts: a share of every expert's rows, or whole experts (the busiest rank's, at most all it holds).
    const double touched = whole_experts ? std::min(1.0, expert_share * imbalance) : expert_share;
    expert_read += ex * static_cast<double>(l.expert_bytes) * touched;
    eq += ex * imbalance * tokens * k * l.expert_flops_q;
    ef += ex * imbalance * tokens * k * l.expert_flops_f;
    // Attention: each sequence reads its own history once per pass; every token scores every position it sees (f32),
    // on a sliding-window layer the last `window` of them. A rank holds its KV heads' cache and its query heads.
    const double seen = l.attended_positions(ctx);
    bytes += kv * seqs * seen * static_cast<double>(l.kv_bytes_per_token);
    ff += q * tokens * seen * l.attn_flops_per_pos;
  }
  if (s.first_stage) {
    // The embedding rows, and Gemma 4's per-layer inputs: a row per token of their table, the projection once.
    bytes += tokens * static_cast<double>(m.embd_row_bytes) + static_cast<double>(m.input_read_bytes);
    fq += tokens * m.input_flops_q;
    ff += tokens * m.input_flops_f;
  }
  if (s.last_stage && logit_tokens > 0) {
    const double vocab = share ? share->vocab : 1.0;
    bytes += vocab * static_cast<double>(m.head_read_bytes());
    fq += vocab * logit_tokens * m.output_flops_q;
    ff += vocab * logit_tokens * m.output_flops_f;
  }
  RankPass p;
  p.node = node;
  bytes += expert_read;
  p.bytes = bytes;
  p.expert_bytes = expert_read;
  p.flops = fq + ff + eq + ef;
  // The routed experts' weights stream at a fraction of the dense rate (PlanConstants::expert_read_efficiency).
  const double rate = g != nullptr ? rank_read_rate(*g, static_cast<size_t>(rank)) : read_rate(node);
  const double mem_s = (bytes - expert_read) / rate + expert_read / (rate * k_.expert_read_efficiency);
  // An expert's matmul sees only the tokens routed to it, a smaller batch at a lower rate.
  const double per_expert = expert_batch(tokens);
  const double comp_s = fq / compute_rate(node, true, tokens) + ff / compute_rate(node, false, tokens) +
                        eq / compute_rate(node, true, per_expert) + ef / compute_rate(node, false, per_expert);
  (mem_s >= comp_s ? p.t.memory : p.t.compute) = std::max(mem_s, comp_s);
  p.t.compute += static_cast<double>(std::max<int64_t>(s.layers(), 0)) * k_.layer_overhead_s + k_.stage_overhead_s;
  return p;
}

GroupPass CostModel::group_pass(const StageSpec& s, double tokens, double seqs, double ctx, double logit_tokens) const {
  if (!s.group) fail("internal: group_pass of a stage without a group");
  const ParallelGroup& g = *s.group;
  const CollectiveProfile& c = g.collectives;
  GroupPass p;
  for (size_t r = 0; r < g.nodes.size(); ++r) {
    p.ranks.push_back(rank_pass(s, static_cast<int>(r), tokens, seqs, ctx, logit_tokens));
    if (p.ranks.back().t.total() > p.ranks[p.slowest].t.total()) p.slowest = r;
  }
  for (int64_t i = std::max<int64_t>(s.first, 0); i <= s.last; ++i) {
    p.all_reduces += g.layout.reduces[static_cast<size_t>(i)];
  }
  p.all_reduce_bytes = tokens * reduce_bytes();
  p.all_reduce_s = c.all_reduce_s(p.all_reduce_bytes);
  // Each collective's fixed latency is link latency, the rest of its time link bandwidth.
  const auto parts = [&](double n, double bytes, double seconds) {
    const double lat = std::min(seconds, c.latency_for(bytes));
    return TimeParts{0, 0, n * lat, n * (seconds - lat)};
  };
  p.collectives = parts(p.all_reduces, p.all_reduce_bytes, p.all_reduce_s);
  // The step's broadcast, and on the last stage the sampler's exchanges (small_collectives). A broadcast costs the
  // all-reduce of its bytes; an all-gather of B bytes a rank, the gather of all N x B (each byte crosses once).
  const auto ranks = static_cast<int>(g.nodes.size());
  p.small = small_collectives(sampler_, ranks, model_.config.n_vocab, tokens, s.last_stage ? logit_tokens : 0.0, k_);
  TimeParts other;
  for (const SmallCollective& sc : p.small) {
    const double bytes = sc.all_gather ? sc.bytes * ranks : sc.bytes;
    const double each = sc.all_gather ? c.gather_s(bytes) : c.all_reduce_s(bytes);
    other += parts(sc.count, sc.all_gather ? bytes / 2.0 : bytes, each);
    p.other_collectives += sc.count;
  }
  p.other_s = other.total();
  p.collectives += other;
  p.total = p.ranks[p.slowest].t;
  p.total += p.collectives;
  return p;
}

TimeParts CostModel::stage_time(const StageSpec& s, double tokens, double seqs, double ctx, double logit_tokens) const {
  if (s.group) return group_pass(s, tokens, seqs, ctx, logit_tokens).total;
  return rank_pass(s, -1, tokens, seqs, ctx, logit_tokens).t;
}

double CostModel::machine_ranks(const ParallelGroup& g, size_t r) const {
  const std::string& machine = cluster_.nodes()[g.nodes[r]].machine;
  if (machine.empty()) return 1.0;
  double n = 0;
  for (size_t node : g.nodes) n += cluster_.nodes()[node].machine == machine ? 1.0 : 0.0;
  return std::max(n, 1.0);
}

double CostModel::rank_read_rate(const ParallelGroup& g, size_t r) const {
  const auto& nodes = cluster_.nodes();
  const NodeProfile& me = nodes[g.nodes[r]];
  const double own = read_rate(g.nodes[r]);
  if (me.machine.empty()) return own;
  double ranks = 0, threads = 0;
  for (size_t node : g.nodes) {
    if (nodes[node].machine != me.machine) continue;
    ranks += 1;
    threads += std::max(nodes[node].threads, 1);
  }
  if (ranks <= 1) return own;
  if (!(me.machine_read_gbps > 0)) return own / ranks;
  const double machine = me.machine_read_gbps * 1e9 * k_.bandwidth_efficiency;
  return std::min(own, machine * std::max(me.threads, 1) / threads);
}

CollectiveProfile CostModel::collectives_for(std::span<const size_t> nodes) const {
  if (const auto& measured = cluster_.collectives(); measured && nodes.size() == cluster_.size()) {
    bool all = true;
    for (size_t i = 0; i < nodes.size(); ++i) all = all && nodes[i] == i;
    if (all) return *measured;
  }
  // Each step waits for the slowest link's latency and moves its chunk at the slowest link's bandwidth: the ring's
  // links under MPI; over worker links every pair (the direct exchange uses them all).
  const bool mesh = cluster_.worker_wire_bytes() > 0;
  double rtt = 0, bw = INFINITY;
  std::string slowest;
  const auto consider = [&](size_t a, size_t b) {
    if (a == b) return;
    const std::string &na = cluster_.nodes()[a].name, &nb = cluster_.nodes()[b].name;
    const LinkProfile l = cluster_.group_link(na, nb);
    if (l.rtt_s > rtt || l.bytes_per_s() < bw || slowest.empty()) slowest = fmt::format("{} <-> {}", na, nb);
    rtt = std::max(rtt, l.rtt_s);
    bw = std::min(bw, l.bytes_per_s());
  };
  for (size_t i = 0; nodes.size() > 1 && i < nodes.size(); ++i) {
    if (!mesh) {
      consider(nodes[i], nodes[(i + 1) % nodes.size()]);
      continue;
    }
    for (size_t j = i + 1; j < nodes.size(); ++j) consider(nodes[i], nodes[j]);
  }
  if (!std::isfinite(bw)) bw = 1e12;  // one node: nothing crosses a link
  const int n = static_cast<int>(nodes.size());
  if (!mesh) return ring_all_reduce(n, rtt, bw, k_.message_overhead_s);
  CollectiveProfile c =
      link_all_reduce(n, rtt, bw, k_.message_overhead_s, cluster_.worker_wire_bytes(), k_.link_direct_max_bytes);
  c.link_pair = slowest;
  return c;
}

std::shared_ptr<const ParallelGroup> CostModel::make_group(std::span<const size_t> nodes, ParallelMode mode,
                                                           const std::vector<double>& shares,
                                                           double ep_redundancy) const {
  auto g = std::make_shared<ParallelGroup>();
  g->nodes.assign(nodes.begin(), nodes.end());
  g->layout = parallel_layout(model_, mode, static_cast<int>(nodes.size()), shares, ep_redundancy);
  g->collectives = collectives_for(nodes);
  return g;
}

TimeParts CostModel::hop_time(size_t a, size_t b, double bytes) const {
  if (a == b) return {};
  const LinkProfile l = cluster_.link(cluster_.nodes()[a].name, cluster_.nodes()[b].name);
  return {0, 0, l.rtt_s / 2.0 + k_.message_overhead_s, bytes / l.bytes_per_s()};
}

uint64_t CostModel::buffer_bytes(const Workload& w, bool last_stage) const {
  const ModelConfig& c = model_.config;
  // As estimate_memory: f32 activations of one prompt batch (residual, norms, q/k/v, attention out, FFN hidden x2,
  // a row of attention scores per token), logits only where the head is.
  const int64_t ffn = std::max(c.n_ff, c.n_ff_exp * std::max<int64_t>(c.n_expert_used, 1));
  const int64_t per_token =
      3 * c.n_embd + c.n_embd_q() + c.n_embd_k() + c.n_embd_v() + 2 * ffn + (last_stage ? c.n_vocab : 0) + w.n_ctx;
  const int64_t batch = std::max(w.n_batch, w.concurrency);
  return static_cast<uint64_t>(batch) * static_cast<uint64_t>(per_token) * 4 + k_.node_base_bytes;
}

MemoryNeed CostModel::rank_memory(const StageSpec& s, int rank, const Workload& w) const {
  const ModelCost& m = model_;
  const ParallelGroup* g = rank >= 0 ? s.group.get() : nullptr;
  const RankShare* share = g != nullptr ? &g->layout.rank[static_cast<size_t>(rank)] : nullptr;
  MemoryNeed need;
  need.node = g != nullptr ? g->nodes[static_cast<size_t>(rank)] : s.node;
  const NodeProfile& node = cluster_.nodes()[need.node];
  double weights = 0, kv_own = 0, kv_held = 0, packed = 0;
  for (int64_t i = s.first; i <= s.last; ++i) {
    const auto li = static_cast<size_t>(i);
    const LayerCost& l = m.layers[li];
    const double q = share ? share->q[li] : 1.0, kv = share ? share->kv[li] : 1.0;
    const double fn = share ? share->ffn[li] : 1.0;
    const double ex = !share ? 1.0 : share->experts_held.empty() ? share->experts[li] : share->experts_held[li];
    const auto part = [&](uint64_t all, uint64_t a, uint64_t b, uint64_t c, uint64_t e) {
      const double rest = std::max(0.0, static_cast<double>(all) - static_cast<double>(a + b + c));
      return rest + q * static_cast<double>(a) + kv * static_cast<double>(b) + fn * static_cast<double>(c) +
             ex * static_cast<double>(e);
    };
    weights += part(l.dense_bytes, l.attn_q.bytes, l.attn_kv.bytes, l.ffn.bytes, l.expert_bytes);
    packed += part(l.packed_dense_bytes, l.attn_q.packed, l.attn_kv.packed, l.ffn.packed, l.packed_expert_bytes);
    kv_own += static_cast<double>(l.kv_cache_bytes(w.n_ctx));
    kv_held += kv * static_cast<double>(l.kv_cache_bytes(w.n_ctx));
  }
  // Sliding-window layers keep a ring, layers that reuse K/V keep none, and the stage keeps a copy of an earlier
  // layer's K/V that one of its layers reads: exactly what kv_cache_config allocates. A rank keeps its KV heads'.
  double kv = 0;
  if (s.last >= s.first) {
    kv = static_cast<double>(m.stage_kv_cache_bytes(s.first, s.last, w.n_ctx)) * static_cast<double>(w.concurrency) *
         (kv_own > 0 ? kv_held / kv_own : 1.0);
  }
  uint64_t fixed = m.other_bytes;
  if (s.first_stage) fixed += m.embd_bytes + m.input_bytes;
  if (s.last_stage && share != nullptr) {
    // A rank copies its rows of the head (of token_embd when tied) next to the embedding it keeps whole.
    const double rows = static_cast<double>(m.config.tied_output ? m.embd_bytes : m.output_bytes);
    fixed += static_cast<uint64_t>(share->vocab * rows) + (m.config.tied_output ? m.output_bytes : 0);
  } else if (s.last_stage) {
    // A tied head multiplies by token_embd, so a last stage that is not also the first holds its own copy.
    fixed += m.output_bytes + (m.config.tied_output && !s.first_stage ? m.embd_bytes : 0);
  }
  need.weights = static_cast<uint64_t>(weights) + fixed;
  // --repack packs the stage's matrices and its head next to them (the embedding is only looked up, never packed).
  if (node.repack) {
    const double head = static_cast<double>(m.output_packed_bytes) * (share ? share->vocab : 1.0);
    need.packed =
        static_cast<uint64_t>(packed + (s.last_stage ? head : 0.0)) + (s.first_stage ? m.input_packed_bytes : 0);
  }
  need.kv_cache = static_cast<uint64_t>(kv);
  need.buffers = buffer_bytes(w, s.last_stage);
  // Ranks of one machine share its memory.
  const double sharing = g != nullptr ? machine_ranks(*g, static_cast<size_t>(rank)) : 1.0;
  need.available =
      static_cast<uint64_t>(static_cast<double>(node.mem_available_bytes) * (1.0 - k_.memory_headroom) / sharing);
  return need;
}

MemoryNeed CostModel::stage_memory(const StageSpec& s, const Workload& w) const {
  return s.group ? rank_memory(s, 0, w) : rank_memory(s, -1, w);
}

std::vector<MemoryNeed> CostModel::group_memory(const StageSpec& s, const Workload& w) const {
  std::vector<MemoryNeed> out;
  if (!s.group) {
    out.push_back(stage_memory(s, w));
    return out;
  }
  for (size_t r = 0; r < s.group->nodes.size(); ++r) out.push_back(rank_memory(s, static_cast<int>(r), w));
  return out;
}

Prediction CostModel::finish(double prefill_s, int64_t micro_batch, TimeParts prefill_parts, double d1_s,
                             TimeParts d1_parts, double dc_tps, TimeParts dc_parts, int64_t groups, double prefill_c_s,
                             const Workload& w) const {
  Prediction p;
  p.prefill_s = prefill_s;
  p.prefill_tps = static_cast<double>(w.prompt_tokens) / prefill_s;
  p.micro_batch = micro_batch;
  p.prefill_parts = prefill_parts;
  p.decode_tps_1 = 1.0 / d1_s;
  p.decode_parts_1 = d1_parts;
  p.decode_tps_c = dc_tps;
  p.decode_parts_c = dc_parts;
  p.decode_groups = groups;
  const double decode_s = static_cast<double>(w.n_gen * w.concurrency) / dc_tps;
  p.score_s = prefill_c_s + decode_s;
  p.prefill_dominates = prefill_c_s > decode_s;
  p.bottleneck = p.prefill_dominates ? prefill_parts.dominant() : dc_parts.dominant();
  return p;
}

Prediction CostModel::predict_pipeline(std::span<const StageSpec> stages, const Workload& w) const {
  if (stages.empty()) fail("internal: a pipeline needs at least one stage");
  const size_t head = cluster_.head_index();
  const double act = activation_bytes();
  const double id_bytes = k_.wire_bytes_per_token_id;

  // The ring for a pass of `tokens` tokens from `seqs` sequences; the return hop is added by the callers.
  auto ring_elements = [&](double tokens, double seqs, double ctx, double logits) {
    std::vector<Element> elems;
    auto add_hop = [&](size_t a, size_t b, double bytes) {
      const TimeParts t = hop_time(a, b, bytes);
      elems.push_back({t, a == b ? 0.0 : t.bandwidth + k_.message_overhead_s});
    };
    add_hop(head, stages.front().node, tokens * id_bytes);
    for (size_t i = 0; i < stages.size(); ++i) {
      const TimeParts t = stage_time(stages[i], tokens, seqs, ctx, stages[i].last_stage ? logits : 0.0);
      elems.push_back({t, t.total()});
      if (i + 1 < stages.size()) add_hop(stages[i].node, stages[i + 1].node, tokens * act);
    }
    return elems;
  };
  auto ring = [&](double tokens, double seqs, double ctx, double logits) {
    return combine(ring_elements(tokens, seqs, ctx, logits));
  };
  const size_t last_node = stages.back().node;

  // Prefill of `total` prompt tokens (one prompt, or `concurrency` of them) in micro-batches of m: the first
  // micro-batch crosses every element, each further one adds the busiest element's time (flow-shop makespan); the
  // logits of the final token and the sampled token's return come once at the end.
  auto prefill = [&](double total, int64_t& best_m, TimeParts& best_parts) {
    double best = INFINITY;
    const double ctx = static_cast<double>(w.prompt_tokens) / 2.0;
    const int64_t cap = std::min<int64_t>(w.n_batch, static_cast<int64_t>(std::ceil(total)));
    std::vector<int64_t> sizes;
    if (stages.size() > 1 && w.micro_batch > 0) {
      sizes.push_back(std::min(w.micro_batch, cap));
    } else {
      if (stages.size() > 1) {
        for (int64_t m : PlanConstants::kMicroBatches) {
          if (m < cap) sizes.push_back(m);
        }
      }
      sizes.push_back(cap);
    }
    for (int64_t m : sizes) {
      TimeParts parts;
      const auto end = static_cast<double>(w.end_batch);
      if (stages.size() > 1 && w.micro_batch > 0 && w.end_batch > 0 && total > 2.0 * end) {
        // Micro-batches of two sizes (the short first and last, n_mid full ones between): the makespan is the
        // flow-shop recurrence over the ring's elements; its split into compute and network follows the short first
        // one's trip plus every later one on the busiest element, scaled to that makespan. Over equal stages the
        // later stages trail by a full micro-batch once one has entered, so the halved ends pay only in front of and
        // behind a bottleneck.
        const double n_mid = std::ceil((total - 2.0 * end) / static_cast<double>(m));
        const double mid = (total - 2.0 * end) / n_mid;
        const RingTime short_one = ring(end, 1.0, ctx, 0.0);
        parts = short_one.sum;
        parts += ring(mid, 1.0, ctx, 0.0).busiest.scaled(n_mid);
        parts += short_one.busiest;
        const std::vector<Element> short_elems = ring_elements(end, 1.0, ctx, 0.0);
        const std::vector<Element> mid_elems = ring_elements(mid, 1.0, ctx, 0.0);
        const auto n_chunks = static_cast<int64_t>(n_mid) + 2;
        const auto elems_of = [&](int64_t c) -> const std::vector<Element>& {
          return c == 0 || c == n_chunks - 1 ? short_elems : mid_elems;
        };
        const double last_out = flow_shop_makespan(
            n_chunks, short_elems.size(), [&](int64_t c, size_t j) { return elems_of(c)[j].busy; },
            [&](int64_t c, size_t j) { return elems_of(c)[j].t.total(); });
        if (parts.total() > 0) parts = parts.scaled(last_out / parts.total());
      } else {
        const double n_mb = std::ceil(total / static_cast<double>(m));
        const RingTime r = ring(total / n_mb, 1.0, ctx, 0.0);
        parts = r.sum;
        parts += r.busiest.scaled(n_mb - 1.0);
      }
      StageSpec head_only = stages.back();
      head_only.first = 0;
      head_only.last = -1;
      head_only.first_stage = false;
      TimeParts logits = stage_time(head_only, 1.0, 0.0, 0.0, total / static_cast<double>(w.prompt_tokens));
      logits.compute -= k_.stage_overhead_s;
      parts += logits;
      parts += hop_time(last_node, head, id_bytes);
      if (parts.total() < best) {
        best = parts.total();
        best_m = m;
        best_parts = parts;
      }
    }
    return best;
  };

  int64_t micro_batch = 0, unused_m = 0;
  TimeParts prefill_parts, unused_parts;
  const double prefill_s = prefill(static_cast<double>(w.prompt_tokens), micro_batch, prefill_parts);
  const double prefill_c_s =
      w.concurrency == 1 ? prefill_s
                         : prefill(static_cast<double>(w.prompt_tokens * w.concurrency), unused_m, unused_parts);

  // Decode: every sequence adds one token per round of the ring.
  const double ctx = static_cast<double>(w.prompt_tokens) + static_cast<double>(w.n_gen) / 2.0;
  auto decode_round = [&](double seqs) {
    RingTime r = ring(seqs, seqs, ctx, seqs);
    const TimeParts back = hop_time(last_node, head, seqs * id_bytes);
    r.sum += back;
    return r;
  };
  const RingTime one = decode_round(1.0);
  const auto c = static_cast<double>(w.concurrency);
  // The runtime keeps one step in flight per stage (Executor::lanes): g = min(stages, C) groups of C/g sequences,
  // each entering the ring again as soon as its tokens are back. A round takes the ring's latency for one group or
  // g times the busiest element's occupancy, whichever is longer.
  const int64_t g = std::min<int64_t>(w.concurrency, static_cast<int64_t>(stages.size()));
  const RingTime r = decode_round(c / static_cast<double>(g));
  const bool latency_bound = r.sum.total() >= static_cast<double>(g) * r.busy;
  const TimeParts parts = latency_bound ? r.sum : r.busiest.scaled(static_cast<double>(g));
  return finish(prefill_s, micro_batch, prefill_parts, one.sum.total(), one.sum, c / parts.total(), parts, g,
                prefill_c_s, w);
}

}  // namespace tessera::plan
