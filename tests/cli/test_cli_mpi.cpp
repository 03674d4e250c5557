// `mpirun -np N tessera run|perplexity --tp N` (and --ep, uneven --tp-shares) as a user starts them: the same text
// as one node (greedy, and sampled for a seed), logits (--logits-out, gathered from the ranks' vocabulary shares)
// within 1e-4 for F32 files; a killed or stopped rank ends the run with an error within seconds. mpirun oversubscribes
// this 2-core machine.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <thread>
#include <tuple>

#include "support/background_process.h"
#include "support/mpi_environment.h"
#include "support/test_paths.h"

namespace tessera {
namespace {

using namespace std::chrono_literals;

std::filesystem::path fixture(const std::string& name) {
  return test::shared_dir() / "fixtures/models" / (name + ".gguf");
}

const auto* const kEnv = ::testing::AddGlobalTestEnvironment(new test::MpiTestEnvironment);

std::vector<std::string> mpirun(int n, std::vector<std::string> args) {
  std::vector<std::string> argv = {test::on_path("mpirun"), "--oversubscribe", "-np", std::to_string(n),
                                   test::tessera_bin().string()};
  argv.insert(argv.end(), args.begin(), args.end());
  return argv;
}

struct Case {
  const char* model;
  int ranks;
  const char* mode;    // "--tp" or "--ep"
  const char* shares;  // "" or "2,1,1"
  int pp = 1;          // --pp: stages of `ranks` ranks each
  const char* prompt = "Once upon a time there was";
};

// About 150 tokens: a prompt that a pipeline of stages cuts into micro-batches.
const std::string kLongPrompt = [] {
  std::string s;
  for (int i = 0; i < 12; ++i) s += "Once upon a time there was a little girl who liked the sun. ";
  return s;
}();

class MpiRun : public ::testing::TestWithParam<Case> {};

TEST_P(MpiRun, SameTextAndLogitsAsOneNode) {
  const Case c = GetParam();
  test::TempDir dir;
  const std::vector<std::string> common = {"run",         "-m",     fixture(c.model).string(),
                                           "-p",          c.prompt, "-n",
                                           "12",          "--temp", "0",
                                           "-t",          "1",      "--kv-type",
                                           "f32",         "-c",     "256",
                                           "--exact-gelu"};
  auto one_args = common;
  one_args.insert(one_args.end(), {"--logits-out", (dir / "one.f32").string()});
  std::vector<std::string> one_cmd = {test::tessera_bin().string()};
  one_cmd.insert(one_cmd.end(), one_args.begin(), one_args.end());
  const auto one = test::run_command(one_cmd);
  ASSERT_EQ(one.exit_code, 0) << one.err;

  auto par_args = common;
  par_args.insert(par_args.end(), {"--logits-out", (dir / "par.f32").string(), c.mode, std::to_string(c.ranks)});
  if (*c.shares != '\0') par_args.insert(par_args.end(), {"--tp-shares", c.shares});
  if (c.pp > 1) par_args.insert(par_args.end(), {"--pp", std::to_string(c.pp)});
  const auto par = test::run_command(mpirun(c.ranks * c.pp, par_args));
  ASSERT_EQ(par.exit_code, 0) << par.err;
  EXPECT_EQ(par.out, one.out);
  const std::string table =
      c.pp > 1 ? std::to_string(c.ranks * c.pp) + " ranks, a pipeline of stages" : std::to_string(c.ranks) + " ranks (";
  EXPECT_NE(par.err.find(table), std::string::npos) << par.err;
  const auto a = test::read_floats(dir / "one.f32");
  const auto b = test::read_floats(dir / "par.f32");
  ASSERT_EQ(a.size(), b.size());
  ASSERT_GT(a.size(), 0u);
  float max_diff = 0;
  for (size_t i = 0; i < a.size(); ++i) max_diff = std::max(max_diff, std::fabs(a[i] - b[i]));
  const bool f32 = std::string(c.model).ends_with("f32");
  EXPECT_LE(max_diff, f32 ? 1e-4f : 5e-2f) << c.model;
}

INSTANTIATE_TEST_SUITE_P(Fixtures, MpiRun,
                         ::testing::Values(Case{"llama-f32", 2, "--tp", ""}, Case{"qwen2-q8_0", 3, "--tp", ""},
                                           Case{"qwen3moe-f32", 3, "--tp", "2,1,1"},
                                           Case{"qwen3moe-q4_k_m", 2, "--ep", ""}, Case{"mixtral-f32", 3, "--ep", ""},
                                           Case{"gemma4-f32", 2, "--tp", ""}, Case{"gemma4moe-f32", 2, "--ep", ""},
                                           // Pipelines of rank groups: a stage boundary between a KV-sharing layer
                                           // and its source (gemma4, one rank a stage), tensor parallel stages over
                                           // a prompt long enough for micro-batches, expert parallel stages.
                                           Case{"gemma4-f32", 1, "--tp", "", 2},
                                           Case{"llama-f32", 2, "--tp", "", 2, kLongPrompt.c_str()},
                                           Case{"qwen3moe-f32", 2, "--ep", "", 2}),
                         [](const auto& p) {
                           std::string s = std::string(p.param.model) + "_" + (p.param.mode + 2) +
                                           std::to_string(p.param.ranks) + (*p.param.shares ? "_uneven" : "") +
                                           (p.param.pp > 1 ? "_pp" + std::to_string(p.param.pp) : "");
                           for (auto& ch : s) ch = (ch == '-' || ch == ',') ? '_' : ch;
                           return s;
                         });

// Sampling under --tp picks from each rank's vocabulary range without gathering rows (the top-k chain, and top-p over
// the whole vocabulary): the same text as one node for the same seed.
TEST(MpiRun, SampledTextEqualsOneNodeForASeed) {
  for (const std::vector<std::string>& chain :
       {std::vector<std::string>{"--top-p", "0.9"}, std::vector<std::string>{"--top-k", "0", "--top-p", "0.9"}}) {
    std::vector<std::string> args = {"run", "-m", fixture("llama-f32").string(), "-p", "Once upon a time"};
    args.insert(args.end(),
                {"-n", "24", "-t", "1", "--kv-type", "f32", "--exact-gelu", "--temp", "0.8", "--seed", "7"});
    args.insert(args.end(), chain.begin(), chain.end());
    std::vector<std::string> one_cmd = {test::tessera_bin().string()};
    one_cmd.insert(one_cmd.end(), args.begin(), args.end());
    const auto one = test::run_command(one_cmd);
    ASSERT_EQ(one.exit_code, 0) << one.err;
    args.insert(args.end(), {"--tp", "2"});
    const auto par = test::run_command(mpirun(2, args));
    ASSERT_EQ(par.exit_code, 0) << par.err;
    EXPECT_EQ(par.out, one.out) << chain.back();
    EXPECT_GT(one.out.size(), std::string("Once upon a time").size() + 4) << one.out;
  }
}

TEST(MpiRun, PerplexityEqualsOneNode) {
  test::TempDir dir;
  {
    std::ofstream out(dir / "t.txt");
    for (int i = 0; i < 40; ++i) out << "Once upon a time there was a little girl named Lily. She liked to play. ";
  }
  const std::vector<std::string> args = {"perplexity", "-f", (dir / "t.txt").string(), "-c", "128", "-t", "1"};
  std::vector<std::string> one_cmd = {test::tessera_bin().string()};
  one_cmd.insert(one_cmd.end(), args.begin(), args.end());
  const auto one = test::run_command(one_cmd);
  ASSERT_EQ(one.exit_code, 0) << one.err;
  auto par_args = args;
  par_args.insert(par_args.end(), {"--tp", "2"});
  const auto par = test::run_command(mpirun(2, par_args));
  ASSERT_EQ(par.exit_code, 0) << par.err;
  // "Final estimate: PPL = 3.5974 +/- 0.39887": the sums of 40 chunks' log-probabilities in another order.
  auto ppl = [](const std::string& out) {
    const auto at = out.find("PPL = ");
    return at == std::string::npos ? -1.0 : std::stod(out.substr(at + 6));
  };
  ASSERT_GT(ppl(one.out), 0.0) << one.out;
  EXPECT_NEAR(ppl(par.out), ppl(one.out), 1e-4) << par.out;
}

// bench under --tp: the tests run on rank 0 with the others following, the JSON reports the bytes each token sends
// into collectives (in the pipeline's wire field) and the log their calls and time.
TEST(MpiRun, BenchReportsCollectiveBytesPerToken) {
  const auto r = test::run_command(mpirun(2, {"bench", "-m", fixture("qwen3-f32").string(), "-p", "32", "-n", "8", "-t",
                                              "1", "-r", "2", "--tp", "2", "--no-plan", "-o", "json"}));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto pp = r.out.find("\"n_prompt\": 32");
  const auto tg = r.out.find("\"n_gen\": 8");
  EXPECT_NE(pp, std::string::npos) << r.out;
  EXPECT_NE(tg, std::string::npos) << r.out;
  // Two all-reduces of n_embd (256) floats per layer (2 layers) per token, and the head's gather.
  const auto at = r.out.rfind("\"wire_bytes_per_token\": ");
  ASSERT_NE(at, std::string::npos) << r.out;
  EXPECT_GE(std::stod(r.out.substr(at + 24)), 2.0 * 2 * 256 * 4) << r.out;
  EXPECT_NE(r.err.find("collectives (rank 0, whole run):"), std::string::npos) << r.err;
  // Per token, each test: those all-reduces' bytes and the time spent in them; a generated token pays at least the
  // two all-reduces per layer, a prompt token a share of its batch's.
  const auto results = nlohmann::json::parse(r.out);
  ASSERT_EQ(results.size(), 2u) << r.out;
  for (const auto& t : results) {
    ASSERT_TRUE(t["collectives_per_token"].is_number()) << t.dump();
    EXPECT_GE(t["collectives_per_token"].get<double>(), t["n_gen"].get<int>() > 0 ? 2.0 * 2 : 2.0 * 2 / 32) << t.dump();
    EXPECT_GE(t["collective_bytes_per_token"].get<double>(), 2.0 * 2 * 256 * 4) << t.dump();
    EXPECT_GT(t["collective_seconds_per_token"].get<double>(), 0.0) << t.dump();
  }
  const auto two_t =
      test::run_command(mpirun(2, {"bench", "-m", fixture("qwen3-f32").string(), "-t", "1,2", "--tp", "2"}));
  EXPECT_NE(two_t.exit_code, 0);
  EXPECT_NE(two_t.err.find("one -t"), std::string::npos) << two_t.err;
}

// At start under --tp/--ep the ranks time a few all-reduces over the real communicator (one line on rank 0) and the
// plan predicts the run from them and from each rank's probe; bench --check-plan puts that prediction beside the
// measured tokens/s.
TEST(MpiRun, CollectivesMeasuredAtStartFeedThePlan) {
  const auto run = test::run_command(mpirun(2, {"run", "-p", "Once upon a time", "-n", "8", "-t", "1", "--tp", "2"}));
  ASSERT_EQ(run.exit_code, 0) << run.err;
  for (const char* want : {"collectives: all-reduce 4 B ", "4.0 MiB", "over 2 ranks", "rank0 (head)",
                           "rank1:", "your --tp 2", "one decoded token (each rank its share, then the collectives)",
                           "between the sizes measured at start", "Running your --tp 2 as asked."}) {
    EXPECT_NE(run.err.find(want), std::string::npos) << want << "\n" << run.err;
  }
  // --no-plan: the collectives are still measured and shown, no plan.
  const auto quiet =
      test::run_command(mpirun(2, {"run", "-p", "Once upon a time", "-n", "4", "-t", "1", "--tp", "2", "--no-plan"}));
  ASSERT_EQ(quiet.exit_code, 0) << quiet.err;
  EXPECT_NE(quiet.err.find("collectives: all-reduce 4 B "), std::string::npos) << quiet.err;
  EXPECT_EQ(quiet.err.find("your --tp 2"), std::string::npos) << quiet.err;

  const std::regex row(R"((tensor|expert) parallel x2 +1 +(pp16|tg4) +[0-9.]+ +[0-9.]+ +[0-9.]+)");
  for (const auto& [model, mode, name] :
       {std::tuple{"qwen3-f32", "--tp", "tensor"}, std::tuple{"qwen3moe-q4_k_m", "--ep", "expert"}}) {
    const auto bench = test::run_command(mpirun(2, {"bench", "-m", fixture(model).string(), "-p", "16", "-n", "4", "-t",
                                                    "1", "-r", "1", mode, "2", "--check-plan"}));
    ASSERT_EQ(bench.exit_code, 0) << bench.err;
    EXPECT_NE(bench.out.find("Planner check (predicted against measured):"), std::string::npos) << bench.out;
    int rows = 0;
    for (auto it = std::sregex_iterator(bench.out.begin(), bench.out.end(), row); it != std::sregex_iterator(); ++it) {
      EXPECT_EQ((*it)[1].str(), name) << bench.out;
      ++rows;
    }
    EXPECT_EQ(rows, 2) << bench.out;  // pp16 and tg4, each predicted and measured
    // The generation test's token, split into rank 0's shard and its collectives, against the planner's terms.
    const std::regex split(name + std::string(R"( parallel x2 tg4: measured [0-9.]+ ms per token = [0-9.-]+ ms in )"
                                              R"(rank 0's shard \+ [0-9.]+ ms in collectives; predicted [0-9.]+ ms = )"
                                              R"([0-9.]+ ms slowest shard \+ [0-9.]+ ms collectives)"));
    EXPECT_TRUE(std::regex_search(bench.out, split)) << bench.out;
  }
}

TEST(MpiRun, WithoutALauncherOrWithTooFewRanksIsAClearError) {
  const auto alone = test::run_command({test::tessera_bin().string(), "run", "-n", "4", "--tp", "2"});
  EXPECT_NE(alone.exit_code, 0);
  EXPECT_NE(alone.err.find("mpirun -np 2"), std::string::npos) << alone.err;
  const auto three = test::run_command(mpirun(3, {"run", "-n", "4", "--tp", "2"}));
  EXPECT_NE(three.exit_code, 0);
  EXPECT_NE(three.err.find("needs 2 ranks, mpirun started 3"), std::string::npos) << three.err;
  const auto dense = test::run_command(mpirun(2, {"run", "-m", fixture("llama-f32").string(), "--ep", "2"}));
  EXPECT_NE(dense.exit_code, 0);
  EXPECT_NE(dense.err.find("has no experts"), std::string::npos) << dense.err;
}

// A long generation under mpirun in the background; a rank is found by its OMPI_COMM_WORLD_RANK.
class BackgroundRun : public test::Background {
 public:
  explicit BackgroundRun(std::vector<std::string> argv) : Background(Program{}, std::move(argv)) {}
  // The pid of the rank's process (a child of mpirun), or -1.
  pid_t rank_pid(int rank) const {
    const std::string rank_var = std::string("OMPI_COMM_WORLD_RANK=") + std::to_string(rank) + '\0';
    const std::string test_var = "TESSERA_MPI_TEST=" + std::to_string(::getpid());
    return test::find_process([&](const std::string& cmdline, const std::string& env) {
      return cmdline.find("tessera") != std::string::npos && cmdline.rfind("mpirun", 0) != 0 &&
             env.find(rank_var) != std::string::npos && env.find(test_var) != std::string::npos;
    });
  }
  void terminate() const { signal(SIGTERM); }
};

// Rank `rank` of `ranks` gets the signal mid-run; the output must hold every `expect` and none of `absent`.
void check_fault(int signal, std::initializer_list<const char*> expect, int ranks = 2, int rank = 1,
                 std::initializer_list<const char*> absent = {}) {
  setenv("TESSERA_MPI_TEST", std::to_string(::getpid()).c_str(), 1);
  BackgroundRun run(mpirun(ranks, {"run", "-p", "Once upon a time", "-n", "100000", "-c", "100000", "--ignore-eos",
                                   "-t", "1", "--tp", std::to_string(ranks), "--collective-timeout", "2"}));
  pid_t victim = -1;
  for (int i = 0; i < 200 && victim < 0; ++i) {
    std::this_thread::sleep_for(50ms);
    victim = run.rank_pid(rank);
  }
  ASSERT_GT(victim, 0) << run.output();
  std::this_thread::sleep_for(1500ms);  // generating by now
  const auto start = std::chrono::steady_clock::now();
  kill(victim, signal);
  const int code = run.wait_exit(std::chrono::seconds(20));
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (signal == SIGSTOP) kill(victim, SIGKILL);
  EXPECT_NE(code, -1) << "mpirun still running 20 s after the fault";
  EXPECT_NE(code, 0);
  EXPECT_LT(took, 10.0);
  for (const char* e : expect) EXPECT_NE(run.output().find(e), std::string::npos) << e << " in " << run.output();
  for (const char* e : absent) EXPECT_EQ(run.output().find(e), std::string::npos) << e << " in " << run.output();
}

// serve --tp 2: only rank 0 listens; a completion equals one node's run; SIGTERM stops every rank.
TEST(MpiRun, ServeAnswersLikeOneNode) {
  const std::string port = std::to_string(20000 + ::getpid() % 20000);
  setenv("TESSERA_MPI_TEST", std::to_string(::getpid()).c_str(), 1);
  BackgroundRun serve(mpirun(2, {"serve", "--tp", "2", "-t", "1", "--port", port}));
  const std::string url = "http://127.0.0.1:" + port;
  bool ready = false;
  for (int i = 0; i < 200 && !ready; ++i) {
    std::this_thread::sleep_for(100ms);
    ready = test::run_command({test::on_path("curl"), "-s", url + "/health"}).out.find("ok") != std::string::npos;
  }
  ASSERT_TRUE(ready) << serve.output();
  const auto r =
      test::run_command({test::on_path("curl"), "-s", url + "/v1/completions", "-H", "Content-Type: application/json",
                         "-d", R"({"prompt":"Once upon a time","max_tokens":16,"temperature":0})"});
  const auto one = test::run_command(
      {test::tessera_bin().string(), "run", "-p", "Once upon a time", "-n", "16", "--temp", "0", "-t", "1"});
  ASSERT_EQ(one.exit_code, 0) << one.err;
  const std::string continuation = one.out.substr(std::string("Once upon a time").size());
  EXPECT_NE(r.out.find(continuation.substr(0, continuation.find_last_not_of("\n") + 1)), std::string::npos)
      << r.out << " vs " << one.out;
  // /metrics counts rank 0's collectives: two all-reduces per layer (5 in stories260K) for the prompt's pass and
  // for each token after it.
  const std::string metrics = test::run_command({test::on_path("curl"), "-s", url + "/metrics"}).out;
  const std::string key = "tessera_collectives_total{replica=\"0\"} ";
  const auto at = metrics.find(key);
  ASSERT_NE(at, std::string::npos) << metrics;
  EXPECT_GE(std::stod(metrics.substr(at + key.size())), 2.0 * 5 * 2) << metrics;
  EXPECT_NE(metrics.find("tessera_collective_bytes_total{replica=\"0\"} "), std::string::npos) << metrics;
  EXPECT_NE(metrics.find("tessera_collective_seconds_total{replica=\"0\"} "), std::string::npos) << metrics;
  serve.terminate();
  EXPECT_NE(serve.wait_exit(std::chrono::seconds(20)), -1) << "serve still running after SIGTERM";
  EXPECT_NE(serve.output().find("SIGTERM received, stopping"), std::string::npos) << serve.output();
  EXPECT_EQ(serve.output().find("error:"), std::string::npos) << serve.output();
}

TEST(MpiRun, AKilledRankEndsTheRunWithinSeconds) { check_fault(SIGKILL, {"rank 1"}); }

// A stopped rank keeps its connections open: rank 0's deadline passes, and the ping it then sends goes unanswered.
TEST(MpiRun, AStoppedRankIsNamedWithinSeconds) {
  check_fault(SIGSTOP, {"did not complete within 2 s: rank 1 (", ") did not answer a ping"});
}

// Of three ranks only the stopped one is named: the others answer while they wait.
TEST(MpiRun, OfThreeRanksOnlyTheStoppedOneIsNamed) {
  check_fault(SIGSTOP, {": rank 2 (", ") did not answer a ping"}, 3, 2, {"rank 1 (", "rank 0 ("});
}

}  // namespace
}  // namespace tessera
