// `tessera serve --workers ... --spare`: workers killed mid-generation cost a delay, not a request. Two replicas,
// each one worker, share a spare; 20 times a busy replica's worker is killed (and started again where it was, for
// a later failover): every request completes, streamed or not, with the text of an undisturbed run. The same holds
// for a member of the group the head leads (--place 'tp(local,a),b').
#include <future>
#include <map>

#include "server/serve_test_util.h"
#include "support/worker_process.h"

namespace tessera::test {
namespace {

std::string stories() { return (source_dir() / "models/stories260K.gguf").string(); }

// The text of a completion, streamed (the deltas joined) or not; empty with a failed test when it did not complete.
std::string complete(const ServeProcess& s, const json& ask, bool stream) {
  auto c = client(s);
  json body = ask;
  body["stream"] = stream;
  auto r = c.Post("/v1/completions", body.dump(), "application/json");
  EXPECT_TRUE(r) << httplib::to_string(r.error());
  if (!r) return {};
  EXPECT_EQ(r->status, 200) << r->body;
  if (!stream) return parse(r->body)["choices"][0]["text"].get<std::string>();
  std::string text;
  for (const json& e : parse_stream(r->body)) {
    EXPECT_FALSE(e.contains("error")) << e.dump();
    if (!e["choices"].empty()) text += e["choices"][0]["text"].get<std::string>();
  }
  return text;
}

// Waits (up to 10 s) until the server's one replica runs the request just sent.
void wait_until_streaming(ServeProcess& s) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (get_json(s, "/health")["replicas"][0]["active"] != 1 && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
}

TEST(ServeRecovery, TwentyKilledWorkersLoseNoRequestAndChangeNoToken) {
  // Scalar kernels everywhere: a replayed prompt then rebuilds the KV cache the original steps built.
  setenv("TESSERA_ISA", "scalar", 1);
  std::map<std::string, std::unique_ptr<WorkerProcess>> workers;
  std::vector<std::string> addresses;
  for (int i = 0; i < 3; ++i) {
    auto w = std::make_unique<WorkerProcess>();
    addresses.push_back(w->address());
    workers[w->address()] = std::move(w);
  }
  ServeProcess s({"-m", stories(), "-t", "1", "--replicas", "2", "--parallel", "1", "--workers",
                  "a=" + addresses[0] + ";b=" + addresses[1], "--spare", addresses[2]},
                 {{"TESSERA_ISA", "scalar"}});
  const json ask = {{"prompt", "Once upon a time"}, {"max_tokens", 300}, {"temperature", 0}};
  const std::string want = complete(s, ask, false);
  ASSERT_FALSE(want.empty());
  EXPECT_EQ(complete(s, ask, true), want);

  for (int kill = 0; kill < 20; ++kill) {
    SCOPED_TRACE(kill);
    auto streamed = std::async(std::launch::async, [&] { return complete(s, ask, true); });
    auto plain = std::async(std::launch::async, [&] { return complete(s, ask, false); });
    // Both replicas busy (the router spreads the two), then the worker of one of them goes.
    const size_t r = static_cast<size_t>(kill % 2);
    std::string victim;
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (std::chrono::steady_clock::now() < until) {
      const json h = get_json(s, "/health");
      if (h["replicas"][0]["active"] == 1 && h["replicas"][1]["active"] == 1) {
        victim = h["replicas"][r]["nodes"][0]["running_on"].get<std::string>();
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    ASSERT_TRUE(workers.count(victim)) << "no replica busy with a known worker: '" << victim << "'";
    workers[victim]->stop(SIGKILL);
    workers[victim] = std::make_unique<WorkerProcess>(std::vector<std::string>{}, victim);
    EXPECT_EQ(streamed.get(), want);
    EXPECT_EQ(plain.get(), want);
  }
  auto c = client(s);
  auto m = c.Get("/metrics");
  ASSERT_TRUE(m);
  uint64_t failovers = 0;
  for (int r = 0; r < 2; ++r) {
    const std::string key = "tessera_failovers_total{replica=\"" + std::to_string(r) + "\"} ";
    const size_t at = m->body.find(key);
    ASSERT_NE(at, std::string::npos) << m->body;
    failovers += std::stoull(m->body.substr(at + key.size()));
  }
  // A kill that lands after a request's last step is found by the next request to that replica: at least every
  // kill but the last two has been recovered from.
  EXPECT_GE(failovers, 18u);
  EXPECT_NE(m->body.find("tessera_replayed_tokens_total{replica=\"0\"}"), std::string::npos);
  const json h = get_json(s, "/health");
  EXPECT_NE(h["status"], "unavailable") << h.dump();
}

// A worker stopped with SIGSTOP (its heartbeats stop too, but the link's 3 s timeout is not what catches it): its
// step deadline runs out, the spare takes its stage, and the request in flight finishes with the undisturbed text.
TEST(ServeRecovery, AStoppedWorkerIsCaughtByItsDeadlineAndItsRequestFinishesOnTheSpare) {
  setenv("TESSERA_ISA", "scalar", 1);
  WorkerProcess a, b, spare;
  struct Resume {  // a stopped worker cannot act on the SIGTERM that stops it at the end
    const WorkerProcess& w;
    ~Resume() {
      if (w.pid() > 0) kill(w.pid(), SIGCONT);
    }
  } resume{b};
  ServeProcess s({"-m", stories(), "-t", "1", "--workers", "a=" + a.address() + ",b=" + b.address(), "--spare",
                  spare.address(), "--deadline-slack", "0.3"},
                 {{"TESSERA_ISA", "scalar"}});
  const json ask = {{"prompt", "Once upon a time"}, {"max_tokens", 400}, {"temperature", 0}};
  const std::string want = complete(s, ask, false);
  ASSERT_FALSE(want.empty());
  auto streamed = std::async(std::launch::async, [&] { return complete(s, ask, true); });
  wait_until_streaming(s);
  std::this_thread::sleep_for(std::chrono::milliseconds(30));  // a few steps, so the deadline is the median's
  kill(b.pid(), SIGSTOP);
  EXPECT_EQ(streamed.get(), want);
  EXPECT_NE(s.log().find("missed its step deadline"), std::string::npos) << s.log();
  const json h = get_json(s, "/health");
  EXPECT_EQ(h["replicas"][0]["nodes"][1]["running_on"], spare.address()) << h.dump();
  EXPECT_GE(h["replicas"][0]["failovers"].get<int>(), 1);
}

// --place 'tp(local,a),b': member a of the head's own group killed while a request streams; the head re-forms its
// group with the spare in a's place, replays, and the request finishes with the undisturbed text.
TEST(ServeRecovery, AKilledMemberOfTheHeadsGroupIsReplacedAndItsRequestFinishes) {
  setenv("TESSERA_ISA", "scalar", 1);
  TempDir dir;
  const std::string key = (dir / "k.key").string();
  ASSERT_EQ(run_command({tessera_bin().string(), "keygen", "-o", key}).exit_code, 0);
  WorkerProcess a({"--key-file", key}), b({"--key-file", key}), spare({"--key-file", key});
  ServeProcess s({"-m", stories(), "-t", "1", "-c", "1200", "--workers", "a=" + a.address() + ",b=" + b.address(),
                  "--place", "tp(local,a),b", "--key-file", key, "--spare", spare.address(), "--collective-timeout",
                  "5", "--wire-type", "f32"},
                 {{"TESSERA_ISA", "scalar"}});
  const json ask = {{"prompt", "Once upon a time"}, {"max_tokens", 1000}, {"temperature", 0}, {"ignore_eos", true}};
  const std::string want = complete(s, ask, false);
  ASSERT_FALSE(want.empty());
  auto streamed = std::async(std::launch::async, [&] { return complete(s, ask, true); });
  wait_until_streaming(s);
  std::this_thread::sleep_for(std::chrono::milliseconds(30));
  kill(a.pid(), SIGKILL);
  EXPECT_EQ(streamed.get(), want);
  EXPECT_NE(s.log().find("re-formed as its group again, led by local: " + spare.address() + " in a's place"),
            std::string::npos)
      << s.log();
}

}  // namespace
}  // namespace tessera::test
