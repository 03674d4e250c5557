// Prometheus text exposition (version 0.0.4): HELP and TYPE once per metric family, then its samples.
#include "server/metrics.h"

#include <fmt/format.h>

namespace tessera::server {

std::string prometheus_label(std::string_view value) {
  std::string out;
  for (char c : value) {
    if (c == '\\' || c == '"') {
      out += '\\';
      out += c;
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

void Histogram::observe(double seconds) {
  for (size_t i = 0; i < kBounds.size(); ++i) {
    if (seconds <= kBounds[i]) {
      ++buckets_[i];
      break;
    }
  }
  ++count_;
  sum_ += seconds;
}

void Histogram::render(std::string& out, std::string_view name) const {
  uint64_t cumulative = 0;
  for (size_t i = 0; i < kBounds.size(); ++i) {
    cumulative += buckets_[i];
    out += fmt::format("{}_bucket{{le=\"{}\"}} {}\n", name, kBounds[i], cumulative);
  }
  out += fmt::format("{}_bucket{{le=\"+Inf\"}} {}\n", name, count_);
  out += fmt::format("{}_sum {}\n{}_count {}\n", name, sum_, name, count_);
}

void Metrics::record_http(std::string_view route, int status) {
  std::lock_guard lock(mutex_);
  ++http_[{std::string(route), status}];
}

void Metrics::record_generation(double first_token_seconds, double total_seconds, bool had_token) {
  std::lock_guard lock(mutex_);
  if (had_token) first_token_.observe(first_token_seconds);
  duration_.observe(total_seconds);
}

void Metrics::record_rejected() {
  std::lock_guard lock(mutex_);
  ++rejected_;
}

namespace {

void family(std::string& out, std::string_view name, std::string_view type, std::string_view help) {
  out += fmt::format("# HELP {} {}\n# TYPE {} {}\n", name, help, name, type);
}

constexpr std::string_view kReasonLabels[] = {"end_of_generation", "stop_string", "length",
                                              "context_full",      "cancelled",   "error"};

}  // namespace

std::string Metrics::render(const std::vector<std::shared_ptr<Replica>>& replicas, bool ready) const {
  std::string out;
  family(out, "tessera_ready", "gauge", "1 when the server accepts generation requests.");
  out += fmt::format("tessera_ready {}\n", ready ? 1 : 0);
  {
    std::lock_guard lock(mutex_);
    family(out, "tessera_http_requests_total", "counter", "HTTP requests by route and status code.");
    for (const auto& [key, n] : http_) {
      out += fmt::format("tessera_http_requests_total{{route=\"{}\",status=\"{}\"}} {}\n", prometheus_label(key.first),
                         key.second, n);
    }
    family(out, "tessera_requests_rejected_total", "counter",
           "Generation requests refused with 503 because every queue was full.");
    out += fmt::format("tessera_requests_rejected_total {}\n", rejected_);
    family(out, "tessera_time_to_first_token_seconds", "histogram",
           "From a request's arrival at a scheduler to its first sampled token.");
    first_token_.render(out, "tessera_time_to_first_token_seconds");
    family(out, "tessera_request_duration_seconds", "histogram", "From a request's arrival to its end.");
    duration_.render(out, "tessera_request_duration_seconds");
  }

  std::vector<SchedulerStats> stats;
  for (const auto& r : replicas) stats.push_back(r->scheduler().stats());
  auto per_replica = [&](std::string_view name, std::string_view type, std::string_view help, auto value) {
    family(out, name, type, help);
    for (size_t i = 0; i < replicas.size(); ++i) {
      out += fmt::format("{}{{replica=\"{}\"}} {}\n", name, replicas[i]->id(), value(stats[i]));
    }
  };
  family(out, "tessera_requests_total", "counter", "Generation requests that ended, by replica and finish reason.");
  for (size_t i = 0; i < replicas.size(); ++i) {
    for (size_t k = 0; k < std::size(kReasonLabels); ++k) {
      out += fmt::format("tessera_requests_total{{replica=\"{}\",reason=\"{}\"}} {}\n", replicas[i]->id(),
                         kReasonLabels[k], stats[i].finished[k]);
    }
  }
  per_replica("tessera_prompt_tokens_total", "counter", "Prompt tokens evaluated.",
              [](const SchedulerStats& s) { return s.prompt_tokens; });
  per_replica("tessera_generated_tokens_total", "counter", "Tokens sampled.",
              [](const SchedulerStats& s) { return s.generated_tokens; });
  per_replica("tessera_prompt_tokens_per_second", "gauge", "Prompt tokens evaluated per second (recent window).",
              [](const SchedulerStats& s) { return s.prompt_tokens_per_second; });
  per_replica("tessera_decode_tokens_per_second", "gauge", "Tokens generated per second (recent window).",
              [](const SchedulerStats& s) { return s.decode_tokens_per_second; });
  per_replica("tessera_queue_depth", "gauge", "Requests waiting for a sequence slot.",
              [](const SchedulerStats& s) { return s.queued; });
  per_replica("tessera_active_sequences", "gauge", "Sequences decoding.",
              [](const SchedulerStats& s) { return s.active; });
  per_replica("tessera_parallel_sequences", "gauge", "Sequence slots (--parallel).",
              [](const SchedulerStats& s) { return s.n_parallel; });
  per_replica("tessera_forward_failures_total", "counter", "Forward passes that failed.",
              [](const SchedulerStats& s) { return s.failed_steps; });
  per_replica("tessera_requests_moved_total", "counter",
              "Running requests moved to another replica after this one lost a node it could not replace.",
              [](const SchedulerStats& s) { return s.moved_out; });
  // Recovery by replay (a failed worker replaced, its sequences rebuilt): what it cost so far.
  std::vector<RecoveryStats> rec;
  for (const auto& r : replicas) rec.push_back(r->recovery());
  auto per_recovery = [&](std::string_view name, std::string_view type, std::string_view help, auto value) {
    family(out, name, type, help);
    for (size_t i = 0; i < replicas.size(); ++i) {
      out += fmt::format("{}{{replica=\"{}\"}} {}\n", name, replicas[i]->id(), value(rec[i]));
    }
  };
  per_recovery("tessera_failovers_total", "counter", "Failed workers replaced (a spare, the worker again, or local).",
               [](const RecoveryStats& r) { return r.failovers; });
  per_recovery("tessera_replayed_tokens_total", "counter", "Tokens replayed to rebuild KV caches after a failover.",
               [](const RecoveryStats& r) { return r.replayed_tokens; });
  per_recovery("tessera_recovering", "gauge", "1 while a recovery runs.",
               [](const RecoveryStats& r) { return r.recovering ? 1 : 0; });

  // Under --tp/--ep: the collectives of this rank (rank 0, which serves), the cost of splitting every layer.
  std::vector<std::pair<int, collective::CollectiveStats>> coll;
  for (const auto& r : replicas) {
    if (auto st = r->collectives()) coll.emplace_back(r->id(), *st);
  }
  if (!coll.empty()) {
    family(out, "tessera_collectives_total", "counter", "Collectives (all-reduce, broadcast, gather) this rank ran.");
    for (const auto& [id, st] : coll)
      out += fmt::format("tessera_collectives_total{{replica=\"{}\"}} {}\n", id, st.calls);
    family(out, "tessera_collective_bytes_total", "counter", "Bytes this rank sent into collectives.");
    for (const auto& [id, st] : coll) {
      out += fmt::format("tessera_collective_bytes_total{{replica=\"{}\"}} {}\n", id, st.bytes);
    }
    family(out, "tessera_collective_seconds_total", "counter", "Seconds this rank spent in collectives.");
    for (const auto& [id, st] : coll) {
      out += fmt::format("tessera_collective_seconds_total{{replica=\"{}\"}} {}\n", id, st.seconds);
    }
  }

  struct NodeRow {
    int replica;
    const NodeInfo* info;
    NodeLive live;
    double step_seconds;
  };
  std::vector<NodeRow> nodes;
  for (size_t i = 0; i < replicas.size(); ++i) {
    const auto live = replicas[i]->live();
    for (size_t n = 0; n < replicas[i]->nodes().size(); ++n) {
      nodes.push_back({replicas[i]->id(), &replicas[i]->nodes()[n], live[n], stats[i].mean_step_seconds});
    }
  }
  auto per_node = [&](std::string_view name, std::string_view type, std::string_view help, auto emit) {
    family(out, name, type, help);
    for (const auto& n : nodes) {
      const std::string labels = fmt::format("replica=\"{}\",node=\"{}\"", n.replica, prometheus_label(n.info->name));
      emit(labels, n);
    }
  };
  per_node("tessera_node_up", "gauge", "1 while the node answers.", [&](const std::string& l, const NodeRow& n) {
    out += fmt::format("tessera_node_up{{{}}} {}\n", l, n.live.up ? 1 : 0);
  });
  per_node("tessera_node_step_seconds", "gauge", "Mean forward pass time of the node's replica (recent window).",
           [&](const std::string& l, const NodeRow& n) {
             out += fmt::format("tessera_node_step_seconds{{{}}} {}\n", l, n.step_seconds);
           });
  per_node("tessera_node_link_rtt_seconds", "gauge", "Round trip to the node (0 for the serving process).",
           [&](const std::string& l, const NodeRow& n) {
             out += fmt::format("tessera_node_link_rtt_seconds{{{}}} {}\n", l, n.live.link_rtt_seconds);
           });
  per_node("tessera_node_memory_bytes", "gauge", "Weights and KV cache held by the node.",
           [&](const std::string& l, const NodeRow& n) {
             out += fmt::format("tessera_node_memory_bytes{{{},kind=\"weights\"}} {}\n", l, n.info->weight_bytes);
             out += fmt::format("tessera_node_memory_bytes{{{},kind=\"kv_cache\"}} {}\n", l, n.info->kv_bytes);
           });
  per_node("tessera_node_link_bytes_total", "counter", "Bytes sent to and received from the node.",
           [&](const std::string& l, const NodeRow& n) {
             out += fmt::format("tessera_node_link_bytes_total{{{},direction=\"sent\"}} {}\n", l, n.live.bytes_sent);
             out += fmt::format("tessera_node_link_bytes_total{{{},direction=\"received\"}} {}\n", l,
                                n.live.bytes_received);
           });
  return out;
}

}  // namespace tessera::server
