// `tessera serve --replicas 2` without a spare: a replica that loses its worker for good (the worker does not come
// back within --recovery-timeout) hands its running requests to the other replica, where they continue from the
// tokens already generated; the client sees a delay and the text of an undisturbed run. With every replica down a
// request fails with a clear error and /health answers 503.
#include <future>
#include <map>

#include "server/serve_test_util.h"
#include "support/worker_process.h"

namespace tessera::test {
namespace {

std::string stories() { return (source_dir() / "models/stories260K.gguf").string(); }

// What a completion returned: its text (streamed deltas joined), or the error it carried.
struct Outcome {
  int status = 0;
  std::string text;
  std::string error;
};

Outcome complete(const ServeProcess& s, const json& ask, bool stream) {
  auto c = client(s);
  json body = ask;
  body["stream"] = stream;
  auto r = c.Post("/v1/completions", body.dump(), "application/json");
  Outcome o;
  if (!r) {
    o.error = "no response: " + httplib::to_string(r.error());
    return o;
  }
  o.status = r->status;
  if (r->status != 200) {
    const json j = parse(r->body);
    o.error = j.contains("error") ? j["error"]["message"].get<std::string>() : r->body;
    return o;
  }
  if (!stream) {
    o.text = parse(r->body)["choices"][0]["text"].get<std::string>();
    return o;
  }
  for (const json& e : parse_stream(r->body)) {
    if (e.contains("error")) {
      o.error = e["error"]["message"].get<std::string>();
    } else if (!e["choices"].empty()) {
      o.text += e["choices"][0]["text"].get<std::string>();
    }
  }
  return o;
}

uint64_t moved_total(const ServeProcess& s, int replica) {
  auto c = client(s);
  auto m = c.Get("/metrics");
  EXPECT_TRUE(m);
  if (!m) return 0;
  const std::string key = "tessera_requests_moved_total{replica=\"" + std::to_string(replica) + "\"} ";
  const size_t at = m->body.find(key);
  EXPECT_NE(at, std::string::npos) << m->body;
  return at == std::string::npos ? 0 : std::stoull(m->body.substr(at + key.size()));
}

// Polls /health until `ok` holds for it (bounded); returns the last answer.
template <typename Pred>
json wait_health(const ServeProcess& s, Pred ok, std::chrono::seconds limit) {
  const auto until = std::chrono::steady_clock::now() + limit;
  json h;
  while (std::chrono::steady_clock::now() < until) {
    h = get_json(s, "/health");
    if (ok(h)) return h;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return h;
}

TEST(ServeMove, RequestsOfAReplicaThatCannotRecoverFinishOnTheOtherWithTheSameText) {
  // Scalar kernels everywhere: the replayed prompt and tokens rebuild the KV cache the original steps built.
  setenv("TESSERA_ISA", "scalar", 1);
  std::vector<std::unique_ptr<WorkerProcess>> workers;
  for (int i = 0; i < 2; ++i) workers.push_back(std::make_unique<WorkerProcess>());
  const std::vector<std::string> addresses = {workers[0]->address(), workers[1]->address()};
  // No spare, and a worker that stays dead longer than the recovery timeout: the replica cannot recover.
  ServeProcess s({"-m", stories(), "-t", "1", "--replicas", "2", "--parallel", "2", "--workers",
                  "a=" + addresses[0] + ";b=" + addresses[1], "--recovery-timeout", "1", "--no-plan"},
                 {{"TESSERA_ISA", "scalar"}});
  const json ask = {{"prompt", "Once upon a time"}, {"max_tokens", 400}, {"temperature", 0}};
  const Outcome reference = complete(s, ask, false);
  ASSERT_EQ(reference.status, 200) << reference.error;
  const std::string want = reference.text;
  ASSERT_FALSE(want.empty());

  uint64_t moved = 0;
  for (int round = 0; round < 4; ++round) {
    SCOPED_TRACE(round);
    const int r = round % 2;  // the replica whose worker goes
    // Two streamed and two plain requests: the router gives each replica two.
    std::vector<std::future<Outcome>> asks;
    for (int i = 0; i < 4; ++i) {
      asks.push_back(std::async(std::launch::async, [&, i] { return complete(s, ask, i % 2 == 0); }));
    }
    const json busy = wait_health(
        s, [](const json& h) { return h["replicas"][0]["active"] == 2 && h["replicas"][1]["active"] == 2; },
        std::chrono::seconds(10));
    ASSERT_EQ(busy["replicas"][r]["active"], 2) << busy.dump();
    workers[static_cast<size_t>(r)]->stop(SIGKILL);
    for (auto& a : asks) {
      const Outcome o = a.get();
      EXPECT_EQ(o.status, 200) << o.error;
      EXPECT_EQ(o.error, "");
      EXPECT_EQ(o.text, want);
    }
    const uint64_t now_moved = moved_total(s, r);
    EXPECT_GE(now_moved, 1u) << "replica " << r << " moved no request";
    moved += now_moved;
    const json h = get_json(s, "/health");
    EXPECT_GE(h["replicas"][1 - r]["moved_in"].get<uint64_t>(), 1u) << h.dump();
    EXPECT_EQ(h["replicas"][r]["moved_out"].get<uint64_t>(), now_moved) << h.dump();
    // The worker comes back where it was; its replica repairs itself while idle and serves again.
    workers[static_cast<size_t>(r)] = std::make_unique<WorkerProcess>(std::vector<std::string>{}, addresses[r]);
    const json ready = wait_health(
        s, [](const json& x) { return x["status"] == "ready"; }, std::chrono::seconds(60));
    ASSERT_EQ(ready["status"], "ready") << ready.dump();
  }
  EXPECT_GE(moved, 4u);
  EXPECT_NE(s.log().find("moved to replica"), std::string::npos) << s.log();
}

TEST(ServeMove, WithEveryReplicaDownARequestFailsWithAClearErrorAndHealthIs503) {
  setenv("TESSERA_ISA", "scalar", 1);
  WorkerProcess a, b;
  ServeProcess s({"-m", stories(), "-t", "1", "--replicas", "2", "--parallel", "1", "--workers",
                  "a=" + a.address() + ";b=" + b.address(), "--recovery-timeout", "1", "--no-plan"},
                 {{"TESSERA_ISA", "scalar"}});
  const json ask = {{"prompt", "Once upon a time"}, {"max_tokens", 400}, {"temperature", 0}};
  // Both replicas busy when both workers go: what was running fails, after trying the other replica.
  auto streamed = std::async(std::launch::async, [&] { return complete(s, ask, true); });
  auto plain = std::async(std::launch::async, [&] { return complete(s, ask, false); });
  const json busy = wait_health(
      s, [](const json& h) { return h["replicas"][0]["active"] == 1 && h["replicas"][1]["active"] == 1; },
      std::chrono::seconds(10));
  ASSERT_EQ(busy["replicas"][0]["active"], 1) << busy.dump();
  a.stop(SIGKILL);
  b.stop(SIGKILL);
  for (auto* f : {&streamed, &plain}) {
    const Outcome o = f->get();
    EXPECT_NE(o.error.find("no other replica could take the request over"), std::string::npos)
        << o.status << " " << o.error << " " << o.text.size();
  }
  // Nothing can serve: a load balancer must see it (between the replicas' attempts to repair themselves).
  auto c = client(s);
  int status = 0;
  std::string body;
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (std::chrono::steady_clock::now() < until) {
    if (auto r = c.Get("/health")) {
      status = r->status;
      body = r->body;
      if (status == 503) break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_EQ(status, 503) << body;
  EXPECT_EQ(parse(body)["status"], "unavailable") << body;
  // A new request fails too, with the error that says why.
  const Outcome late = complete(s, ask, false);
  EXPECT_EQ(late.status, 500);
  EXPECT_NE(late.error.find("no other replica could take the request over"), std::string::npos) << late.error;
}

}  // namespace
}  // namespace tessera::test
