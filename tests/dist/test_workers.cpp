// Real `tessera worker` processes on loopback: a split model gives the single-node output; warm caches and local
// files send no weights; wrong keys, busy workers, killed workers and too little memory are clear errors naming
// the worker; a worker serves the next head after one goes away.
#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "dist/keys.h"
#include "dist/local_stage_endpoint.h"
#include "engine/local_executor.h"
#include "dist/pipeline_executor.h"
#include "dist/remote_stage_endpoint.h"
#include "util/error.h"
#include "worker_process.h"

namespace tessera {
namespace {

using namespace std::chrono_literals;

std::filesystem::path stories() { return test::source_dir() / "models/stories260K.gguf"; }

test::CommandResult tessera(std::vector<std::string> args) {
  args.insert(args.begin(), test::tessera_bin().string());
  return test::run_command(args);
}

std::unique_ptr<dist::RemoteStageEndpoint> remote(const test::WorkerProcess& w, const ModelWeights& model,
                                                  CompletionQueue& done, LayerRange layers, bool first, bool last,
                                                  const dist::ClusterKey* key = nullptr) {
  dist::RemoteStageOptions o;
  o.stage = {1, 64, GgmlType::F32};
  o.wire = dist::WireType::F32;
  o.connect_timeout = 3000ms;
  return std::make_unique<dist::RemoteStageEndpoint>("w", w.address(), key, 0, model, layers, first, last, o, done);
}

TEST(Workers, TwoAndThreeNodeRunsEqualOneNode) {
  test::WorkerProcess a, b;
  const auto one = tessera({"run", "-p", "Once upon a time", "-n", "60", "--temp", "0"});
  ASSERT_EQ(one.exit_code, 0) << one.err;
  const auto two = tessera({"run", "-p", "Once upon a time", "-n", "60", "--temp", "0", "--workers",
                            "a=" + a.address() + ",b=" + b.address()});
  ASSERT_EQ(two.exit_code, 0) << two.err;
  EXPECT_EQ(two.out, one.out);
  EXPECT_NE(two.err.find("pipeline: 0-2@a,3-4@b"), std::string::npos) << two.err;
  const auto three = tessera({"run", "-p", "Once upon a time", "-n", "60", "--temp", "0", "--workers",
                              "a=" + a.address() + ",b=" + b.address(), "--split", "0-1@local,2-3@a,4-4@b",
                              "--wire-type", "f32"});
  ASSERT_EQ(three.exit_code, 0) << three.err;
  EXPECT_EQ(three.out, one.out);
}

TEST(Workers, IdenticalLogitsWithF32OnTheWire) {
  test::WorkerProcess w;
  auto model = ModelWeights::load(stories());
  PipelineExecutor p(model->config(), 64, 1, {4});
  p.add_stage(std::make_unique<LocalStageEndpoint>(
      "local", 0, ModelWeights::load(stories(), {0, 3}, true, false), StageOptions{1, 64, GgmlType::F32}, 1,
      p.completions()));
  dist::RemoteStageOptions o;
  o.stage = {1, 64, GgmlType::F32};
  o.wire = dist::WireType::F32;
  p.add_stage(std::make_unique<dist::RemoteStageEndpoint>("w", w.address(), nullptr, 1, *model, LayerRange{3, 5},
                                                          false, true, o, p.completions()));
  LocalExecutor local(model, {1, 64, GgmlType::F32}, 1);
  Batch b;
  const std::vector<int32_t> prompt = {1, 403, 407, 261, 378, 383, 286, 261, 376, 298};
  for (size_t i = 0; i < prompt.size(); ++i) b.add(prompt[i], 0, static_cast<int32_t>(i), true);
  std::vector<float> x, y;
  local.decode(b, x);
  p.decode(b, y);
  EXPECT_EQ(x, y);
}

TEST(Workers, WarmCacheAndLocalFileSendNoWeights) {
  test::TempDir dir;
  std::filesystem::create_directories(dir / "models");
  std::filesystem::copy_file(stories(), dir / "models/stories260K.gguf");
  auto model = ModelWeights::load(stories());
  CompletionQueue done;
  {
    test::WorkerProcess cached({"--cache", (dir / "cache").string()});
    auto first = remote(cached, *model, done, {0, 5}, true, true);
    EXPECT_GT(first->load_report().weight_bytes_sent, 1000000u);
    first.reset();
    auto second = remote(cached, *model, done, {0, 5}, true, true);
    EXPECT_EQ(second->load_report().weight_bytes_sent, 0u);
    EXPECT_LT(second->link_stats().bytes_sent, 1000000u);
  }
  {
    // A new worker process with the same cache folder: still nothing to send.
    test::WorkerProcess restarted({"--cache", (dir / "cache").string()});
    auto again = remote(restarted, *model, done, {2, 5}, false, true);
    EXPECT_EQ(again->load_report().weight_bytes_sent, 0u);
  }
  test::WorkerProcess with_file({"--models", (dir / "models").string()});
  auto mapped = remote(with_file, *model, done, {0, 5}, true, true);
  EXPECT_EQ(mapped->load_report().weight_bytes_sent, 0u);
  EXPECT_LT(mapped->link_stats().bytes_sent, 1000000u);
}

TEST(Workers, BusyWorkerRefusesASecondHeadAndServesTheNext) {
  test::WorkerProcess w;
  auto model = ModelWeights::load(stories());
  CompletionQueue done;
  auto first = remote(w, *model, done, {0, 5}, true, true);
  try {
    remote(w, *model, done, {0, 5}, true, true);
    FAIL() << "a second head was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("busy: serving head"), std::string::npos) << e.what();
  }
  first.reset();  // the head goes away
  std::this_thread::sleep_for(300ms);
  auto next = remote(w, *model, done, {0, 5}, true, true);
  EXPECT_GT(next->load_report().weight_bytes_sent, 1000000u);  // no cache: streamed again (shared content once)
}

TEST(Workers, KilledWorkerIsAClearErrorWithinSeconds) {
  test::WorkerProcess w;
  auto model = ModelWeights::load(stories());
  PipelineExecutor p(model->config(), 64, 1, {});
  p.add_stage(std::make_unique<LocalStageEndpoint>(
      "local", 0, ModelWeights::load(stories(), {0, 3}, true, false), StageOptions{1, 64, GgmlType::F16}, 1,
      p.completions()));
  dist::RemoteStageOptions o;
  o.stage = {1, 64, GgmlType::F16};
  p.add_stage(std::make_unique<dist::RemoteStageEndpoint>("b", w.address(), nullptr, 1, *model, LayerRange{3, 5},
                                                          false, true, o, p.completions()));
  std::vector<float> logits;
  Batch b;
  b.add(1, 0, 0, true);
  p.decode(b, logits);
  w.stop(SIGKILL);
  const auto t0 = std::chrono::steady_clock::now();
  Batch next;
  next.add(403, 0, 1, true);
  try {
    p.decode(next, logits);
    FAIL() << "decode succeeded without its worker";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("worker b"), std::string::npos) << e.what();
  }
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 10s);
}

TEST(Workers, WrongKeyAndTooLittleMemoryAreClearErrors) {
  test::TempDir dir;
  ASSERT_EQ(tessera({"keygen", "-o", (dir / "a.key").string()}).exit_code, 0);
  ASSERT_EQ(tessera({"keygen", "-o", (dir / "b.key").string()}).exit_code, 0);
  test::WorkerProcess keyed({"--key-file", (dir / "a.key").string()});
  auto model = ModelWeights::load(stories());
  CompletionQueue done;
  const auto wrong = dist::load_cluster_key((dir / "b.key").string());
  const auto t0 = std::chrono::steady_clock::now();
  try {
    remote(keyed, *model, done, {0, 5}, true, true, &wrong);
    FAIL() << "a head with the wrong key was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("worker w"), std::string::npos) << e.what();
  }
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 10s);
  const auto right = dist::load_cluster_key((dir / "a.key").string());
  auto ok = remote(keyed, *model, done, {0, 5}, true, true, &right);
  EXPECT_TRUE(ok->connection().encrypted());
  ok.reset();

  test::WorkerProcess small({"--mem-limit", "100000"});
  try {
    remote(small, *model, done, {0, 5}, true, true);
    FAIL() << "the stage should not fit";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("not enough memory"), std::string::npos) << e.what();
  }
  EXPECT_TRUE(small.running());
}

TEST(Workers, UnreachableWorkerAndBadWorkerListsAreClearErrors) {
  auto r = tessera({"run", "-p", "x", "-n", "2", "--workers", "a=127.0.0.1:1"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("worker a (127.0.0.1:1)"), std::string::npos) << r.err;
  auto bad = tessera({"run", "-p", "x", "--workers", "a=127.0.0.1:5,a=127.0.0.1:6"});
  EXPECT_NE(bad.err.find("the name 'a' is used twice"), std::string::npos) << bad.err;
  test::WorkerProcess w;
  auto unknown = tessera({"run", "-p", "x", "--workers", "a=" + w.address(), "--split", "0-2@a,3-4@zz"});
  EXPECT_EQ(unknown.exit_code, 1);
  EXPECT_NE(unknown.err.find("zz"), std::string::npos) << unknown.err;
  EXPECT_NE(unknown.err.find("local"), std::string::npos) << unknown.err;  // lists the valid names
}

}  // namespace
}  // namespace tessera
