// Tensor and expert parallelism over real `tessera worker` processes on loopback (--workers with --tp/--ep): the same
// text as one node and F32 logits within 1e-4, a worker without the key or the model cannot join, and a worker
// killed or stopped mid-step ends the head's run with an error naming it while the others take a new head.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <thread>

#include "support/background_process.h"
#include "support/test_paths.h"
#include "support/worker_group.h"
#include "support/worker_process.h"

namespace tessera {
namespace {

using test::stories;

using namespace std::chrono_literals;

std::filesystem::path fixtures() { return test::shared_dir() / "fixtures/models"; }

using test::tessera;
using Group = test::WorkerGroup;

struct Case {
  const char* model;  // a fixture name, or "stories260K"
  int ranks;
  const char* mode;
  const char* shares = "";
};

std::filesystem::path model_path(const Case& c) {
  return std::string(c.model) == "stories260K" ? stories() : fixtures() / (std::string(c.model) + ".gguf");
}

class TpWorkers : public ::testing::TestWithParam<Case> {};

TEST_P(TpWorkers, SameTextAndLogitsAsOneNode) {
  const Case c = GetParam();
  test::TempDir dir;
  const auto model = model_path(c);
  const std::vector<std::string> common = {
      "run",         "-m",        model.string(), "-p", "Once upon a time there was",
      "-n",          "12",        "--temp",       "0",  "-t",
      "1",           "--kv-type", "f32",          "-c", "256",
      "--exact-gelu"};
  auto one_args = common;
  one_args.insert(one_args.end(), {"--logits-out", (dir / "one.f32").string()});
  const auto one = tessera(one_args);
  ASSERT_EQ(one.exit_code, 0) << one.err;

  Group g(dir, c.ranks - 1, model.parent_path());
  auto par_args = common;
  par_args.insert(par_args.end(), {"--logits-out", (dir / "par.f32").string(), c.mode, std::to_string(c.ranks),
                                   "--workers", g.list(), "--key-file", g.key, "--wire-type", "f32"});
  if (*c.shares != '\0') par_args.insert(par_args.end(), {"--tp-shares", c.shares});
  const auto par = tessera(par_args);
  ASSERT_EQ(par.exit_code, 0) << par.err;
  EXPECT_EQ(par.out, one.out);
  EXPECT_NE(par.err.find(std::to_string(c.ranks) + " ranks ("), std::string::npos) << par.err;
  EXPECT_NE(par.err.find("group: " + std::to_string(c.ranks) + " members linked over TLS (f32 wire"), std::string::npos)
      << par.err;
  EXPECT_LE(test::max_logit_diff(dir / "one.f32", dir / "par.f32"), 1e-4f) << c.model;
}

INSTANTIATE_TEST_SUITE_P(Fixtures, TpWorkers,
                         ::testing::Values(Case{"stories260K", 2, "--tp"}, Case{"stories260K", 3, "--tp"},
                                           Case{"llama-f32", 2, "--tp"}, Case{"llama-f32", 3, "--tp"},
                                           Case{"qwen3moe-f32", 3, "--tp", "2,1,1"}, Case{"qwen3moe-f32", 2, "--ep"},
                                           Case{"gemma4-f32", 2, "--tp"}, Case{"mixtral-f32", 3, "--ep"}),
                         [](const auto& p) {
                           std::string s = std::string(p.param.model) + "_" + (p.param.mode + 2) +
                                           std::to_string(p.param.ranks) + (*p.param.shares ? "_uneven" : "");
                           for (auto& ch : s) ch = (ch == '-' || ch == ',') ? '_' : ch;
                           return s;
                         });

// The f16 wire halves the bytes of every partial sum: the text stays one node's on this model.
TEST(TpWorkersWire, HalfWireAndBenchReportCollectives) {
  test::TempDir dir;
  Group g(dir, 1, stories().parent_path());
  const auto r = tessera({"bench",      "-m",        stories().string(),
                          "-p",         "16",        "-n",
                          "8",          "-t",        "1",
                          "-r",         "1",         "--tp",
                          "2",          "--workers", g.list(),
                          "--key-file", g.key,       "--wire-type",
                          "f16",        "--no-plan", "-o",
                          "json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("collectives (rank 0, whole run):"), std::string::npos) << r.err;
  EXPECT_NE(r.out.find("\"collectives_per_token\""), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("\"collective_bytes_per_token\""), std::string::npos) << r.out;
}

TEST(TpWorkersErrors, KeyModelAndCountAreCheckedWithClearErrors) {
  test::TempDir dir;
  const auto models = stories().parent_path();
  Group g(dir, 1, models);
  const std::vector<std::string> run = {"run", "-m", stories().string(), "-p", "Once", "-n", "4", "-t", "1"};
  const auto with = [&](std::vector<std::string> extra) {
    auto args = run;
    args.insert(args.end(), extra.begin(), extra.end());
    return tessera(args);
  };
  // One worker for --tp 3.
  auto r = with({"--tp", "3", "--workers", g.list(), "--key-file", g.key});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("needs 2 worker(s); 1 given"), std::string::npos) << r.err;
  // No key on the head.
  r = with({"--tp", "2", "--workers", g.list()});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("needs --key-file"), std::string::npos) << r.err;
  // A worker without the key (plain, loopback) and one with another key: neither joins, both named.
  test::WorkerProcess keyless({"--models", models.string()});
  r = with({"--tp", "2", "--workers", "b=" + keyless.address(), "--key-file", g.key});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("worker b (" + keyless.address() + ") cannot join the group"), std::string::npos) << r.err;
  Group other(dir, 1, models, "other");
  r = with({"--tp", "3", "--workers", "a=" + g.workers[0]->address() + ",c=" + other.workers[0]->address(),
            "--key-file", g.key});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("worker c (" + other.workers[0]->address() + ") cannot join the group"), std::string::npos)
      << r.err;
  // A worker whose --models folder lacks the model receives its share instead (test_tp_shares.cpp).
  test::TempDir empty;
  g.add(empty.path());
  r = with({"--tp", "2", "--workers", "b=" + g.workers[1]->address(), "--key-file", g.key});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("has no copy of the model: sending its share"), std::string::npos) << r.err;
  // The first worker took part in none of it and still serves a group.
  r = with({"--tp", "2", "--workers", g.list({0}), "--key-file", g.key});
  EXPECT_EQ(r.exit_code, 0) << r.err;
}

// A worker killed (SIGKILL) or stopped (SIGSTOP) while the group decodes: the head ends within seconds with an error
// naming it; the surviving worker takes the next head.
void fault_mid_step(int sig) {
  test::TempDir dir;
  const auto models = stories().parent_path();
  Group g(dir, 2, models);
  const auto victim = g.workers[1]->address();
  test::Background head({"bench",
                         "-m",
                         stories().string(),
                         "-p",
                         "0",
                         "-n",
                         "64",
                         "-r",
                         "100000",
                         "-t",
                         "1",
                         "--tp",
                         "3",
                         "--workers",
                         g.list(),
                         "--key-file",
                         g.key,
                         "--no-plan",
                         "--collective-timeout",
                         "5"});
  ASSERT_TRUE(head.wait_for("3 ranks (", 60s)) << head.output();
  std::this_thread::sleep_for(1500ms);  // well inside the repetitions
  const auto start = std::chrono::steady_clock::now();
  kill(g.workers[1]->pid(), sig);
  const int code = head.wait_exit(30s);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (sig == SIGSTOP) kill(g.workers[1]->pid(), SIGCONT);
  EXPECT_NE(code, 0) << head.output();
  EXPECT_NE(code, -1) << "the head did not end: " << head.output();
  EXPECT_LT(seconds, 10.0) << head.output();
  EXPECT_NE(head.output().find("b (" + victim + ")"), std::string::npos) << head.output();
  // The failure is said once (the executor no longer repeats it as "the other ranks were not told to stop").
  EXPECT_EQ(head.output().find("the other ranks were not told to stop"), std::string::npos) << head.output();
  // The first worker is ready for a new head, with a new second worker.
  g.workers[1]->stop(SIGKILL);
  g.add(models);
  const auto next = tessera({"run", "-m", stories().string(), "-p", "Once", "-n", "8", "-t", "1", "--tp", "3",
                             "--workers", g.list({0, 2}), "--key-file", g.key, "--no-plan"});
  EXPECT_EQ(next.exit_code, 0) << next.err;
}

TEST(TpWorkersFaults, KilledWorkerIsNamedAndTheOthersTakeANewHead) { fault_mid_step(SIGKILL); }

// A worker told to stop (SIGTERM) while its group decodes exits promptly and cleanly; the head's step fails with its
// name and why.
TEST(TpWorkersFaults, SigtermEndsTheGroupAndTheHeadNamesTheWorker) {
  test::TempDir dir;
  const auto models = stories().parent_path();
  Group g(dir, 1, models);
  test::Background head({"bench", "-m", stories().string(), "-p", "0", "-n", "64", "-r", "100000", "-t", "1", "--tp",
                         "2", "--workers", g.list(), "--key-file", g.key, "--no-plan"});
  ASSERT_TRUE(head.wait_for("2 ranks (", 60s)) << head.output();
  std::this_thread::sleep_for(1000ms);
  const auto start = std::chrono::steady_clock::now();
  const std::string address = g.workers[0]->address();
  const int status = g.workers[0]->stop(SIGTERM);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(status, 0);
  EXPECT_LT(seconds, 5.0);
  const int code = head.wait_exit(30s);
  EXPECT_NE(code, 0) << head.output();
  EXPECT_NE(code, -1) << "the head did not end: " << head.output();
  EXPECT_NE(head.output().find("rank 1: a (" + address + ") gave up"), std::string::npos) << head.output();
  EXPECT_NE(head.output().find("is stopping (SIGTERM or SIGINT) and left the group"), std::string::npos)
      << head.output();
  // Said once: the executor's own "the other ranks were not told to stop" no longer repeats it.
  EXPECT_EQ(head.output().find("the other ranks were not told to stop"), std::string::npos) << head.output();
}
TEST(TpWorkersFaults, StoppedWorkerIsNamedAndTheOthersTakeANewHead) { fault_mid_step(SIGSTOP); }

// A worker told to stop (SIGTERM) while its group starts: it waits for a peer that never links (a listener that never
// answers its TLS handshake stands for it), ends promptly and cleanly, and the head's start fails naming it.
TEST(TpWorkersFaults, SigtermDuringStartEndsTheWorkerAndTheHeadNamesIt) {
  test::TempDir dir;
  Group g(dir, 1, stories().parent_path());
  const int silent = ::socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(silent, 0);
  sockaddr_in at{};
  at.sin_family = AF_INET;
  at.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof at;
  ASSERT_EQ(::bind(silent, reinterpret_cast<sockaddr*>(&at), sizeof at), 0);
  ASSERT_EQ(::listen(silent, 4), 0);
  ASSERT_EQ(::getsockname(silent, reinterpret_cast<sockaddr*>(&at), &len), 0);
  const std::string address = g.workers[0]->address();
  test::Background head({"run", "-m", stories().string(), "-p", "Once", "-n", "4", "-t", "1", "--tp", "3", "--workers",
                         g.list() + ",z=127.0.0.1:" + std::to_string(ntohs(at.sin_port)), "--key-file", g.key,
                         "--no-plan"});
  ASSERT_TRUE(head.wait_for("worker a (" + address + ") is rank 1 of 3", 60s)) << head.output();
  std::this_thread::sleep_for(500ms);
  const auto start = std::chrono::steady_clock::now();
  const int status = g.workers[0]->stop(SIGTERM);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(status, 0);
  EXPECT_LT(seconds, 5.0);
  const int code = head.wait_exit(60s);
  ::close(silent);
  EXPECT_NE(code, 0) << head.output();
  EXPECT_NE(code, -1) << "the head did not end: " << head.output();
  EXPECT_NE(head.output().find("worker a (" + address + ") cannot join the group: "), std::string::npos)
      << head.output();
  EXPECT_NE(head.output().find("is stopping (SIGTERM or SIGINT) and left the group"), std::string::npos)
      << head.output();
}

}  // namespace
}  // namespace tessera
