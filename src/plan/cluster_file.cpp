// cluster.json parsing: every field checked for type and range, errors naming the file, the node and the key.
#include "plan/cluster_file.h"

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "util/error.h"

namespace tessera::plan {
namespace {

using nlohmann::json;

constexpr uint64_t kMaxFileBytes = 1 << 20;
constexpr size_t kMaxNodes = 64;
constexpr size_t kMaxLinks = 4096;

void check_keys(const json& obj, std::initializer_list<std::string_view> valid, const std::string& where) {
  for (const auto& [key, value] : obj.items()) {
    bool known = false;
    for (auto v : valid) known = known || key == v;
    if (!known) {
      std::string list;
      for (auto v : valid) list.append(list.empty() ? "" : ", ").append(std::string(v));
      fail("{}: unknown key '{}' (valid: {})", where, key, list);
    }
  }
}

double number(const json& obj, const char* key, const std::string& where) {
  const json& v = obj.at(key);
  if (!v.is_number()) fail("{}: '{}' must be a number, not {}", where, key, v.type_name());
  const double d = v.get<double>();
  if (!std::isfinite(d)) fail("{}: '{}' must be finite", where, key);
  return d;
}

std::string string_field(const json& obj, const char* key, const std::string& where) {
  const json& v = obj.at(key);
  if (!v.is_string()) fail("{}: '{}' must be a string, not {}", where, key, v.type_name());
  return v.get<std::string>();
}

// Memory as "memory_gib" (2^30) or "memory_gb" (1e9): exactly one.
uint64_t memory_bytes(const json& n, const std::string& where) {
  const bool gib = n.contains("memory_gib"), gb = n.contains("memory_gb");
  if (gib == gb) fail("{}: give the node's available memory as exactly one of 'memory_gib' or 'memory_gb'", where);
  const double v = gib ? number(n, "memory_gib", where) : number(n, "memory_gb", where);
  const double bytes = v * (gib ? 1073741824.0 : 1e9);
  if (!(v > 0) || bytes > 1125899906842624.0) fail("{}: memory {} must be above 0 and at most 1 PiB", where, v);
  return static_cast<uint64_t>(bytes);
}

NodeProfile parse_node(const json& n, size_t index, const std::string& file, const PlanConstants& k) {
  std::string where = fmt::format("{}: nodes[{}]", file, index);
  if (!n.is_object()) fail("{}: must be an object", where);
  if (!n.contains("name")) fail("{}: 'name' is missing", where);
  NodeProfile node;
  node.name = string_field(n, "name", where);
  validate_node_name(node.name, where);
  where = fmt::format("{}: node '{}'", file, node.name);
  check_keys(n,
             {"name", "memory_gib", "memory_gb", "bandwidth_gbps", "cores", "int8_gops", "f32_gflops", "matmul_gflops",
              "note"},
             where);
  node.mem_available_bytes = memory_bytes(n, where);
  if (!n.contains("bandwidth_gbps")) fail("{}: 'bandwidth_gbps' (memory read bandwidth, GB/s) is missing", where);
  node.mem_read_gbps = number(n, "bandwidth_gbps", where);
  if (n.contains("cores")) {
    const double cores = number(n, "cores", where);
    if (cores < 1 || cores > 1 << 20 || cores != std::floor(cores)) {
      fail("{}: 'cores' = {} must be a whole number from 1", where, cores);
    }
    node.cores = static_cast<int>(cores);
    node.int8_gops = cores * k.int8_gops_per_core;
    node.f32_gflops = cores * k.f32_gflops_per_core;
  }
  if (n.contains("int8_gops")) node.int8_gops = number(n, "int8_gops", where);
  if (n.contains("f32_gflops")) node.f32_gflops = number(n, "f32_gflops", where);
  if (node.int8_gops == 0 || node.f32_gflops == 0) {
    fail("{}: give 'cores' or both 'int8_gops' and 'f32_gflops' (peak rates as `tessera probe` reports them)", where);
  }
  if (n.contains("matmul_gflops")) {
    const json& m = n.at("matmul_gflops");
    if (!m.is_object()) fail("{}: 'matmul_gflops' must be an object of weight type -> GFLOPS", where);
    for (const auto& [type, rate] : m.items()) {
      if (!rate.is_number()) fail("{}: matmul_gflops['{}'] must be a number", where, type);
      node.matmul_gflops[type] = rate.get<double>();
    }
  }
  if (n.contains("note") && !n.at("note").is_string()) fail("{}: 'note' must be a string", where);
  node.source = "cluster file";
  validate_node(node);
  return node;
}

LinkProfile parse_link(const json& l, const std::string& where) {
  if (!l.is_object()) fail("{}: must be an object", where);
  LinkProfile link;
  if (!l.contains("gbit_per_s")) fail("{}: 'gbit_per_s' is missing", where);
  if (!l.contains("rtt_ms")) fail("{}: 'rtt_ms' is missing", where);
  link.gbit_per_s = number(l, "gbit_per_s", where);
  link.rtt_s = number(l, "rtt_ms", where) / 1000.0;
  link.source = "cluster file";
  return link;
}

}  // namespace

Cluster parse_cluster_json(std::string_view text, const std::string& file, const PlanConstants& k) {
  if (text.size() > kMaxFileBytes) fail("{}: {} bytes is too large for a cluster file", file, text.size());
  json root;
  try {
    root = json::parse(text);
  } catch (const json::exception& e) {
    // Syntax errors, and numbers too large for a double (out_of_range).
    fail("{}: not valid JSON: {}", file, e.what());
  }
  try {
    if (!root.is_object()) fail("{}: the top level must be an object with \"nodes\"", file);
    check_keys(root, {"head", "nodes", "network", "links", "note"}, file);
    if (!root.contains("nodes") || !root["nodes"].is_array() || root["nodes"].empty()) {
      fail("{}: \"nodes\" must be a non-empty array", file);
    }
    if (root["nodes"].size() > kMaxNodes) fail("{}: {} nodes; at most {}", file, root["nodes"].size(), kMaxNodes);
    std::vector<NodeProfile> nodes;
    for (size_t i = 0; i < root["nodes"].size(); ++i) nodes.push_back(parse_node(root["nodes"][i], i, file, k));

    std::string head = nodes.front().name;
    if (root.contains("head")) head = string_field(root, "head", file);

    std::optional<LinkProfile> default_link;
    if (root.contains("network")) {
      const std::string where = file + ": network";
      check_keys(root["network"], {"gbit_per_s", "rtt_ms"}, where);
      default_link = parse_link(root["network"], where);
      default_link->a = default_link->b = "*";
    }
    std::vector<LinkProfile> links;
    if (root.contains("links")) {
      const json& ls = root["links"];
      if (!ls.is_array()) fail("{}: \"links\" must be an array", file);
      if (ls.size() > kMaxLinks) fail("{}: {} links; at most {}", file, ls.size(), kMaxLinks);
      for (size_t i = 0; i < ls.size(); ++i) {
        const std::string where = fmt::format("{}: links[{}]", file, i);
        if (!ls[i].is_object()) fail("{}: must be an object", where);
        check_keys(ls[i], {"between", "gbit_per_s", "rtt_ms"}, where);
        const json& between = ls[i].contains("between") ? ls[i]["between"] : json();
        if (!between.is_array() || between.size() != 2 || !between[0].is_string() || !between[1].is_string()) {
          fail("{}: 'between' must be two node names, e.g. [\"a\", \"b\"]", where);
        }
        LinkProfile l = parse_link(ls[i], where);
        l.a = between[0].get<std::string>();
        l.b = between[1].get<std::string>();
        for (const auto& earlier : links) {
          if ((earlier.a == l.a && earlier.b == l.b) || (earlier.a == l.b && earlier.b == l.a)) {
            fail("{}: the link {} <-> {} is listed twice", where, l.a, l.b);
          }
        }
        links.push_back(std::move(l));
      }
    }
    std::optional<Cluster> cluster;
    try {
      cluster.emplace(std::move(nodes), head, std::move(links), std::move(default_link));
    } catch (const Error& e) {
      fail("{}: {}", file, e.what());
    }
    if (!cluster->default_link()) {
      const auto& ns = cluster->nodes();
      for (size_t i = 0; i < ns.size(); ++i) {
        for (size_t j = i + 1; j < ns.size(); ++j) {
          bool listed = false;
          for (const auto& l : cluster->links()) {
            listed = listed || (l.a == ns[i].name && l.b == ns[j].name) || (l.a == ns[j].name && l.b == ns[i].name);
          }
          if (!listed) {
            fail("{}: no link between '{}' and '{}': add \"network\" (the default link) or a \"links\" entry", file,
                 ns[i].name, ns[j].name);
          }
        }
      }
    }
    return std::move(*cluster);
  } catch (const json::exception& e) {
    // Every access above is checked first; this is a last guard so a malformed file is still a user error.
    fail("{}: {}", file, e.what());
  }
}

Cluster load_cluster_file(const std::filesystem::path& path, const PlanConstants& k) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail("{}: cannot open the cluster file", path.string());
  std::ostringstream ss;
  ss << in.rdbuf();
  return parse_cluster_json(ss.str(), path.string(), k);
}

}  // namespace tessera::plan
