// Probe results as node profiles, and the probe cache: the measurements take seconds and hardly change within
// minutes, while free memory does, so only the former are cached.
#include "plan/local_node.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "util/error.h"
#include "util/log.h"

namespace tessera::plan {
namespace {

using nlohmann::json;

json batch_rates_json(const std::vector<BatchRate>& rates) {
  json out = json::array();
  for (const BatchRate& b : rates) out.push_back({{"tokens", b.tokens}, {"fraction", b.fraction}});
  return out;
}

double unix_now() { return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count(); }

std::string host_name() {
  char buf[256] = {};
  if (gethostname(buf, sizeof(buf) - 1) != 0) return "unknown";
  return buf;
}

double field(const json& j, const char* key, const std::string& where) {
  if (!j.contains(key) || !j.at(key).is_number()) fail("{}: '{}' is missing or not a number", where, key);
  return j.at(key).get<double>();
}

std::optional<json> read_json(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  std::ostringstream ss;
  ss << in.rdbuf();
  json j = json::parse(ss.str(), nullptr, false);
  if (j.is_discarded() || !j.is_object()) return std::nullopt;
  return j;
}

}  // namespace

NodeProfile node_from_probe(const ProbeResult& p, std::string name, std::string source) {
  NodeProfile n;
  n.name = std::move(name);
  n.mem_available_bytes = p.mem_available_bytes;
  n.mem_read_gbps = p.mem_read_gbps;
  n.machine_read_gbps = p.machine_read_gbps;
  n.batch_rates = p.batch_rates;
  n.int8_gops = p.int8_gops;
  n.f32_gflops = p.f32_gflops;
  n.cores = p.cores;
  n.source = std::move(source);
  validate_node(n);
  return n;
}

NodeProfile node_from_probe_json(std::string_view text, const std::string& where, std::string name) {
  const json j = json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) fail("{}: not a JSON object (expected `tessera probe --json` output)", where);
  ProbeResult p;
  p.mem_read_gbps = field(j, "mem_read_gbps", where);
  p.int8_gops = field(j, "int8_gops", where);
  p.f32_gflops = field(j, "f32_gflops", where);
  const double avail = field(j, "mem_available_bytes", where);
  if (!(avail > 0) || avail > 1.2e18) fail("{}: mem_available_bytes {} is out of range", where, avail);
  p.mem_available_bytes = static_cast<uint64_t>(avail);
  if (j.contains("cores") && j["cores"].is_number_integer()) p.cores = j["cores"].get<int>();
  if (j.contains("machine_read_gbps") && j["machine_read_gbps"].is_number()) {
    p.machine_read_gbps = j["machine_read_gbps"].get<double>();
  }
  try {
    return node_from_probe(p, std::move(name), "probe file " + where);
  } catch (const Error& e) {
    fail("{}: {}", where, e.what());
  }
}

std::filesystem::path default_probe_cache_path() {
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg && *xdg) {
    return std::filesystem::path(xdg) / "tessera" / "probe.json";
  }
  if (const char* home = std::getenv("HOME"); home && *home) {
    return std::filesystem::path(home) / ".cache" / "tessera" / "probe.json";
  }
  return {};
}

namespace {

NodeProfile measure_local_node(const LocalProbeOptions& o) {
  const std::filesystem::path cache = o.cache_path ? *o.cache_path : default_probe_cache_path();
  const std::string host = host_name();
  const int cores = available_cores();
  if (o.use_cache && !cache.empty()) {
    if (const auto j = read_json(cache)) {
      try {
        const double age = unix_now() - field(*j, "time", "cache");
        const bool same =
            j->value("host", "") == host && j->value("cores", -1) == cores && j->value("threads", -1) == o.threads;
        if (same && age >= 0 && age < o.max_age_s) {
          ProbeResult p;
          p.mem_read_gbps = field(*j, "mem_read_gbps", "cache");
          p.machine_read_gbps = field(*j, "machine_read_gbps", "cache");
          if (!j->contains("batch_rates") || !(*j)["batch_rates"].is_array()) fail("cache: no batch_rates");
          for (const json& b : (*j)["batch_rates"]) {
            p.batch_rates.push_back({b.at("tokens").get<int>(), b.at("fraction").get<double>()});
          }
          p.int8_gops = field(*j, "int8_gops", "cache");
          p.f32_gflops = field(*j, "f32_gflops", "cache");
          p.cores = cores;
          p.mem_available_bytes = read_meminfo().available_bytes;
          return node_from_probe(p, "local", fmt::format("probe cache, {:.0f} s old", age));
        }
      } catch (const std::exception&) {
        // A damaged cache (a field missing or of another type) is just re-measured.
      }
    }
  }
  log_info("plan: probing this machine for about {:.1f} s", o.seconds);
  ProbeOptions po;
  po.seconds = o.seconds;
  po.threads = o.threads;
  const ProbeResult p = probe_node(po);
  if (o.use_cache && !cache.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(cache.parent_path(), ec);
    const json j = {{"time", unix_now()},
                    {"host", host},
                    {"cores", cores},
                    {"threads", o.threads},
                    {"mem_read_gbps", p.mem_read_gbps},
                    {"machine_read_gbps", p.machine_read_gbps},
                    {"batch_rates", batch_rates_json(p.batch_rates)},
                    {"int8_gops", p.int8_gops},
                    {"f32_gflops", p.f32_gflops}};
    std::ofstream out(cache, std::ios::binary | std::ios::trunc);
    if (out) out << j.dump() << "\n";
  }
  return node_from_probe(p);
}

}  // namespace

NodeProfile probe_local_node(const LocalProbeOptions& o) {
  NodeProfile n = measure_local_node(o);
  // Where the head computes, so the planner can tell workers that share its CPUs.
  n.cpus = affinity_cpus();
  if (!n.cpus.empty()) n.machine = machine_id();
  n.threads = o.threads > 0 ? o.threads : std::max(1, available_cores());
  return n;
}

}  // namespace tessera::plan
