// Control-group memory limits (memory_limit.h): v2's memory.max/memory.current and v1's memory.limit_in_bytes/
// memory.usage_in_bytes, the tightest over the group and its ancestors.
#include "hw/memory_limit.h"

#include <algorithm>
#include <charconv>
#include <fstream>
#include <sstream>
#include <string>

namespace tessera {
namespace {

// A file's first number; nullopt when it is missing, "max" or not a number.
std::optional<uint64_t> read_number(const std::filesystem::path& p) {
  std::ifstream in(p);
  std::string text;
  if (!(in >> text)) return std::nullopt;
  uint64_t v = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return v;
}

// A key's value in a memory.stat file; 0 when absent.
uint64_t stat_value(const std::filesystem::path& p, std::string_view key) {
  std::ifstream in(p);
  std::string k;
  uint64_t v = 0;
  while (in >> k >> v) {
    if (k == key) return v;
  }
  return 0;
}

// The tightest limit from `base` down to `group` (the deepest of equal limits names it), with the group's own usage
// and the part of it the kernel reclaims before it kills (inactive file pages).
std::optional<CgroupMemory> walk(const std::filesystem::path& base, const std::string& group, const char* limit_file,
                                 const char* usage_file, std::string_view inactive_key) {
  std::optional<CgroupMemory> best;
  auto consider = [&](const std::filesystem::path& d) {
    const auto limit = read_number(d / limit_file);
    // v1 writes "no limit" as a huge page-aligned number (LONG_MAX rounded down).
    if (!limit || *limit >= (uint64_t{1} << 60)) return;
    if (!best || *limit <= best->limit_bytes) best = CgroupMemory{*limit, 0, 0, d};
  };
  std::filesystem::path at = base;
  consider(at);
  for (const auto& part : std::filesystem::path(group).relative_path()) {
    at /= part;
    consider(at);
  }
  if (best) {
    best->usage_bytes = read_number(at / usage_file).value_or(0);
    best->reclaimable_bytes = std::min(best->usage_bytes, stat_value(at / "memory.stat", inactive_key));
  }
  return best;
}

}  // namespace

std::optional<CgroupMemory> cgroup_memory(std::string_view proc_cgroup, const std::filesystem::path& root) {
  std::istringstream in{std::string(proc_cgroup)};
  std::string line;
  std::optional<std::string> v2_group, v1_group;
  while (std::getline(in, line)) {
    // hierarchy-id:controllers:path
    const auto a = line.find(':');
    const auto b = a == std::string::npos ? std::string::npos : line.find(':', a + 1);
    if (b == std::string::npos) continue;
    const std::string controllers = line.substr(a + 1, b - a - 1);
    const std::string path = line.substr(b + 1);
    if (line.substr(0, a) == "0" && controllers.empty()) v2_group = path;
    std::istringstream list(controllers);
    std::string c;
    while (std::getline(list, c, ',')) {
      if (c == "memory") v1_group = path;
    }
  }
  if (v1_group) {
    if (auto m =
            walk(root / "memory", *v1_group, "memory.limit_in_bytes", "memory.usage_in_bytes", "total_inactive_file")) {
      return m;
    }
  }
  if (v2_group) return walk(root, *v2_group, "memory.max", "memory.current", "inactive_file");
  return std::nullopt;
}

std::optional<CgroupMemory> own_cgroup_memory() {
  std::ifstream in("/proc/self/cgroup");
  std::stringstream text;
  text << in.rdbuf();
  return cgroup_memory(text.str(), "/sys/fs/cgroup");
}

}  // namespace tessera
