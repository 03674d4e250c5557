// Control-group memory limits read from fake v1 and v2 trees: the tightest limit over the group's ancestors, "max"
// and v1's huge "no limit" ignored, the headroom net of reclaimable file pages.
#include <gtest/gtest.h>

#include <fstream>

#include "hw/memory_limit.h"
#include "support/test_paths.h"

namespace tessera {
namespace {

void put(const std::filesystem::path& p, const std::string& text) {
  std::filesystem::create_directories(p.parent_path());
  std::ofstream(p) << text;
}

TEST(MemoryLimit, V2TightestAncestorAndHeadroom) {
  test::TempDir root;
  put(root / "memory.max", "max\n");
  put(root / "a/memory.max", "1000000\n");
  put(root / "a/b/memory.max", "max\n");
  put(root / "a/b/memory.current", "300000\n");
  put(root / "a/b/memory.stat", "anon 200000\nfile 100000\ninactive_file 50000\n");
  const auto m = cgroup_memory("0::/a/b\n", root.path());
  ASSERT_TRUE(m);
  EXPECT_EQ(m->limit_bytes, 1000000u);
  EXPECT_EQ(m->group, root / "a");
  EXPECT_EQ(m->usage_bytes, 300000u);
  EXPECT_EQ(m->reclaimable_bytes, 50000u);
  EXPECT_EQ(m->headroom(), 1000000u - 250000u);
}

TEST(MemoryLimit, V1MemoryControllerWinsAndNoLimitIsNone) {
  test::TempDir root;
  put(root / "memory/memory.limit_in_bytes", "9223372036854771712\n");
  put(root / "memory/box/memory.limit_in_bytes", "524288000\n");
  put(root / "memory/box/memory.usage_in_bytes", "600000000\n");
  put(root / "memory/box/memory.stat", "cache 1\ntotal_inactive_file 10\n");
  const std::string cgroup = "9:name=systemd:/\n4:cpu,memory:/box\n0::/\n";
  const auto m = cgroup_memory(cgroup, root.path());
  ASSERT_TRUE(m);
  EXPECT_EQ(m->limit_bytes, 524288000u);
  EXPECT_EQ(m->headroom(), 0u);  // more charged than the limit: nothing left
  // The same tree without a limit below the root: none.
  put(root / "memory/box/memory.limit_in_bytes", "9223372036854771712\n");
  EXPECT_FALSE(cgroup_memory(cgroup, root.path()));
  // No memory controller and no v2 files: none; garbage lines are skipped.
  EXPECT_FALSE(cgroup_memory("garbage\n1:cpu:/x\n", root.path()));
}

}  // namespace
}  // namespace tessera
