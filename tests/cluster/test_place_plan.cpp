// The planner's row for a --place layout ("your --place ..."): `tessera plan --cluster FILE --place` on a
// deterministic cluster.json (each stage's slowest rank and collectives, a stage of one node, the hop between
// stages, adding up to the row's decode rate), and `run`/`bench --check-plan` over real workers with --plan-cluster
// printing that row for the layout that runs.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <regex>

#include "support/test_paths.h"
#include "support/worker_group.h"

namespace tessera {
namespace {

using test::stories;

// Three alike nodes (local, a, b) with slow memory and a network of `rtt_ms`.
std::string cluster(const test::TempDir& dir, const std::string& name, double rtt_ms) {
  const auto path = dir / name;
  std::ofstream out(path);
  out << "{\"head\": \"local\", \"nodes\": [";
  for (const char* n : {"local", "a", "b"}) {
    out << (std::string(n) == "local" ? "" : ", ") << "{\"name\": \"" << n
        << "\", \"memory_gb\": 60, \"bandwidth_gbps\": 0.01, \"cores\": 16}";
  }
  out << "], \"network\": {\"gbit_per_s\": 100, \"rtt_ms\": " << rtt_ms << "}}";
  return path.string();
}

// The decode tok/s of the table row that starts with `name` (the column after prefill).
double row_decode(const std::string& text, const std::string& name) {
  const auto at = text.find(name);
  if (at == std::string::npos) return -1;
  const std::string line = text.substr(at, text.find('\n', at) - at);
  static const std::regex numbers(
      R"(\s([0-9.]+)\s+([0-9.]+)\s+memory|\s([0-9.]+)\s+([0-9.]+)\s+link|\s([0-9.]+)\s+([0-9.]+)\s+compute)");
  std::smatch m;
  if (!std::regex_search(line, m, numbers)) return -1;
  for (int i = 2; i <= 6; i += 2) {
    if (m[i].matched) return std::stod(m[i].str());
  }
  return -1;
}

// The arithmetic's last line for the row: "= ... T ms per token: R tok/s decode" after the row's number.
std::pair<double, double> per_token(const std::string& text, const std::string& block_start) {
  const auto at = text.find(block_start);
  if (at == std::string::npos) return {-1, -1};
  static const std::regex total(R"(([0-9.]+) (ms|us|s) per token: ([0-9.]+) tok/s decode)");
  std::smatch m;
  const std::string rest = text.substr(at);
  if (!std::regex_search(rest, m, total)) return {-1, -1};
  const double scale = m[2] == "ms" ? 1e-3 : m[2] == "us" ? 1e-6 : 1.0;
  return {std::stod(m[1].str()) * scale, std::stod(m[3].str())};
}

test::CommandResult plan(const std::string& cluster_file, const std::string& place) {
  return test::tessera(
      {"plan", "-m", stories().string(), "--cluster", cluster_file, "--place", place, "-p", "16", "-n", "16"});
}

TEST(PlacePlan, ArithmeticOfAPipelineOfGroups) {
  test::TempDir dir;
  const auto fast = cluster(dir, "fast.json", 0.01);
  const auto r = plan(fast, "tp(local,a),b");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string& t = r.out;
  // The row, chosen as the user's layout, with the stages' layers (the even cut by bytes over its two stages).
  EXPECT_NE(t.find("your --place tp(local,a),b"), std::string::npos) << t;
  EXPECT_NE(t.find("Your --place tp(local,a),b run predicts"), std::string::npos) << t;
  // Its arithmetic: the group stage's slowest rank and all-reduces, the stage of one node, the hop between them.
  const auto block = t.find("layers 0-2: local ");
  ASSERT_NE(block, std::string::npos) << t;
  EXPECT_NE(t.find("--tp 2;", block), std::string::npos) << t;
  EXPECT_NE(t.find("slowest rank", block), std::string::npos) << t;
  EXPECT_NE(t.find("all-reduces of", block), std::string::npos) << t;
  EXPECT_NE(t.find("layers 3-4: b ", block), std::string::npos) << t;
  EXPECT_NE(t.find("the stage's layers whole", block), std::string::npos) << t;
  EXPECT_NE(t.find("1 hop of", block), std::string::npos) << t;
  const auto [seconds, tps] = per_token(t, "layers 0-2: local ");
  ASSERT_GT(seconds, 0) << t;
  EXPECT_NEAR(tps, 1.0 / seconds, 0.02 * tps) << t;
  // Slow memory and a fast network: half the first stage's reads on each rank beats one node, and three ranks on
  // every layer beat a group on some of them.
  const double place = row_decode(t, "your --place");
  const double local = row_decode(t, "1  local ");
  const double tp3 = row_decode(t, "tensor parallel x3");
  ASSERT_GT(place, 0) << t;
  EXPECT_NEAR(place, tps, 0.02 * tps) << t;
  EXPECT_GT(place, local) << t;
  EXPECT_LT(place, tp3) << t;

  // A slow network: the first stage's all-reduces cost more than its shares save.
  const auto slow = plan(cluster(dir, "slow.json", 20), "tp(local,a),b");
  ASSERT_EQ(slow.exit_code, 0) << slow.err;
  EXPECT_LT(row_decode(slow.out, "your --place"), row_decode(slow.out, "1  local ")) << slow.out;

  // Uneven shares: local holds 3 parts of the group's rows, so it reads more than a and is the slowest rank.
  const auto uneven = plan(fast, "tp(local:3,a),b");
  ASSERT_EQ(uneven.exit_code, 0) << uneven.err;
  EXPECT_NE(uneven.out.find("your --place tp(local:3,a),b"), std::string::npos) << uneven.out;
  EXPECT_NE(uneven.out.find("slowest rank local"), std::string::npos) << uneven.out;
  EXPECT_LT(row_decode(uneven.out, "your --place"), place) << uneven.out;

  // A wrong --place is named as run names it.
  const auto bad = plan(fast, "tp(local,x)");
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_NE(bad.err.find("'x' is not a node here"), std::string::npos) << bad.err;
}

// run and bench --check-plan over real workers print the row of the layout that runs, from --plan-cluster.
TEST(PlacePlan, RunAndBenchPrintTheRow) {
  test::TempDir dir;
  test::WorkerGroup w(dir, 2, stories().parent_path());
  const auto fast = cluster(dir, "fast.json", 0.01);
  const auto run =
      test::tessera({"run", "-m", stories().string(), "-p", "Once upon a time", "-n", "4", "-t", "1", "--workers",
                     w.list(), "--key-file", w.key, "--place", "tp(local,a),b", "--plan-cluster", fast});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_NE(run.err.find("your --place tp(local,a),b"), std::string::npos) << run.err;
  EXPECT_NE(run.err.find("Running your --place tp(local,a),b as asked."), std::string::npos) << run.err;

  const auto bench = test::tessera({"bench",
                                    "-m",
                                    stories().string(),
                                    "-p",
                                    "0",
                                    "-n",
                                    "8",
                                    "-r",
                                    "1",
                                    "-t",
                                    "1",
                                    "--workers",
                                    w.list(),
                                    "--key-file",
                                    w.key,
                                    "--place",
                                    "tp(local,a),b",
                                    "--plan-cluster",
                                    fast,
                                    "--check-plan"});
  ASSERT_EQ(bench.exit_code, 0) << bench.err;
  const std::string all = bench.out + bench.err;
  const auto at = all.find("measured/predicted");
  ASSERT_NE(at, std::string::npos) << all;
  EXPECT_NE(all.find("your --place tp(local,a),b", at), std::string::npos) << all;
}

}  // namespace
}  // namespace tessera
