// Range checks for node and link profiles: every number the planner divides by must be positive and finite.
#include "plan/node_profile.h"

#include <cctype>
#include <cmath>

#include "plan/link_profile.h"
#include "util/error.h"

namespace tessera::plan {
namespace {

void check_range(double v, double lo, double hi, std::string_view node, std::string_view field) {
  if (!std::isfinite(v) || v <= lo || v > hi) {
    fail("node '{}': {} = {} must be above {} and at most {}", node, field, v, lo, hi);
  }
}

}  // namespace

void validate_node_name(std::string_view name, std::string_view where) {
  bool ok = !name.empty() && name.size() <= 64 && !std::isdigit(static_cast<unsigned char>(name.front()));
  for (char ch : name) {
    const auto c = static_cast<unsigned char>(ch);
    if (!std::isalnum(c) && ch != '_' && ch != '.' && ch != '-') ok = false;
  }
  if (!ok) {
    fail("{}: bad node name '{}': use 1-64 letters, digits, '_', '.' or '-', not starting with a digit", where, name);
  }
}

void validate_node(const NodeProfile& n) {
  validate_node_name(n.name, "node");
  // 1 PiB, 100 TB/s and 1e9 GFLOPS are far beyond any machine; anything larger is a unit mistake.
  check_range(static_cast<double>(n.mem_available_bytes), 0, 1125899906842624.0, n.name, "available memory (bytes)");
  check_range(n.mem_read_gbps, 0, 1e5, n.name, "memory read bandwidth (GB/s)");
  check_range(n.int8_gops, 0, 1e9, n.name, "int8 GOPS");
  check_range(n.f32_gflops, 0, 1e9, n.name, "f32 GFLOPS");
  if (n.cores < 0 || n.cores > 1 << 20) fail("node '{}': cores = {} is out of range", n.name, n.cores);
  for (const auto& [type, rate] : n.matmul_gflops) check_range(rate, 0, 1e9, n.name, "matmul GFLOPS of " + type);
  for (size_t i = 0; i < n.batch_rates.size(); ++i) {
    const BatchRate& b = n.batch_rates[i];
    if (b.tokens < 1 || b.tokens > 1 << 20 || (i > 0 && b.tokens <= n.batch_rates[i - 1].tokens)) {
      fail("node '{}': batch rate {}: {} tokens is not above the count before it", n.name, i, b.tokens);
    }
    check_range(b.fraction, 0, 4, n.name, fmt::format("batch rate of {} tokens", b.tokens));
    if (!(b.fraction > 0)) fail("node '{}': batch rate of {} tokens must be above 0", n.name, b.tokens);
  }
}

void validate_link(const LinkProfile& l) {
  if (!std::isfinite(l.rtt_s) || l.rtt_s < 0 || l.rtt_s > 10.0) {
    fail("link {} <-> {}: RTT {} s must be between 0 and 10 s", l.a, l.b, l.rtt_s);
  }
  if (!std::isfinite(l.gbit_per_s) || l.gbit_per_s <= 0 || l.gbit_per_s > 1e4) {
    fail("link {} <-> {}: bandwidth {} Gbit/s must be above 0 and at most 10000", l.a, l.b, l.gbit_per_s);
  }
}

}  // namespace tessera::plan
