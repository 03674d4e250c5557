// `run --workers` without a layout follows the planner's choice, over real `tessera worker` processes on loopback
// with the plan's nodes and links given by --plan-cluster (so the choice does not depend on what this machine
// measures): a tensor-parallel group when the plan picks one (the same text as one node), the planner's pipeline (one
// worker alone), or the even pipeline with the sentence that one machine would be faster; --split, --tp and
// --no-plan keep the layout the user gave.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>

#include "support/test_paths.h"
#include "support/worker_group.h"
#include "support/worker_process.h"

namespace tessera {
namespace {

using test::stories;

using test::tessera;

// Three nodes named as the run names them: each node's memory bandwidth (GB/s), b's memory and the network.
std::string cluster(const test::TempDir& dir, const std::string& name, double local_gbps, double a_gbps, double gbit,
                    double rtt_ms, double b_memory_gb = 60) {
  const auto path = dir / name;
  std::ofstream out(path);
  out << "{\"head\": \"local\", \"nodes\": [{\"name\": \"local\", \"memory_gb\": 60, \"bandwidth_gbps\": " << local_gbps
      << ", \"cores\": 16}, {\"name\": \"a\", \"memory_gb\": 60, \"bandwidth_gbps\": " << a_gbps
      << ", \"cores\": 16}, {\"name\": \"b\", \"memory_gb\": " << b_memory_gb << ", \"bandwidth_gbps\": " << local_gbps
      << ", \"cores\": 16}], \"network\": {\"gbit_per_s\": " << gbit << ", \"rtt_ms\": " << rtt_ms << "}}";
  return path.string();
}

// Workers a and b, mapping stories260K.
struct Workers : test::WorkerGroup {
  explicit Workers(const test::TempDir& dir) : test::WorkerGroup(dir, 2, stories().parent_path()) {}
};

const std::vector<std::string> kRun = {
    "run", "-m", stories().string(), "-p", "Once upon a time", "-n", "16", "--temp", "0", "-t", "1",
    "-c",  "64", "--wire-type",      "f32"};

test::CommandResult run(std::vector<std::string> extra) {
  auto args = kRun;
  args.insert(args.end(), extra.begin(), extra.end());
  return tessera(args);
}

// Slow memory everywhere and a fast network: every rank reading a third of the weights wins, and the group runs.
TEST(PlanChoice, GroupWhenThePlanPicksIt) {
  test::TempDir dir;
  Workers w(dir);
  const auto fast = cluster(dir, "fast.json", 0.01, 0.01, 100, 0.01);
  const auto one = run({});
  ASSERT_EQ(one.exit_code, 0) << one.err;
  const auto r = run({"--workers", w.list(), "--key-file", w.key, "--plan-cluster", fast});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("plan: running the planner's choice, tensor parallel x3 (as --tp 3 --workers a="),
            std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("tok/s decode"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("3 ranks (tensor parallel)"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("pipeline: "), std::string::npos) << r.err;
  EXPECT_EQ(r.out, one.out);

  // bench follows it too.
  const auto bench = tessera({"bench", "-m", stories().string(), "-p", "8", "-n", "4", "-r", "1", "-t", "1",
                              "--no-probe", "--workers", w.list(), "--key-file", w.key, "--plan-cluster", fast});
  ASSERT_EQ(bench.exit_code, 0) << bench.err;
  EXPECT_NE(bench.err.find("plan: running the planner's choice, tensor parallel x3"), std::string::npos) << bench.err;
  EXPECT_NE(bench.err.find("3 ranks (tensor parallel)"), std::string::npos) << bench.err;

  // The user's layout wins over the plan: --split runs that pipeline, --tp 2 that group, --no-plan the even
  // pipeline.
  const auto split = run({"--workers", w.list(), "--key-file", w.key, "--plan-cluster", fast, "--split", "0-4@b"});
  ASSERT_EQ(split.exit_code, 0) << split.err;
  EXPECT_NE(split.err.find("pipeline: 0-4@b"), std::string::npos) << split.err;
  EXPECT_EQ(split.err.find("plan: running the planner's choice"), std::string::npos) << split.err;
  const auto tp2 = run({"--workers", "a=" + w.workers[0]->address(), "--key-file", w.key, "--tp", "2", "--no-plan"});
  ASSERT_EQ(tp2.exit_code, 0) << tp2.err;
  EXPECT_NE(tp2.err.find("2 ranks (tensor parallel)"), std::string::npos) << tp2.err;
  const auto none = run({"--workers", w.list(), "--key-file", w.key, "--plan-cluster", fast, "--no-plan"});
  ASSERT_EQ(none.exit_code, 0) << none.err;
  EXPECT_NE(none.err.find("pipeline: 0-2@a,3-4@b"), std::string::npos) << none.err;
  EXPECT_EQ(none.out, one.out);
}

// A worker far faster than the head wins alone; while the even split fits too it runs, as before. Where b has no room
// for its half the planner's choice runs: a alone, as a one-stage pipeline. On a slow network one machine wins: the
// even pipeline runs as before, saying so.
TEST(PlanChoice, PipelineOrTheEvenSplitOtherwise) {
  test::TempDir dir;
  Workers w(dir);
  const auto one = run({});
  ASSERT_EQ(one.exit_code, 0) << one.err;
  const auto even = run(
      {"--workers", w.list(), "--key-file", w.key, "--plan-cluster", cluster(dir, "fits.json", 0.01, 1, 10, 0.1, 60)});
  ASSERT_EQ(even.exit_code, 0) << even.err;
  EXPECT_EQ(even.err.find("plan: running the planner's choice"), std::string::npos) << even.err;
  EXPECT_NE(even.err.find("pipeline: 0-2@a,3-4@b"), std::string::npos) << even.err;
  const auto r = run({"--workers", w.list(), "--key-file", w.key, "--plan-cluster",
                      cluster(dir, "small_b.json", 0.01, 1, 10, 0.1, 0.001)});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("plan: running the planner's choice, on a (as --split 0-4@a)"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("pipeline: 0-4@a"), std::string::npos) << r.err;
  EXPECT_EQ(r.out, one.out);
  const auto slow =
      run({"--workers", w.list(), "--key-file", w.key, "--plan-cluster", cluster(dir, "slow.json", 10, 10, 1, 10, 60)});
  ASSERT_EQ(slow.exit_code, 0) << slow.err;
  EXPECT_NE(slow.err.find("One machine would be faster"), std::string::npos) << slow.err;
  EXPECT_EQ(slow.err.find("plan: running the planner's choice"), std::string::npos) << slow.err;
  EXPECT_NE(slow.err.find("pipeline: 0-2@a,3-4@b"), std::string::npos) << slow.err;
  EXPECT_EQ(slow.out, one.out);
}

TEST(PlanChoice, PlanClusterMustNameTheWorkers) {
  test::TempDir dir;
  Workers w(dir);
  const auto r = run({"--workers", "a=" + w.workers[0]->address() + ",zz=" + w.workers[1]->address(), "--key-file",
                      w.key, "--plan-cluster", cluster(dir, "c.json", 10, 10, 10, 0.1)});
  // The plan cannot be made: the run goes on as without one (the even pipeline), saying why.
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("plan: not available: "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("no node named 'zz' for worker zz"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("pipeline: 0-2@a,3-4@zz"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace tessera
