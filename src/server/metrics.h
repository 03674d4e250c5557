// What /metrics reports, in Prometheus' text format: HTTP requests by route and status, generation requests,
// tokens, prompt and decode tokens/s, queue depth, time to first token, and per node latency, memory and bytes.
#pragma once

#include <array>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "server/replica.h"

namespace tessera::server {

// A Prometheus histogram with fixed buckets (seconds).
class Histogram {
 public:
  static constexpr std::array<double, 14> kBounds = {0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5,
                                                     1,     2.5,  5,     10,   30,  60,   120};
  void observe(double seconds);
  // Appends the _bucket, _sum and _count lines of metric `name`.
  void render(std::string& out, std::string_view name) const;
  uint64_t count() const { return count_; }

 private:
  std::array<uint64_t, kBounds.size()> buckets_{};  // per bucket (made cumulative when rendered)
  uint64_t count_ = 0;
  double sum_ = 0;
};

class Metrics {
 public:
  void record_http(std::string_view route, int status);
  // A generation request that ran (whatever ended it).
  void record_generation(double first_token_seconds, double total_seconds, bool had_token);
  void record_rejected();  // every replica's queue was full

  // The whole text: these counters plus each replica's scheduler and node figures. ready: 1 when serving.
  std::string render(const std::vector<std::shared_ptr<Replica>>& replicas, bool ready) const;

 private:
  mutable std::mutex mutex_;
  std::map<std::pair<std::string, int>, uint64_t> http_;
  Histogram first_token_;
  Histogram duration_;
  uint64_t rejected_ = 0;
};

// A label value with \, " and newline escaped as the text format requires.
std::string prometheus_label(std::string_view value);

}  // namespace tessera::server
