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

CostModel::CostModel(const ModelCost& model, const Cluster& cluster, const PlanConstants& constants)
    : model_(model), cluster_(cluster), k_(constants) {}

double CostModel::activation_bytes() const {
  return static_cast<double>(model_.config.n_embd) * k_.wire_bytes_per_value;
}

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
  if (tokens >= k_.few_token_batch) {
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

TimeParts CostModel::stage_time(const StageSpec& s, double tokens, double seqs, double ctx, double logit_tokens) const {
  const ModelCost& m = model_;
  const double k = static_cast<double>(m.config.n_expert_used);
  const double n = static_cast<double>(m.config.n_expert);
  const double expert_share = n > 0 ? distinct_experts(tokens) / n : 0.0;
  double bytes = 0, fq = 0, ff = 0, eq = 0, ef = 0;
  for (int64_t i = s.first; i <= s.last; ++i) {
    const LayerCost& l = m.layers[static_cast<size_t>(i)];
    bytes += s.fraction * static_cast<double>(l.dense_bytes);
    fq += s.fraction * tokens * l.dense_flops_q;
    ff += s.fraction * tokens * l.dense_flops_f;
    if (s.experts) {
      bytes += s.fraction * static_cast<double>(l.expert_bytes) * expert_share;
      eq += s.fraction * tokens * k * l.expert_flops_q;
      ef += s.fraction * tokens * k * l.expert_flops_f;
    }
    // Attention: each sequence reads its own history once per pass; every token scores every position it sees (f32),
    // on a sliding-window layer the last `window` of them.
    const double seen = l.attended_positions(ctx);
    bytes += s.fraction * seqs * seen * static_cast<double>(l.kv_bytes_per_token);
    ff += s.fraction * tokens * seen * l.attn_flops_per_pos;
  }
  if (s.first_stage) {
    // The embedding rows, and Gemma 4's per-layer inputs: a row per token of their table, the projection once.
    bytes += tokens * static_cast<double>(m.embd_row_bytes) + static_cast<double>(m.input_read_bytes);
    fq += tokens * m.input_flops_q;
    ff += tokens * m.input_flops_f;
  }
  if (s.last_stage && logit_tokens > 0) {
    bytes += static_cast<double>(m.head_read_bytes());
    fq += logit_tokens * m.output_flops_q;
    ff += logit_tokens * m.output_flops_f;
  }
  const double mem_s = bytes / read_rate(s.node);
  // An expert's matmul sees only the tokens routed to it, a smaller batch at a lower rate.
  const double per_expert = expert_batch(tokens);
  const double comp_s = fq / compute_rate(s.node, true, tokens) + ff / compute_rate(s.node, false, tokens) +
                        eq / compute_rate(s.node, true, per_expert) + ef / compute_rate(s.node, false, per_expert);
  TimeParts t;
  (mem_s >= comp_s ? t.memory : t.compute) = std::max(mem_s, comp_s);
  t.compute += static_cast<double>(std::max<int64_t>(s.layers(), 0)) * k_.layer_overhead_s + k_.stage_overhead_s;
  return t;
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

MemoryNeed CostModel::stage_memory(const StageSpec& s, const Workload& w) const {
  const ModelCost& m = model_;
  MemoryNeed need;
  need.node = s.node;
  const NodeProfile& node = cluster_.nodes()[s.node];
  double weights = 0, kv = 0, packed = 0;
  for (int64_t i = s.first; i <= s.last; ++i) {
    const LayerCost& l = m.layers[static_cast<size_t>(i)];
    weights += s.fraction * static_cast<double>(l.dense_bytes + (s.experts ? l.expert_bytes : 0));
    packed += s.fraction * static_cast<double>(l.packed_dense_bytes + (s.experts ? l.packed_expert_bytes : 0));
  }
  // Sliding-window layers keep a ring, layers that reuse K/V keep none, and the stage keeps a copy of an earlier
  // layer's K/V that one of its layers reads: exactly what kv_cache_config allocates.
  if (s.last >= s.first) {
    kv = s.fraction * static_cast<double>(m.stage_kv_cache_bytes(s.first, s.last, w.n_ctx)) *
         static_cast<double>(w.concurrency);
  }
  uint64_t fixed = m.other_bytes;
  if (s.first_stage) fixed += m.embd_bytes + m.input_bytes;
  // A tied head multiplies by token_embd, so a last stage that is not also the first holds its own copy.
  if (s.last_stage) fixed += m.output_bytes + (m.config.tied_output && !s.first_stage ? m.embd_bytes : 0);
  need.weights = static_cast<uint64_t>(weights) + fixed;
  // --repack packs the stage's matrices and its head next to them (the embedding is only looked up, never packed).
  if (node.repack) {
    need.packed = static_cast<uint64_t>(packed) + (s.last_stage ? m.output_packed_bytes : 0) +
                  (s.first_stage ? m.input_packed_bytes : 0);
  }
  need.kv_cache = static_cast<uint64_t>(kv);
  need.buffers = buffer_bytes(w, s.last_stage);
  need.available = static_cast<uint64_t>(static_cast<double>(node.mem_available_bytes) * (1.0 - k_.memory_headroom));
  return need;
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

Prediction CostModel::predict_tensor_parallel(std::span<const size_t> nodes, const Workload& w) const {
  if (nodes.empty()) fail("internal: tensor parallel needs nodes");
  const auto g = static_cast<double>(nodes.size());
  const int64_t n_layer = model_.n_layer();
  const size_t head = cluster_.head_index();
  std::vector<StageSpec> specs;
  for (size_t i = 0; i < nodes.size(); ++i) specs.push_back({nodes[i], 0, n_layer - 1, i == 0, i == 0, 1.0 / g});
  // A ring all-reduce moves 2(g-1) chunks of bytes/g, each step paced by the slowest link of the ring.
  double step_latency = 0, step_bw = INFINITY;
  for (size_t i = 0; nodes.size() > 1 && i < nodes.size(); ++i) {
    const size_t a = nodes[i], b = nodes[(i + 1) % nodes.size()];
    const LinkProfile l = cluster_.link(cluster_.nodes()[a].name, cluster_.nodes()[b].name);
    step_latency = std::max(step_latency, l.rtt_s / 2.0 + k_.message_overhead_s);
    step_bw = std::min(step_bw, l.bytes_per_s());
  }
  auto step = [&](double tokens, double seqs, double ctx, double logits) {
    TimeParts worst;
    for (const auto& s : specs) {
      const TimeParts t = stage_time(s, tokens, seqs, ctx, s.last_stage ? logits : 0.0);
      if (t.total() > worst.total()) worst = t;
    }
    if (nodes.size() > 1) {
      const double steps = 2.0 * (g - 1.0) * 2.0 * static_cast<double>(n_layer);  // two all-reduces per layer
      worst.latency += steps * step_latency;
      worst.bandwidth += steps * tokens * activation_bytes() / g / step_bw;
    }
    worst += hop_time(head, nodes[0], tokens * k_.wire_bytes_per_token_id);
    worst += hop_time(nodes[0], head, seqs * k_.wire_bytes_per_token_id);
    return worst;
  };
  auto prefill = [&](double total) {
    const double n_mb = std::ceil(total / static_cast<double>(std::min<int64_t>(w.n_batch, w.prompt_tokens)));
    // Every node takes part in every micro-batch, so nothing overlaps; the head's few logits are left out.
    return step(total / n_mb, 1.0, static_cast<double>(w.prompt_tokens) / 2.0, 0.0).scaled(n_mb);
  };
  const TimeParts pf = prefill(static_cast<double>(w.prompt_tokens));
  const TimeParts pf_c = prefill(static_cast<double>(w.prompt_tokens * w.concurrency));
  const double ctx = static_cast<double>(w.prompt_tokens) + static_cast<double>(w.n_gen) / 2.0;
  const TimeParts d1 = step(1.0, 1.0, ctx, 1.0);
  const auto c = static_cast<double>(w.concurrency);
  const TimeParts dc = step(c, c, ctx, c);
  return finish(pf.total(), std::min<int64_t>(w.n_batch, w.prompt_tokens), pf, d1.total(), d1, c / dc.total(), dc, 1,
                pf_c.total(), w);
}

std::vector<MemoryNeed> CostModel::tensor_parallel_memory(std::span<const size_t> nodes, const Workload& w) const {
  std::vector<MemoryNeed> out;
  const auto g = static_cast<double>(nodes.size());
  for (size_t i = 0; i < nodes.size(); ++i) {
    out.push_back(stage_memory({nodes[i], 0, model_.n_layer() - 1, i == 0, i == 0, 1.0 / g}, w));
  }
  return out;
}

namespace {

// Experts of each layer per node: an even spread, the remainder on the first nodes.
std::vector<double> expert_shares(int64_t n_expert, size_t n_nodes) {
  std::vector<double> out;
  const auto base = n_expert / static_cast<int64_t>(n_nodes);
  const auto rest = n_expert % static_cast<int64_t>(n_nodes);
  for (size_t i = 0; i < n_nodes; ++i) out.push_back(static_cast<double>(base + (static_cast<int64_t>(i) < rest)));
  return out;
}

}  // namespace

Prediction CostModel::predict_expert_parallel(std::span<const size_t> nodes, const Workload& w) const {
  if (nodes.empty() || model_.config.n_expert == 0) fail("internal: expert parallel needs nodes and an MoE model");
  const ModelConfig& c = model_.config;
  const size_t home = nodes[0];
  const size_t head = cluster_.head_index();
  const auto n = static_cast<double>(c.n_expert);
  const auto k = static_cast<double>(c.n_expert_used);
  const std::vector<double> shares = expert_shares(c.n_expert, nodes.size());
  const StageSpec home_spec{home, 0, model_.n_layer() - 1, true, true, 1.0, false};

  auto step = [&](double tokens, double seqs, double ctx, double logits) {
    TimeParts parts = stage_time(home_spec, tokens, seqs, ctx, logits);
    const double touched = 1.0 - std::pow(1.0 - k / n, tokens);  // chance a given expert is used by the batch
    for (const auto& l : model_.layers) {
      TimeParts worst;
      for (size_t i = 0; i < nodes.size(); ++i) {
        const double bytes = shares[i] * touched * static_cast<double>(l.expert_bytes) / n;
        const double fq = tokens * k * shares[i] / n * l.expert_flops_q;
        const double ff = tokens * k * shares[i] / n * l.expert_flops_f;
        const double mem_s = bytes / read_rate(nodes[i]);
        const double per_expert = expert_batch(tokens);
        const double comp_s =
            fq / compute_rate(nodes[i], true, per_expert) + ff / compute_rate(nodes[i], false, per_expert);
        TimeParts t;
        (mem_s >= comp_s ? t.memory : t.compute) = std::max(mem_s, comp_s);
        if (nodes[i] != home) {
          // Tokens routed to this node go out and their outputs come back, every layer.
          const double sent = tokens * std::min(1.0, k * shares[i] / n) * activation_bytes();
          t += hop_time(home, nodes[i], sent);
          t += hop_time(nodes[i], home, sent);
        }
        if (t.total() > worst.total()) worst = t;
      }
      parts += worst;
    }
    parts += hop_time(head, home, tokens * k_.wire_bytes_per_token_id);
    parts += hop_time(home, head, seqs * k_.wire_bytes_per_token_id);
    return parts;
  };
  auto prefill = [&](double total) {
    const double n_mb = std::ceil(total / static_cast<double>(std::min<int64_t>(w.n_batch, w.prompt_tokens)));
    return step(total / n_mb, 1.0, static_cast<double>(w.prompt_tokens) / 2.0, 0.0).scaled(n_mb);
  };
  const TimeParts pf = prefill(static_cast<double>(w.prompt_tokens));
  const TimeParts pf_c = prefill(static_cast<double>(w.prompt_tokens * w.concurrency));
  const double ctx = static_cast<double>(w.prompt_tokens) + static_cast<double>(w.n_gen) / 2.0;
  const TimeParts d1 = step(1.0, 1.0, ctx, 1.0);
  const auto cc = static_cast<double>(w.concurrency);
  const TimeParts dc = step(cc, cc, ctx, cc);
  return finish(pf.total(), std::min<int64_t>(w.n_batch, w.prompt_tokens), pf, d1.total(), d1, cc / dc.total(), dc, 1,
                pf_c.total(), w);
}

std::vector<MemoryNeed> CostModel::expert_parallel_memory(std::span<const size_t> nodes, const Workload& w) const {
  const std::vector<double> shares = expert_shares(model_.config.n_expert, nodes.size());
  double expert_total = 0, packed_total = 0;
  for (const auto& l : model_.layers) {
    expert_total += static_cast<double>(l.expert_bytes);
    packed_total += static_cast<double>(l.packed_expert_bytes);
  }
  const auto n = static_cast<double>(model_.config.n_expert);
  std::vector<MemoryNeed> out;
  for (size_t i = 0; i < nodes.size(); ++i) {
    MemoryNeed need;
    if (i == 0) {
      need = stage_memory({nodes[0], 0, model_.n_layer() - 1, true, true, 1.0, false}, w);
    } else {
      need.node = nodes[i];
      need.buffers = buffer_bytes(w, false);
      need.available = static_cast<uint64_t>(static_cast<double>(cluster_.nodes()[nodes[i]].mem_available_bytes) *
                                             (1.0 - k_.memory_headroom));
    }
    need.weights += static_cast<uint64_t>(expert_total * shares[i] / n);
    if (cluster_.nodes()[nodes[i]].repack) need.packed += static_cast<uint64_t>(packed_total * shares[i] / n);
    out.push_back(need);
  }
  return out;
}

}  // namespace tessera::plan
