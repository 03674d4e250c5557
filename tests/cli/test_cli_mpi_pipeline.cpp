// Pipelines of rank groups under mpirun (--tp N --pp P, --pp P) are predicted at start like --tp alone: the ranks
// probe together, a message between stages is timed at a few sizes, and the plan's row "your --tp 2 --pp 2" adds
// each stage's slowest shard, its collectives and the activations' hop; bench --check-plan puts that prediction
// beside the measured tokens/s and splits a generated token into rank 0's shard, its collectives and its wait for
// the stage before. mpirun oversubscribes this 2-core machine.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <regex>

#include "support/mpi_environment.h"
#include "support/test_paths.h"

namespace tessera {
namespace {

const auto* const kEnv = ::testing::AddGlobalTestEnvironment(new test::MpiTestEnvironment);

std::string fixture(const std::string& name) {
  return (test::shared_dir() / "fixtures/models" / (name + ".gguf")).string();
}

std::vector<std::string> mpirun(int n, std::vector<std::string> args) {
  std::vector<std::string> argv = {test::on_path("mpirun"), "--oversubscribe", "-np", std::to_string(n),
                                   test::tessera_bin().string()};
  argv.insert(argv.end(), args.begin(), args.end());
  return argv;
}

TEST(MpiPipeline, RunPrintsThePredictionOfItsStagesAndHops) {
  const auto run = test::run_command(mpirun(4, {"run", "-m", fixture("llama-f32"), "-p", "Once upon a time", "-n", "8",
                                                "-t", "1", "--tp", "2", "--pp", "2"}));
  ASSERT_EQ(run.exit_code, 0) << run.err;
  for (const char* want :
       {"between stages: one message of 4 B ", "1.0 MiB", "layers by bytes: every stage runs on the same machines",
        "rank3: ", "your --tp 2 --pp 2", "layers 0-", ": rank2 ", "slowest rank", " all-reduces of ",
        "activations between stages x (", "point-to-point measured at start", "tok/s decode",
        "Running your --tp 2 --pp 2 as asked."}) {
    EXPECT_NE(run.err.find(want), std::string::npos) << want << "\n" << run.err;
  }
  // The collectives are shown once, from world rank 0's stage.
  const auto first = run.err.find("collectives: all-reduce 4 B ");
  ASSERT_NE(first, std::string::npos) << run.err;
  EXPECT_EQ(run.err.find("collectives: all-reduce 4 B ", first + 1), std::string::npos) << run.err;

  // A pipeline of single ranks: its own row, without collectives.
  const auto pp = test::run_command(
      mpirun(2, {"run", "-m", fixture("llama-f32"), "-p", "Once upon a time", "-n", "4", "-t", "1", "--pp", "2"}));
  ASSERT_EQ(pp.exit_code, 0) << pp.err;
  EXPECT_NE(pp.err.find("between stages: one message of 4 B "), std::string::npos) << pp.err;
  EXPECT_NE(pp.err.find("Running your --pp 2 as asked."), std::string::npos) << pp.err;
  EXPECT_EQ(pp.err.find("collectives: all-reduce"), std::string::npos) << pp.err;
}

TEST(MpiPipeline, BenchCheckPlanPutsThePredictionBesideTheMeasured) {
  const auto bench = test::run_command(mpirun(4, {"bench", "-m", fixture("llama-f32"), "-p", "16", "-n", "4", "-t", "1",
                                                  "-r", "1", "--tp", "2", "--pp", "2", "--check-plan", "-o", "json"}));
  ASSERT_EQ(bench.exit_code, 0) << bench.err;
  // Standard output: each result as JSON, measured and predicted; standard error: the check.
  const auto results = nlohmann::json::parse(bench.out);
  ASSERT_EQ(results.size(), 2u) << bench.out;
  for (const auto& r : results) {
    EXPECT_GT(r["avg_ts"].get<double>(), 0) << r.dump();
    ASSERT_TRUE(r["predicted_ts"].is_number()) << r.dump();
    EXPECT_GT(r["predicted_ts"].get<double>(), 0) << r.dump();
    // Rank 0 leads the last stage: it waits for the first one's activations.
    ASSERT_TRUE(r["pipeline_wait_seconds_per_token"].is_number()) << r.dump();
    EXPECT_GT(r["pipeline_wait_seconds_per_token"].get<double>(), 0) << r.dump();
  }
  EXPECT_NE(bench.err.find("Planner check (predicted against measured):"), std::string::npos) << bench.err;
  const std::regex row(R"(your --tp 2 --pp 2 +1 +(pp16|tg4) +([0-9.]+) +([0-9.]+) +([0-9.]+))");
  int rows = 0;
  for (auto it = std::sregex_iterator(bench.err.begin(), bench.err.end(), row); it != std::sregex_iterator(); ++it) {
    EXPECT_GT(std::stod((*it)[2].str()), 0) << it->str();
    EXPECT_GT(std::stod((*it)[3].str()), 0) << it->str();
    ++rows;
  }
  EXPECT_EQ(rows, 2) << bench.err;
  const std::regex split(
      R"(your --tp 2 --pp 2 tg4: measured [0-9.]+ ms per token = [0-9.-]+ ms in rank 0's shard \+ [0-9.]+ ms in )"
      R"(collectives \+ [0-9.]+ ms waiting for the stage before; predicted [0-9.]+ ms = [0-9.]+ ms the last stage's )"
      R"(slowest shard \+ [0-9.]+ ms its collectives \+ [0-9.-]+ ms the stages before and the hops)");
  EXPECT_TRUE(std::regex_search(bench.err, split)) << bench.err;
}

}  // namespace
}  // namespace tessera
