// The memory this process may use: the smaller of the kernel's MemAvailable and what its control group (v2, or v1's
// memory controller) has left under its limit. A container's limit is invisible to /proc/meminfo, and a load that
// trusts MemAvailable there ends in the OOM killer instead of an error.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string_view>

namespace tessera {

struct CgroupMemory {
  uint64_t limit_bytes = 0;        // the tightest limit of the group and its ancestors
  uint64_t usage_bytes = 0;        // the group's current charge
  uint64_t reclaimable_bytes = 0;  // of that, inactive file pages (reclaimed before the OOM killer comes)
  std::filesystem::path group;     // the directory that holds the tightest limit
  // What the group may still take: the limit less what it holds and cannot give back.
  uint64_t headroom() const {
    const uint64_t held = usage_bytes - reclaimable_bytes;
    return held >= limit_bytes ? 0 : limit_bytes - held;
  }
};

// The memory limit of the process whose /proc/<pid>/cgroup reads `proc_cgroup`, with the cgroup file systems
// mounted under `root` (v2 at root itself, v1's memory controller at root/memory). nullopt without any limit.
std::optional<CgroupMemory> cgroup_memory(std::string_view proc_cgroup, const std::filesystem::path& root);

// This process's: /proc/self/cgroup under /sys/fs/cgroup.
std::optional<CgroupMemory> own_cgroup_memory();

}  // namespace tessera
