// `tessera serve` under concurrency: concurrent requests equal their solo answers, a full queue answers 503 with
// Retry-After, a client that hangs up (streaming or not) cancels its request and frees the slot, replicas share
// the load, and a short load run (bounded in count and time) loses nothing.
#include <atomic>
#include <future>

#include "server/serve_test_util.h"

namespace tessera::test {
namespace {

using namespace std::chrono_literals;

std::string stories() { return (source_dir() / "models/stories260K.gguf").string(); }

// Polls /health until pred holds (at most `timeout`).
template <typename Pred>
bool wait_health(const ServeProcess& s, Pred pred, std::chrono::milliseconds timeout = 10s) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    if (pred(health(s))) return true;
    std::this_thread::sleep_for(20ms);
  }
  return false;
}

std::string metric(const ServeProcess& s, const std::string& name) {
  auto c = client(s);
  auto r = c.Get("/metrics");
  if (!r) return "";
  const auto at = r->body.find("\n" + name + " ");
  if (at == std::string::npos) return "";
  const auto begin = at + name.size() + 2;
  return r->body.substr(begin, r->body.find('\n', begin) - begin);
}

// A generation that runs until it is cancelled: with the 32768-position context the tests below give the server,
// filling it takes this model tens of seconds, far longer than any test waits.
json endless(bool stream) {
  return {{"prompt", "Once upon a time"}, {"max_tokens", 100000}, {"ignore_eos", true}, {"stream", stream}};
}

TEST(ServeBatching, ConcurrentRequestsEqualTheirSoloAnswers) {
  // Batched rows equal solo rows exactly on the scalar kernels; the SIMD ones tile tokens per batch size and may
  // round a low-margin token differently (see test_scheduler.cpp), and which requests share a step depends on
  // timing here.
  ServeProcess s({"-m", stories(), "--parallel", "4", "-t", "1"}, {{"TESSERA_ISA", "scalar"}});
  std::vector<json> asks;
  for (int i = 0; i < 6; ++i) {
    asks.push_back({{"messages", {{{"role", "user"}, {"content", "Story number " + std::to_string(i)}}}},
                    {"max_tokens", 30 + 5 * i},
                    {"seed", 100 + i},
                    {"stream", i % 2 == 0}});
  }
  auto text_of = [](const httplib::Result& r, bool stream) {
    if (!r) return std::string("<no response>");
    if (!stream) return parse(r->body)["choices"][0]["message"]["content"].get<std::string>();
    std::string t;
    for (const auto& e : parse_stream(r->body)) {
      if (!e["choices"].empty() && e["choices"][0]["delta"].contains("content")) {
        t += e["choices"][0]["delta"]["content"].get<std::string>();
      }
    }
    return t;
  };
  std::vector<std::string> solo;
  for (const auto& a : asks) {
    auto c = client(s);
    solo.push_back(text_of(c.Post("/v1/chat/completions", a.dump(), "application/json"), a["stream"]));
  }
  std::vector<std::future<std::string>> together;
  for (const auto& a : asks) {
    together.push_back(std::async(std::launch::async, [&s, a, &text_of] {
      auto c = client(s);
      return text_of(c.Post("/v1/chat/completions", a.dump(), "application/json"), a["stream"]);
    }));
  }
  for (size_t i = 0; i < asks.size(); ++i) EXPECT_EQ(together[i].get(), solo[i]) << "request " << i;
  EXPECT_EQ(health(s)["replicas"][0]["requests"], 12);
}

TEST(ServeBatching, FullQueueAnswers503WithRetryAfter) {
  ServeProcess s({"-m", stories(), "--parallel", "1", "--queue", "1", "-c", "32768", "-t", "1"});
  RawClient running(s.port());
  running.send(http_post("/v1/completions", endless(true).dump()));
  ASSERT_NE(running.read_until("data: {", 10s).find("data: {"), std::string::npos);
  RawClient waiting(s.port());
  waiting.send(
      http_post("/v1/completions", json{{"prompt", "The dog"}, {"max_tokens", 5}, {"ignore_eos", true}}.dump()));
  ASSERT_TRUE(wait_health(s, [](const json& h) { return h["replicas"][0]["queued"] == 1; }));

  auto c = client(s);
  auto r = c.Post("/v1/completions", json{{"prompt", "x"}, {"max_tokens", 2}}.dump(), "application/json");
  expect_error(r, 503, "server_error", nullptr, "queue_full");
  EXPECT_EQ(r->get_header_value("Retry-After"), "1");
  EXPECT_EQ(metric(s, "tessera_requests_rejected_total"), "1");

  // Hanging up the running stream frees the slot: the queued request runs and completes.
  running.close();
  const std::string& answer = waiting.read_until("\"total_tokens\"", 20s);
  EXPECT_NE(answer.find("HTTP/1.1 200"), std::string::npos) << answer;
  EXPECT_NE(answer.find("\"completion_tokens\":5"), std::string::npos) << answer;
}

TEST(ServeBatching, ClientDisconnectCancelsAndFreesTheSlot) {
  ServeProcess s({"-m", stories(), "--parallel", "2", "-c", "32768", "-t", "1"});
  {
    RawClient streaming(s.port());
    streaming.send(http_post("/v1/completions", endless(true).dump()));
    ASSERT_NE(streaming.read_until("data: {", 10s).find("data: {"), std::string::npos);
    RawClient whole(s.port());
    whole.send(http_post("/v1/completions", endless(false).dump()));
    ASSERT_TRUE(wait_health(s, [](const json& h) { return h["replicas"][0]["active"] == 2; }));
  }  // both hang up
  // Both requests end as cancelled (not by filling their context) and their slots are free again.
  ASSERT_TRUE(wait_health(s, [](const json& h) { return h["replicas"][0]["active"] == 0; })) << health(s).dump();
  auto c = client(s);
  const std::string m = c.Get("/metrics")->body;
  EXPECT_NE(m.find("tessera_requests_total{replica=\"0\",reason=\"cancelled\"} 2"), std::string::npos) << m;
  EXPECT_NE(m.find("tessera_requests_total{replica=\"0\",reason=\"context_full\"} 0"), std::string::npos) << m;
  const json ok = post(c, "/v1/completions", {{"prompt", "Once"}, {"max_tokens", 3}, {"ignore_eos", true}});
  EXPECT_EQ(ok["usage"]["completion_tokens"], 3);
}

TEST(ServeBatching, ReplicasShareTheLoadAndAnswerAlike) {
  ServeProcess s({"-m", stories(), "--replicas", "2", "--parallel", "1", "-t", "2"});
  const json h0 = health(s);
  ASSERT_EQ(h0["replicas"].size(), 2u);
  for (const auto& r : h0["replicas"]) EXPECT_EQ(r["nodes"][0]["layers"]["last"], 4);
  const json ask = {{"prompt", "Lily"}, {"max_tokens", 60}, {"seed", 5}};
  const auto answers = concurrent_completions(s, ask, 4);
  const std::string& first = answers[0];
  for (size_t i = 1; i < answers.size(); ++i) EXPECT_EQ(answers[i], first);
  const json h = health(s);
  // Two requests at once on two single-slot replicas: the router sends them to different replicas.
  EXPECT_GT(h["replicas"][0]["requests"].get<int>(), 0);
  EXPECT_GT(h["replicas"][1]["requests"].get<int>(), 0);
  EXPECT_EQ(h["replicas"][0]["requests"].get<int>() + h["replicas"][1]["requests"].get<int>(), 4);
}

// A short version of bench/serve_load.js: 8 streaming clients for 3 seconds, every stream complete.
TEST(ServeBatching, ShortLoadRunLosesNothing) {
  ServeProcess s({"-m", stories(), "--parallel", "8", "-t", "1"});
  const auto deadline = std::chrono::steady_clock::now() + 3s;
  std::atomic<int> complete{0}, broken{0};
  std::vector<std::thread> clients;
  for (int i = 0; i < 8; ++i) {
    clients.emplace_back([&, i] {
      auto c = client(s);
      for (int k = 0; k < 200 && std::chrono::steady_clock::now() < deadline; ++k) {
        const json ask = {{"messages", {{{"role", "user"}, {"content", "Tell me about " + std::to_string(k)}}}},
                          {"max_tokens", 16 + (i + k) % 32},
                          {"seed", i * 1000 + k},
                          {"stream", true}};
        auto r = c.Post("/v1/chat/completions", ask.dump(), "application/json");
        bool ok = r && r->status == 200;
        if (ok) {
          const auto events = parse_stream(r->body);
          ok = events.size() >= 2 && !events.back()["choices"][0]["finish_reason"].is_null();
        }
        (ok ? complete : broken)++;
      }
    });
  }
  for (auto& t : clients) t.join();
  EXPECT_EQ(broken.load(), 0);
  EXPECT_GT(complete.load(), 8);
  const json h = health(s);
  EXPECT_EQ(h["replicas"][0]["requests"].get<int>(), complete.load());
  EXPECT_EQ(h["replicas"][0]["active"], 0);
  EXPECT_EQ(s.stop(), 0);
}

}  // namespace
}  // namespace tessera::test
