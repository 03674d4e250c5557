// Recovery by replay with real `tessera worker` processes on loopback: a pipeline of two workers plus a spare
// survives 20 workers killed mid-generation, and a worker stopped with SIGSTOP is abandoned within twice its step
// deadline; in both the tokens (greedy and seeded) equal an undisturbed run's.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <functional>
#include <map>
#include <memory>

#include "cluster/pipeline_executor.h"
#include "cluster/remote_stage_endpoint.h"
#include "cluster/stage_recovery.h"
#include "support/worker_process.h"

namespace tessera {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

// Scalar kernels in this process and the workers it starts: a replayed prompt chunk then gives the KV cache the
// original steps gave (SIMD kernels tile batch sizes differently and round differently).
class ScalarKernels : public ::testing::Environment {
 public:
  void SetUp() override { setenv("TESSERA_ISA", "scalar", 1); }
};
const auto* const kScalarKernels = ::testing::AddGlobalTestEnvironment(new ScalarKernels);

std::filesystem::path stories() { return test::source_dir() / "models/stories260K.gguf"; }

constexpr int64_t kSlots = 2;
constexpr int64_t kCtx = 128;

// Workers at fixed addresses, so that a killed one can be started again where it was.
class Workers {
 public:
  explicit Workers(int n) {
    for (int i = 0; i < n; ++i) {
      auto w = std::make_unique<test::WorkerProcess>();
      const std::string address = w->address();
      order_.push_back(address);
      by_address_[address] = std::move(w);
    }
  }
  ~Workers() {
    // A stopped worker cannot act on SIGTERM. (A stopped-and-reaped one has no pid: never kill(-1, ...).)
    for (auto& [address, w] : by_address_) {
      if (w->pid() > 0) kill(w->pid(), SIGCONT);
    }
  }
  const std::string& operator[](size_t i) const { return order_.at(i); }
  test::WorkerProcess& at(const std::string& address) { return *by_address_.at(address); }
  void kill_and_restart(const std::string& address) {
    by_address_.at(address)->stop(SIGKILL);
    by_address_[address] = std::make_unique<test::WorkerProcess>(std::vector<std::string>{}, address);
  }

 private:
  std::vector<std::string> order_;
  std::map<std::string, std::unique_ptr<test::WorkerProcess>> by_address_;
};

cluster::RemoteStageOptions remote_options() {
  cluster::RemoteStageOptions o;
  o.stage = {kSlots, kCtx, GgmlType::F32};
  o.wire = net::WireType::F32;
  o.connect_timeout = 3000ms;
  o.measure_bytes = 0;
  return o;
}

// Stage 0 (layers 0-2) on workers[0], stage 1 (layers 3-4) on workers[1], and a spare: workers[2] by default.
struct Pipeline {
  std::shared_ptr<const ModelWeights> model = ModelWeights::load(stories());
  std::shared_ptr<cluster::WorkerPool> pool = std::make_shared<cluster::WorkerPool>();
  std::unique_ptr<cluster::PipelineExecutor> p;

  Pipeline(const Workers& w, cluster::PipelineOptions options, std::string spare = {}) {
    p = std::make_unique<cluster::PipelineExecutor>(model->config(), kCtx, kSlots, options);
    const auto o = remote_options();
    p->add_stage(std::make_unique<cluster::RemoteStageEndpoint>(w[0], w[0], nullptr, 0, *model, LayerRange{0, 3}, true,
                                                                false, o, p->completions()));
    p->add_stage(std::make_unique<cluster::RemoteStageEndpoint>(w[1], w[1], nullptr, 1, *model, LayerRange{3, 5}, false,
                                                                true, o, p->completions()));
    pool->add_busy(w[0]);
    pool->add_busy(w[1]);
    pool->add_spare(spare.empty() ? w[2] : spare);
    cluster::ReplacementOptions ro;
    ro.remote = o;
    ro.local_stage = o.stage;
    auto replacer = std::make_shared<cluster::StageReplacer>(model, pool, ro);
    p->set_recovery([replacer](int index, const cluster::StageEndpoint& failed, bool first, bool last,
                               cluster::CompletionQueue& done, Clock::time_point deadline) {
      return replacer->replace(index, failed, first, last, done, deadline);
    });
  }
};

// Two sequences decoded together, one greedy and one sampled with a seed; `after_submit(step)` runs while each
// decode step is in flight. Returns each sequence's tokens.
std::vector<std::vector<int32_t>> generate(cluster::PipelineExecutor& p, int steps,
                                           const std::function<void(int)>& after_submit,
                                           const std::function<void()>& before_prompt = {}) {
  SamplerParams greedy;
  greedy.temperature = 0;
  SamplerParams seeded;
  seeded.seed = 7;
  const auto n_vocab = static_cast<int32_t>(p.config().n_vocab);
  Sampler s0(greedy, n_vocab), s1(seeded, n_vocab);
  const std::vector<std::vector<int32_t>> prompts = {{1, 403, 407, 263, 31}, {1, 68, 30, 300}};
  Batch prefill;
  for (int32_t seq = 0; seq < 2; ++seq) {
    const auto& pr = prompts[static_cast<size_t>(seq)];
    for (size_t i = 0; i < pr.size(); ++i) prefill.add(pr[i], seq, static_cast<int32_t>(i), i + 1 == pr.size());
  }
  std::vector<SampleRequest> requests = {{&s0, -1}, {&s1, -1}};
  std::vector<SampledToken> picked;
  if (before_prompt) before_prompt();
  p.decode_sampled(prefill, requests, picked);
  std::vector<std::vector<int32_t>> out(2);
  for (int step = 0; step < steps; ++step) {
    Batch b;
    for (size_t seq = 0; seq < 2; ++seq) {
      out[seq].push_back(picked[seq].token);
      b.add(picked[seq].token, static_cast<int32_t>(seq),
            static_cast<int32_t>(prompts[seq].size() + out[seq].size() - 1), true);
    }
    p.submit_step(b, requests);
    after_submit(step);
    StepResult r = p.collect_step();
    EXPECT_TRUE(r.error.empty()) << r.error;
    if (!r.error.empty()) return out;
    picked = std::move(r.sampled);
  }
  return out;
}

TEST(WorkerRecovery, TwentyKilledWorkersCostNoTokenAndChangeNone) {
  Workers w(3);
  std::vector<std::vector<int32_t>> undisturbed;
  {
    Pipeline ref(w, {});
    undisturbed = generate(*ref.p, 44, [](int) {});
  }
  Pipeline pipe(w, {});
  int kills = 0;
  const auto got = generate(*pipe.p, 44, [&](int step) {
    if (step % 2 != 1 || kills == 20) return;
    // Alternate between the stages, killing whichever worker holds that stage now, and start it again so that
    // it is there for a later failover.
    const std::string victim = pipe.p->stage(static_cast<size_t>(kills % 2)).where();
    w.kill_and_restart(victim);
    ++kills;
  });
  EXPECT_EQ(kills, 20);
  EXPECT_EQ(got, undisturbed);
  EXPECT_EQ(pipe.p->failovers(), 20u);
  EXPECT_GT(pipe.p->replayed_tokens(), 20u * 9u);  // at least both prompts each time
  EXPECT_FALSE(pipe.p->recovering());
}

TEST(WorkerRecovery, AStoppedWorkerIsAbandonedWithinTwiceItsDeadline) {
  Workers w(3);
  std::vector<std::vector<int32_t>> undisturbed;
  {
    Pipeline ref(w, {});
    undisturbed = generate(*ref.p, 16, [](int) {});
  }
  cluster::PipelineOptions o;
  o.deadline.factor = 4;
  o.deadline.slack_seconds = 0.3;
  o.deadline.min_samples = 4;
  Pipeline pipe(w, o);
  Clock::time_point stopped;
  double waited = 0;
  const auto got = generate(*pipe.p, 16, [&](int step) {
    if (step == 8) {
      kill(w.at(w[1]).pid(), SIGSTOP);  // stage 1's worker: its step never comes back, its heartbeats stop
      stopped = Clock::now();
    } else if (step == 9) {
      waited = std::chrono::duration<double>(Clock::now() - stopped).count();
    }
  });
  EXPECT_EQ(got, undisturbed);
  EXPECT_EQ(pipe.p->failovers(), 1u);
  const auto miss = pipe.p->last_deadline_miss();
  ASSERT_GT(miss.limit_seconds, 0.0) << "the stopped worker was not caught by its deadline";
  EXPECT_LE(miss.took_seconds, 2 * miss.limit_seconds);
  EXPECT_LT(miss.limit_seconds, 1.5);  // 4 x a few ms + 0.3 s on loopback, far under the 3 s heartbeat timeout
  EXPECT_LT(waited, 2 * miss.limit_seconds + 5.0);  // detection, a spare loaded, the sequences replayed
  EXPECT_EQ(pipe.p->stage(1).where(), w[2]);        // the spare took the stage
}

// --spare local: with no worker left to take it, the head runs the stage in its own memory.
TEST(WorkerRecovery, TheHeadRunsTheStageWhenTheSpareIsLocal) {
  Workers w(2);
  std::vector<std::vector<int32_t>> undisturbed;
  {
    Pipeline ref(w, {}, cluster::kLocalSpare);
    undisturbed = generate(*ref.p, 12, [](int) {});
  }
  Pipeline pipe(w, {}, cluster::kLocalSpare);
  const auto got = generate(*pipe.p, 12, [&](int step) {
    if (step == 5) w.at(w[1]).stop(SIGKILL);  // not restarted: only the local spare is free
  });
  EXPECT_EQ(got, undisturbed);
  EXPECT_EQ(pipe.p->failovers(), 1u);
  EXPECT_EQ(pipe.p->stage(1).node(), "local");
  EXPECT_EQ(pipe.p->stage(1).where(), "");
}

// The prompts' step runs on stage 0 and fails on stage 1, whose worker is gone: stage 0 holds positions of
// sequences the head has no history for yet. The replay drops them there too, and the prompts run again.
TEST(WorkerRecovery, AFailedFirstStepLeavesNoPositionsOnTheSurvivingStage) {
  Workers w(3);
  std::vector<std::vector<int32_t>> undisturbed;
  {
    Pipeline ref(w, {});
    undisturbed = generate(*ref.p, 6, [](int) {});
  }
  Pipeline pipe(w, {});
  const auto got = generate(
      *pipe.p, 6, [](int) {}, [&] { w.at(w[1]).stop(SIGKILL); });
  EXPECT_EQ(got, undisturbed);
  EXPECT_EQ(pipe.p->failovers(), 1u);
}

}  // namespace
}  // namespace tessera
