// The server in-process: /health moves from loading to ready, a replica whose forward passes fail makes it
// degraded (the router sends work to the healthy one and moves there what failed), a failed load is reported, and
// the router picks the least loaded replica.
#include <gtest/gtest.h>
#include <httplib.h>

#include <atomic>
#include <future>

#include "server/http_server.h"
#include "support/test_paths.h"

namespace tessera::server {
namespace {

using nlohmann::json;

std::filesystem::path stories() { return test::source_dir() / "models/stories260K.gguf"; }

// A replica whose executor fails every forward pass, as a pipeline with a dead worker would.
class BrokenExecutor : public Executor {
 public:
  explicit BrokenExecutor(std::unique_ptr<Executor> inner) : inner_(std::move(inner)) {}
  const ModelConfig& config() const override { return inner_->config(); }
  int64_t n_ctx() const override { return inner_->n_ctx(); }
  int64_t n_slots() const override { return inner_->n_slots(); }
  void decode(const Batch&, std::vector<float>&) override { fail("worker w1 is not answering"); }
  void clear_sequence(int64_t seq) override { inner_->clear_sequence(seq); }
  void truncate_sequence(int64_t seq, int64_t n) override { inner_->truncate_sequence(seq, n); }
  int64_t sequence_length(int64_t seq) const override { return inner_->sequence_length(seq); }

 private:
  std::unique_ptr<Executor> inner_;
};

struct Fixture {
  std::shared_ptr<const ModelWeights> weights = ModelWeights::load(stories());

  ServedModel model() const {
    ServedModel m;
    m.id = "stories";
    m.tokenizer = Tokenizer::from_metadata(weights->file().metadata());
    m.config = weights->config();
    m.n_ctx = 256;
    return m;
  }
  ReplicaSpec replica(bool broken = false, int64_t slots = 2) const {
    auto local = std::make_unique<LocalExecutor>(weights, StageOptions{slots, 256, GgmlType::F16}, 1);
    ReplicaSpec spec;
    spec.nodes.push_back(local_node_info(*weights, *local));
    if (broken) {
      spec.executor = std::make_unique<BrokenExecutor>(std::move(local));
    } else {
      spec.executor = std::move(local);
    }
    return spec;
  }
};

json get_health(httplib::Client& c, int& status) {
  auto r = c.Get("/health");
  if (!r) return {};
  status = r->status;
  return json::parse(r->body);
}

// With no replica that can serve, /health says so with a 503 (a load balancer then takes the server out).
TEST(ServerState, NoHealthyReplicaIsUnavailable) {
  Fixture f;
  ServerOptions o;
  o.port = 0;
  Server server(o, f.model());
  const int port = server.start();
  httplib::Client c("127.0.0.1", port);
  server.add_replica(f.replica(true), SchedulerOptions{});
  server.set_ready();
  int status = 0;
  EXPECT_EQ(get_health(c, status)["status"], "ready");
  EXPECT_EQ(status, 200);
  for (int i = 0; i < 3; ++i) {
    auto r = c.Post("/v1/completions", R"({"prompt":"Once","max_tokens":3})", "application/json");
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 500) << r->body;
  }
  auto h = c.Get("/health");
  ASSERT_TRUE(h);
  EXPECT_EQ(h->status, 503);
  EXPECT_EQ(json::parse(h->body)["status"], "unavailable") << h->body;
  EXPECT_EQ(json::parse(h->body)["replicas"][0]["status"], "degraded") << h->body;
  EXPECT_EQ(h->get_header_value("Retry-After"), "1");
  server.stop();
}

TEST(ServerState, LoadingReadyDegraded) {
  Fixture f;
  ServerOptions o;
  o.port = 0;
  Server server(o, f.model());
  const int port = server.start();
  httplib::Client c("127.0.0.1", port);
  int status = 0;
  json h = get_health(c, status);
  EXPECT_EQ(status, 503);
  EXPECT_EQ(h["status"], "loading");
  auto early = c.Post("/v1/completions", R"({"prompt":"x"})", "application/json");
  ASSERT_TRUE(early);
  EXPECT_EQ(early->status, 503);
  EXPECT_EQ(json::parse(early->body)["error"]["code"], "model_loading");
  EXPECT_EQ(early->get_header_value("Retry-After"), "1");

  SchedulerOptions so;
  server.add_replica(f.replica(), so);
  server.add_replica(f.replica(true), so);
  server.set_ready();
  h = get_health(c, status);
  EXPECT_EQ(status, 200);
  EXPECT_EQ(h["status"], "ready");
  ASSERT_EQ(h["replicas"].size(), 2u);

  // Equal loads take turns, so requests reach the broken replica until it has failed three times in a row; each
  // of those moves to the healthy replica and is answered there. How many requests that takes depends on when a
  // finished request leaves its replica's load (the answer may come first), so ask until it is degraded (bounded).
  for (int i = 0; i < 60; ++i) {
    auto r = c.Post("/v1/completions", R"({"prompt":"Once","max_tokens":3})", "application/json");
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 200) << r->body;
    if (get_health(c, status)["status"] == "degraded") break;
  }
  h = get_health(c, status);
  EXPECT_EQ(status, 200);
  EXPECT_EQ(h["status"], "degraded");
  EXPECT_EQ(h["replicas"][0]["status"], "ready");
  EXPECT_EQ(h["replicas"][1]["status"], "degraded");
  EXPECT_NE(h["replicas"][1]["last_error"].get<std::string>().find("w1"), std::string::npos);
  auto metrics = c.Get("/metrics");
  ASSERT_TRUE(metrics);
  EXPECT_NE(metrics->body.find("tessera_forward_failures_total{replica=\"1\"} 3"), std::string::npos);
  EXPECT_NE(metrics->body.find("tessera_requests_moved_total{replica=\"1\"} 3"), std::string::npos) << metrics->body;
  EXPECT_EQ(h["replicas"][0]["moved_in"], 3) << h.dump();
  server.stop();
}

TEST(ServerState, FailedLoadIsReported) {
  Fixture f;
  ServerOptions o;
  o.port = 0;
  Server server(o, f.model());
  httplib::Client c("127.0.0.1", server.start());
  server.set_failed("out of memory on node b");
  int status = 0;
  const json h = get_health(c, status);
  EXPECT_EQ(status, 503);
  EXPECT_EQ(h["status"], "failed");
  EXPECT_EQ(h["error"], "out of memory on node b");
  auto r = c.Post("/v1/chat/completions", R"({"messages":[{"role":"user","content":"x"}]})", "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 503);
  EXPECT_EQ(json::parse(r->body)["error"]["code"], "model_failed");
}

TEST(Router, PicksTheLeastLoadedReplica) {
  Fixture f;
  const auto tokenizer = Tokenizer::from_metadata(f.weights->file().metadata());
  Router router;
  SchedulerOptions so;
  so.n_parallel = 2;
  for (int i = 0; i < 3; ++i) router.add(std::make_shared<Replica>(i, f.replica(), *tokenizer, so));
  SequenceRequest r;
  r.prompt = {1};
  r.max_tokens = -1;
  r.ignore_eos = true;
  std::vector<std::shared_ptr<SequenceHandle>> handles;
  std::vector<int> counts(3, 0);
  for (int i = 0; i < 6; ++i) {
    auto routed = router.submit(r, {});
    ASSERT_NE(routed.handle, nullptr);
    ++counts[static_cast<size_t>(routed.replica)];
    handles.push_back(routed.handle);
  }
  // Six long requests over three replicas of two slots: two each, never three on one.
  EXPECT_EQ(counts, (std::vector<int>{2, 2, 2}));
  for (auto& h : handles) h->cancel();
}

TEST(Router, RequestsArrivingTogetherStillSpreadEvenly) {
  Fixture f;
  const auto tokenizer = Tokenizer::from_metadata(f.weights->file().metadata());
  SequenceRequest r;
  r.prompt = {1};
  r.max_tokens = -1;
  r.ignore_eos = true;
  // Reading the loads and queueing is one step: arrivals that raced used to pile onto one replica.
  constexpr int kArrivals = 8;
  for (int trial = 0; trial < 50; ++trial) {
    Router router;
    SchedulerOptions so;
    so.n_parallel = kArrivals / 2;
    for (int i = 0; i < 2; ++i)
      router.add(std::make_shared<Replica>(i, f.replica(false, so.n_parallel), *tokenizer, so));
    std::atomic<int> ready{0};
    std::vector<std::future<Router::Routed>> arrivals;
    for (int i = 0; i < kArrivals; ++i) {
      arrivals.push_back(std::async(std::launch::async, [&] {
        ready.fetch_add(1);
        while (ready.load() < kArrivals) std::this_thread::yield();
        return router.submit(r, {});
      }));
    }
    std::vector<int> counts(2, 0);
    std::vector<std::shared_ptr<SequenceHandle>> handles;
    for (auto& a : arrivals) {
      auto routed = a.get();
      ASSERT_NE(routed.handle, nullptr);
      ++counts[static_cast<size_t>(routed.replica)];
      handles.push_back(routed.handle);
    }
    EXPECT_EQ(counts, (std::vector<int>{kArrivals / 2, kArrivals / 2})) << "trial " << trial;
    for (auto& h : handles) h->cancel();
  }
}

}  // namespace
}  // namespace tessera::server
