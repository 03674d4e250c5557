// Under a memory control group smaller than the weights' copy, `tessera run` keeps the weights mapped and runs
// (it was killed by the OOM killer, exit 137, without a word); when not even the KV cache fits, a clear error.
// The test makes a cgroup (v1 memory controller or v2) when the machine lets it, and skips otherwise.
#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>

#include "support/test_paths.h"

namespace tessera {
namespace {

// A memory cgroup with the given limit, removed at the end; empty path when this machine does not allow one.
class MemoryGroup {
 public:
  explicit MemoryGroup(uint64_t limit) {
    const std::string name = "tessera-test-" + std::to_string(::getpid());
    const std::filesystem::path v1 = "/sys/fs/cgroup/memory";
    const std::filesystem::path v2 = "/sys/fs/cgroup";
    std::error_code ec;
    if (std::filesystem::exists(v1 / "memory.limit_in_bytes")) {
      dir_ = v1 / name;
      limit_file_ = "memory.limit_in_bytes";
    } else if (std::filesystem::exists(v2 / "cgroup.subtree_control")) {
      dir_ = v2 / name;
      limit_file_ = "memory.max";
    } else {
      return;
    }
    if (!std::filesystem::create_directory(dir_, ec) || ec) {
      dir_.clear();
      return;
    }
    std::ofstream(dir_ / limit_file_) << limit;
    std::ifstream in(dir_ / limit_file_);
    uint64_t got = 0;
    if (!(in >> got) || got > limit) dir_.clear();
  }
  ~MemoryGroup() {
    if (!dir_.empty()) ::rmdir(dir_.c_str());
  }
  const std::filesystem::path& dir() const { return dir_; }
  // argv run inside the group (a shell moves itself in, then execs it).
  std::vector<std::string> inside(const std::vector<std::string>& argv) const {
    std::string cmd = "echo $$ > '" + (dir_ / "cgroup.procs").string() + "' && exec";
    for (const auto& a : argv) cmd += " '" + a + "'";
    return {"/bin/sh", "-c", cmd};
  }

 private:
  std::filesystem::path dir_;
  std::string limit_file_;
};

TEST(CliMemory, WeightsLargerThanTheCgroupStayMappedAndRun) {
  if (::geteuid() != 0) GTEST_SKIP() << "making a memory cgroup needs root";
  const uint64_t limit = 200ull << 20;
  MemoryGroup group(limit);
  if (group.dir().empty()) GTEST_SKIP() << "this machine does not allow a memory cgroup here";
  test::TempDir dir;
  const std::string model = (dir / "big.gguf").string();
  // 6 layers of 1024 in f32: about 330 MB of weights, well over the 200 MiB limit.
  const auto gen =
      test::run_command({test::tessera_bin().string(), "gen-model", "-o", model, "--n-embd", "1024", "--n-layer", "6",
                         "--n-head", "8", "--n-head-kv", "8", "--n-ff", "2816", "--n-vocab", "2048", "-t", "2"});
  ASSERT_EQ(gen.exit_code, 0) << gen.err;
  ASSERT_GT(std::filesystem::file_size(model), limit + (100ull << 20));
  const std::vector<std::string> run = {test::tessera_bin().string(),
                                        "run",
                                        "-m",
                                        model,
                                        "-p",
                                        "hello",
                                        "-n",
                                        "4",
                                        "--temp",
                                        "0",
                                        "-t",
                                        "1",
                                        "-c",
                                        "256"};
  const auto r = test::run_command(group.inside(run));
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("does not fit in the"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("control group's limit is 200"), std::string::npos) << r.err;
  // The same tokens as outside the group (with the weights copied there).
  const auto free_run = test::run_command(run);
  ASSERT_EQ(free_run.exit_code, 0) << free_run.err;
  EXPECT_EQ(r.out, free_run.out);

  // Not even the KV cache fits: an error that says so and what to change.
  auto too_long = run;
  too_long.back() = "1000000";
  const auto e = test::run_command(group.inside(too_long));
  EXPECT_EQ(e.exit_code, 1) << e.err;
  EXPECT_NE(e.err.find("KV cache"), std::string::npos) << e.err;
  EXPECT_NE(e.err.find("--ctx-size"), std::string::npos) << e.err;
}

}  // namespace
}  // namespace tessera
