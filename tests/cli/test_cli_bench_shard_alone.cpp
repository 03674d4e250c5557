// `tessera bench --tp/--ep N --shard-alone [R]` as a user runs it: each rank's share timed alone, one JSON row per
// rank and test, its weights (the shares cover the model once plus what every rank holds whole), the planner's
// prediction of the shard, and the collectives per token that mpirun's group counts too; the other commands refuse
// it (their logits would not be the model's). No timing is asserted.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "support/mpi_environment.h"
#include "support/test_paths.h"

namespace tessera {
namespace {

using nlohmann::json;

const auto* const kEnv = ::testing::AddGlobalTestEnvironment(new test::MpiTestEnvironment);

std::string fixture(const std::string& name) {
  return (test::shared_dir() / "fixtures/models" / (name + ".gguf")).string();
}

using test::tessera;

const std::vector<std::string> kQuick = {"-p",   "0",  "-n",  "4", "-r", "1", "-t", "1", "--probe-seconds",
                                         "0.05", "-o", "json"};

json shard_alone(const std::string& model, std::vector<std::string> layout) {
  std::vector<std::string> args = {"bench", "-m", fixture(model)};
  args.insert(args.end(), kQuick.begin(), kQuick.end());
  args.insert(args.end(), layout.begin(), layout.end());
  const auto r = tessera(args);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("only the timings and counts are meaningful"), std::string::npos) << r.err;
  return json::parse(r.out);
}

TEST(CliBenchShardAlone, EveryRankInTurnWithItsShareThePredictionAndTheCollectives) {
  const json j = shard_alone("llama-f32", {"--tp", "3", "--shard-alone"});
  ASSERT_EQ(j.size(), 3u);
  std::vector<uint64_t> held;
  for (size_t r = 0; r < 3; ++r) {
    const json& s = j[r]["shard_alone"];
    EXPECT_EQ(s["rank"], r);
    EXPECT_EQ(s["ranks"], 3);
    EXPECT_EQ(s["layout"], "--tp 3");
    held.push_back(s["weight_bytes"].get<uint64_t>());
    EXPECT_GT(s["read_bytes_per_token"].get<double>(), 0.0);
    EXPECT_GT(s["predicted_shard_s"].get<double>(), 0.0);
    EXPECT_GT(s["read_gbps"].get<double>(), 0.0);
    // 2 layers x 2 all-reduces, the step's broadcast and the greedy pick's all-gather, every token.
    EXPECT_DOUBLE_EQ(j[r]["collectives_per_token"].get<double>(), 6.0);
    EXPECT_GT(j[r]["collective_bytes_per_token"].get<double>(), 0.0);
  }
  // 4 query heads over 3 ranks: 1/2/1.
  EXPECT_GT(held[1], held[0]);
  EXPECT_EQ(held[0], held[2]);

  const json one = shard_alone("llama-f32", {"--tp", "3", "--shard-alone", "1"});
  ASSERT_EQ(one.size(), 1u);
  EXPECT_EQ(one[0]["shard_alone"]["rank"], 1);
  EXPECT_EQ(one[0]["shard_alone"]["weight_bytes"].get<uint64_t>(), held[1]);
}

TEST(CliBenchShardAlone, ExpertParallelShares) {
  const json j = shard_alone("qwen3moe-q4_k_m", {"--tp", "3", "--ep", "3", "--shard-alone"});
  ASSERT_EQ(j.size(), 3u);
  EXPECT_EQ(j[0]["shard_alone"]["layout"], "--tp 3 --ep 3");
  for (const json& row : j) EXPECT_GT(row["shard_alone"]["weight_bytes"].get<uint64_t>(), 0u);
}

// The counts a rank makes alone are those of the same rank in mpirun's group.
TEST(CliBenchShardAlone, CountsTheCollectivesOfAnMpirunGroup) {
  const std::string mpirun = test::on_path("mpirun");
  std::vector<std::string> args = {
      mpirun, "--oversubscribe", "-np", "3", test::tessera_bin().string(), "bench", "-m", fixture("llama-f32"), "--tp",
      "3",    "--no-plan"};
  args.insert(args.end(), kQuick.begin(), kQuick.end());
  const auto r = test::run_command(args);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json group = json::parse(r.out);
  ASSERT_EQ(group.size(), 1u);
  const json alone = shard_alone("llama-f32", {"--tp", "3", "--shard-alone", "0"});
  EXPECT_EQ(alone[0]["collectives_per_token"], group[0]["collectives_per_token"]);
  EXPECT_EQ(alone[0]["collective_bytes_per_token"], group[0]["collective_bytes_per_token"]);
}

TEST(CliBenchShardAlone, OtherCommandsAndBadLayoutsRefuseIt) {
  const std::string model = fixture("llama-f32");
  for (const auto& args : std::vector<std::vector<std::string>>{
           {"run", "-m", model, "-p", "Once", "-n", "2", "--tp", "3", "--shard-alone"},
           {"perplexity", "-m", model, "-f", model, "--tp", "3", "--shard-alone", "1"},
           {"serve", "-m", model, "--tp", "3", "--shard-alone", "--host", "127.0.0.1", "--port", "1"}}) {
    const auto r = tessera(args);
    EXPECT_NE(r.exit_code, 0) << args[0];
    EXPECT_NE(r.err.find("--shard-alone is bench's"), std::string::npos) << args[0] << ": " << r.err;
    EXPECT_NE(r.err.find("not the model's"), std::string::npos) << r.err;
  }
  std::vector<std::string> base = {"bench", "-m", model};
  base.insert(base.end(), kQuick.begin(), kQuick.end());
  const auto expect_error = [&](std::vector<std::string> extra, const std::string& text) {
    std::vector<std::string> args = base;
    args.insert(args.end(), extra.begin(), extra.end());
    const auto r = tessera(args);
    EXPECT_NE(r.exit_code, 0) << text;
    EXPECT_NE(r.err.find(text), std::string::npos) << r.err;
  };
  expect_error({"--shard-alone"}, "give --tp N or --ep N");
  expect_error({"--tp", "3", "--shard-alone", "3"}, "the group has ranks 0 to 2");
  expect_error({"--tp", "3", "--shard-alone", "x"}, "give a rank");
  expect_error({"--ep", "3", "--shard-alone"}, "has no experts");
}

}  // namespace
}  // namespace tessera
