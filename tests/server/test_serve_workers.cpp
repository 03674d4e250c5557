// `tessera serve --workers`: replicas that are pipelines over real `tessera worker` processes on loopback answer
// as `tessera run` on one node does, and /health and /metrics describe every node of every replica.
#include <future>

#include "server/serve_test_util.h"
#include "support/worker_process.h"

namespace tessera::test {
namespace {

std::string stories() { return (source_dir() / "models/stories260K.gguf").string(); }

TEST(ServeWorkers, PipelineAnswersEqualOneNodeAndHealthShowsTheNodes) {
  WorkerProcess a, b;
  ServeProcess s({"-m", stories(), "-t", "1", "--workers", "a=" + a.address() + ",b=" + b.address()});
  auto c = client(s);
  for (uint64_t seed : {7u, 8u}) {
    const json r = post(c, "/v1/completions",
                        {{"prompt", "Once upon a time"}, {"max_tokens", 40}, {"seed", seed}, {"top_p", 0.9}});
    const std::string want = tessera_run(
        {"-m", stories(), "-p", "Once upon a time", "-n", "40", "--seed", std::to_string(seed), "--top-p", "0.9"});
    EXPECT_EQ("Once upon a time" + r["choices"][0]["text"].get<std::string>() + "\n", want) << "seed " << seed;
  }
  const json h = health(s);
  EXPECT_EQ(h["status"], "ready");
  ASSERT_EQ(h["replicas"].size(), 1u);
  const json& nodes = h["replicas"][0]["nodes"];
  ASSERT_EQ(nodes.size(), 2u);
  EXPECT_EQ(nodes[0]["name"], "a");
  EXPECT_EQ(nodes[0]["address"], a.address());
  EXPECT_EQ(nodes[0]["layers"]["first"], 0);
  EXPECT_EQ(nodes[0]["embedding"], true);
  EXPECT_EQ(nodes[1]["name"], "b");
  EXPECT_EQ(nodes[1]["layers"]["last"], 4);
  EXPECT_EQ(nodes[1]["head"], true);
  EXPECT_EQ(nodes[0]["layers"]["last"].get<int>() + 1, nodes[1]["layers"]["first"].get<int>());
  for (const auto& n : nodes) {
    EXPECT_EQ(n["status"], "up");
    EXPECT_GT(n["memory"]["weights"].get<uint64_t>(), 0u);
    EXPECT_GT(n["memory"]["kv_cache"].get<uint64_t>(), 0u);
    // Weights went out at load and activations at every step; results came back.
    EXPECT_GT(n["bytes_sent"].get<uint64_t>(), 100'000u);
    EXPECT_GT(n["bytes_received"].get<uint64_t>(), 0u);
  }
  auto m = c.Get("/metrics");
  ASSERT_TRUE(m);
  EXPECT_NE(m->body.find("tessera_node_link_bytes_total{replica=\"0\",node=\"a\",direction=\"sent\"}"),
            std::string::npos)
      << m->body;
  EXPECT_NE(m->body.find("node=\"b\""), std::string::npos);
}

TEST(ServeWorkers, ReplicasEachRunOverTheirOwnWorkers) {
  WorkerProcess a, b, c;
  // Replica 0: a pipeline over a and b; replica 1: one worker, c.
  ServeProcess s({"-m", stories(), "-t", "1", "--replicas", "2", "--parallel", "1", "--workers",
                  "a=" + a.address() + ",b=" + b.address() + ";c=" + c.address()});
  const json h0 = health(s);
  ASSERT_EQ(h0["replicas"].size(), 2u);
  ASSERT_EQ(h0["replicas"][0]["nodes"].size(), 2u);
  ASSERT_EQ(h0["replicas"][1]["nodes"].size(), 1u);
  EXPECT_EQ(h0["replicas"][1]["nodes"][0]["name"], "c");
  EXPECT_EQ(h0["replicas"][1]["nodes"][0]["layers"]["last"], 4);

  const json ask = {{"prompt", "Lily"}, {"max_tokens", 40}, {"seed", 5}};
  const auto answers = concurrent_completions(s, ask, 4);
  const std::string& first = answers[0];
  for (size_t i = 1; i < answers.size(); ++i) EXPECT_EQ(answers[i], first);
  EXPECT_EQ("Lily" + first + "\n", tessera_run({"-m", stories(), "-p", "Lily", "-n", "40", "--seed", "5"}));
  const json h = health(s);
  EXPECT_GT(h["replicas"][0]["requests"].get<int>(), 0);
  EXPECT_GT(h["replicas"][1]["requests"].get<int>(), 0);
}

TEST(ServeWorkers, AKilledWorkerIsShownDownAndTheOtherReplicaKeepsServing) {
  WorkerProcess a, b;
  ServeProcess s(
      {"-m", stories(), "-t", "1", "--replicas", "2", "--workers", "a=" + a.address() + ";b=" + b.address()});
  const json h0 = health(s);
  EXPECT_EQ(h0["status"], "ready");
  for (const auto& r : h0["replicas"]) {
    // Measured at connect: a loopback round trip is well under a second but never zero.
    EXPECT_GT(r["nodes"][0]["link_rtt_ms"].get<double>(), 0.0);
    EXPECT_LT(r["nodes"][0]["link_rtt_ms"].get<double>(), 1000.0);
  }
  b.stop(SIGKILL);
  json h;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  do {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    h = health(s);
  } while (h["status"] != "degraded" && std::chrono::steady_clock::now() < deadline);
  EXPECT_EQ(h["status"], "degraded") << h.dump();
  EXPECT_EQ(h["replicas"][1]["nodes"][0]["status"], "down") << h.dump();
  EXPECT_EQ(h["replicas"][0]["nodes"][0]["status"], "up") << h.dump();
  // The router prefers the healthy replica: every request is answered, and by replica 0.
  const int before = h["replicas"][0]["requests"].get<int>();
  auto c = client(s);
  for (int i = 0; i < 4; ++i) {
    const json r = post(c, "/v1/completions", {{"prompt", "Lily"}, {"max_tokens", 8}, {"seed", i}});
    EXPECT_EQ(r["usage"]["completion_tokens"], 8);
  }
  EXPECT_EQ(health(s)["replicas"][0]["requests"].get<int>(), before + 4);
}

TEST(ServeWorkers, WorkerGroupsThatDoNotMatchTheReplicasAreRefused) {
  const auto r = run_command({tessera_bin().string(), "serve", "-m", stories(), "--port", "0", "--replicas", "2",
                              "--workers", "a=127.0.0.1:1,b=127.0.0.1:2,c=127.0.0.1:3"});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("3 worker(s)"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("2 replicas"), std::string::npos) << r.err;
  const auto g = run_command({tessera_bin().string(), "serve", "-m", stories(), "--port", "0", "--replicas", "3",
                              "--workers", "a=127.0.0.1:1;b=127.0.0.1:2"});
  EXPECT_NE(g.exit_code, 0);
  EXPECT_NE(g.err.find("2 group(s)"), std::string::npos) << g.err;
  const auto u =
      run_command({tessera_bin().string(), "serve", "-m", stories(), "--port", "0", "--workers", "a=127.0.0.1:1"});
  EXPECT_NE(u.exit_code, 0);
  EXPECT_NE(u.err.find("127.0.0.1:1"), std::string::npos) << u.err;
}

}  // namespace
}  // namespace tessera::test
