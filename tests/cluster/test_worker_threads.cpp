// Workers as threads of the test process, reached over loopback links by a head's RemoteStageEndpoints: greedy
// decoding over two remote stages equals the reference, and a head that goes away frees the worker for the next.
// One process holds both ends of every link, so the ThreadSanitizer tree sees the worker's session, the
// transport's heartbeats and the endpoint's receiver together.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <fstream>
#include <nlohmann/json.hpp>
#include <thread>

#include "cluster/pipeline_executor.h"
#include "cluster/remote_stage_endpoint.h"
#include "cluster/worker.h"
#include "support/test_paths.h"

namespace tessera {
namespace {

class WorkerThread {
 public:
  WorkerThread() : worker_(options()), thread_([this] { worker_.serve(stop_); }) {}
  ~WorkerThread() {
    stop_ = true;
    thread_.join();
  }
  WorkerThread(const WorkerThread&) = delete;
  WorkerThread& operator=(const WorkerThread&) = delete;
  std::string address() const { return worker_.endpoint(); }

 private:
  static cluster::WorkerOptions options() {
    cluster::WorkerOptions o;
    o.listen = "127.0.0.1:0";
    o.threads = 1;
    o.copy_weights = false;
    return o;
  }
  cluster::Worker worker_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

std::vector<int32_t> greedy_over(const std::vector<std::string>& addresses, int32_t n_tokens) {
  const auto path = test::shared_dir() / "models/stories260K.gguf";
  auto full = ModelWeights::load(path);
  const StageOptions so{1, 256, GgmlType::F16};
  cluster::PipelineExecutor p(full->config(), so.n_ctx, so.n_slots, cluster::PipelineOptions{});
  const int64_t n_layer = full->config().n_layer;
  for (size_t i = 0; i < addresses.size(); ++i) {
    const LayerRange layers{n_layer * static_cast<int64_t>(i) / static_cast<int64_t>(addresses.size()),
                            n_layer * static_cast<int64_t>(i + 1) / static_cast<int64_t>(addresses.size())};
    cluster::RemoteStageOptions ro;
    ro.stage = so;
    ro.threads = 1;
    ro.measure_bytes = 0;
    p.add_stage(std::make_unique<cluster::RemoteStageEndpoint>(fmt::format("w{}", i), addresses[i], nullptr,
                                                               static_cast<int>(i), *full, layers, i == 0,
                                                               i + 1 == addresses.size(), ro, p.completions()));
  }
  p.check_complete();
  std::vector<float> logits;
  int32_t token = 1;
  std::vector<int32_t> got;
  for (int32_t pos = 0; pos < n_tokens; ++pos) {
    Batch b;
    b.add(token, 0, pos, true);
    p.decode(b, logits);
    token = static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
    got.push_back(token);
  }
  return got;
}

TEST(WorkerThreads, GreedyOverTwoRemoteStagesEqualsTheReference) {
  std::ifstream in(test::shared_dir() / "models/reference/stories260K.greedy.json");
  const auto expected = nlohmann::json::parse(in)["generated_tokens"].get<std::vector<int32_t>>();
  WorkerThread a, b;
  const auto got = greedy_over({a.address(), b.address()}, 60);
  EXPECT_EQ(got, std::vector<int32_t>(expected.begin(), expected.begin() + 60));
  // The first head is gone: the same workers serve a second one.
  EXPECT_EQ(greedy_over({b.address(), a.address()}, 20), std::vector<int32_t>(expected.begin(), expected.begin() + 20));
}

}  // namespace
}  // namespace tessera
