// Sampling on a pipeline's last stage (decode_sampled) over in-process stages: the same tokens, logprobs and
// sampler state as sampling the logits on the head; Generator and Scheduler over a pipeline equal one node for
// prompts spanning many micro-batches; parts too big for one message are cut; steps of disjoint sequences in flight
// at once equal one node, and a sequence is in one step at a time.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <set>

#include "cluster/local_stage_endpoint.h"
#include "cluster/pipeline_executor.h"
#include "cluster/sampling_wire.h"
#include "engine/generator.h"
#include "engine/local_executor.h"
#include "engine/scheduler.h"
#include "support/scalar_isa.h"  // a pipeline's micro-batches give one node's logits exactly
#include "support/test_paths.h"
#include "util/error.h"

namespace tessera {
namespace {

using namespace std::chrono_literals;

std::filesystem::path stories() { return test::source_dir() / "models/stories260K.gguf"; }

std::unique_ptr<cluster::PipelineExecutor> make_pipeline(const std::vector<LayerRange>& ranges, StageOptions so,
                                                         int64_t micro_batch = 0) {
  auto full = ModelWeights::load(stories());
  auto p = std::make_unique<cluster::PipelineExecutor>(full->config(), so.n_ctx, so.n_slots,
                                                       cluster::PipelineOptions{micro_batch});
  for (size_t i = 0; i < ranges.size(); ++i) {
    auto w = ModelWeights::load(stories(), ranges[i], i == 0, i + 1 == ranges.size());
    p->add_stage(std::make_unique<cluster::LocalStageEndpoint>(fmt::format("s{}", i), static_cast<int>(i), w, so, 1,
                                                               p->completions()));
  }
  p->check_complete();
  return p;
}

std::vector<int32_t> long_prompt(size_t n) {
  std::vector<int32_t> p = {1};
  for (size_t i = 1; i < n; ++i) p.push_back(static_cast<int32_t>(260 + (i * 37) % 240));
  return p;
}

SamplerParams noisy(uint64_t seed, int32_t last_n) {
  SamplerParams s;
  s.temperature = 0.9f;
  s.top_k = 60;
  s.top_p = 0.9f;
  s.min_p = 0.02f;
  s.repeat_penalty = 1.2f;
  s.repeat_last_n = last_n;
  s.frequency_penalty = 0.3f;
  s.presence_penalty = 0.2f;
  s.seed = seed;
  return s;
}

void expect_same_pick(const SampledToken& want, const SampledToken& got, const std::string& what) {
  EXPECT_EQ(got.token, want.token) << what;
  EXPECT_EQ(got.logprob, want.logprob) << what;
  ASSERT_EQ(got.top.size(), want.top.size()) << what;
  for (size_t k = 0; k < want.top.size(); ++k) {
    EXPECT_EQ(got.top[k].token, want.top[k].token) << what;
    EXPECT_EQ(got.top[k].logprob, want.top[k].logprob) << what;
  }
}

// Two identical pipelines: one hands its logits to the head's sampler, the other samples on its last stage.
TEST(PipelineSampling, LastStagePicksWhatTheHeadWould) {
  struct Case {
    SamplerParams params;
    int32_t top_logprobs;
  };
  SamplerParams greedy;
  greedy.temperature = 0.0f;
  const std::vector<Case> cases = {{noisy(7, 8), 4}, {noisy(8, -1), -1}, {noisy(9, 0), 0}, {greedy, 3}};
  for (size_t c = 0; c < cases.size(); ++c) {
    StageOptions so{1, 256, GgmlType::F32};
    auto logits_path = make_pipeline({{0, 3}, {3, 5}}, so, 4);
    auto sampled_path = make_pipeline({{0, 3}, {3, 5}}, so, 4);
    const int32_t n_vocab = static_cast<int32_t>(logits_path->config().n_vocab);
    Sampler head(cases[c].params, n_vocab);
    Sampler remote(cases[c].params, n_vocab);
    const auto prompt = long_prompt(30);
    for (int32_t t : prompt) {
      head.accept(t);
      remote.accept(t);
    }
    Batch b;
    for (size_t i = 0; i < prompt.size(); ++i) b.add(prompt[i], 0, static_cast<int32_t>(i), i + 1 == prompt.size());
    std::vector<float> logits;
    std::vector<SampledToken> picks;
    for (int step = 0; step < 40; ++step) {
      logits_path->decode(b, logits);
      const SampledToken want = cases[c].top_logprobs >= 0 ? head.sample_with_logprobs(logits, cases[c].top_logprobs)
                                                           : SampledToken{head.sample(logits), 0.0f, {}};
      const SampleRequest req{&remote, cases[c].top_logprobs};
      sampled_path->decode_sampled(b, std::span<const SampleRequest>(&req, 1), picks);
      ASSERT_EQ(picks.size(), 1u);
      expect_same_pick(want, picks[0], fmt::format("case {} step {}", c, step));
      EXPECT_EQ(remote.draws(), head.draws());
      head.accept(want.token);
      remote.accept(picks[0].token);
      b.clear();
      b.add(want.token, 0, static_cast<int32_t>(prompt.size()) + step, true);
    }
    EXPECT_EQ(remote.history(), head.history());
  }
}

TEST(PipelineSampling, GeneratorOverAPipelineEqualsOneNodeForLongPrompts) {
  auto weights = ModelWeights::load(stories());
  auto tok = Tokenizer::from_metadata(weights->file().metadata());
  const auto prompt = long_prompt(150);  // ten micro-batches of 16 tokens over two stages
  for (const SamplerParams& params : {SamplerParams{.temperature = 0.0f}, noisy(11, 16)}) {
    StageOptions so{1, 512, GgmlType::F16};
    LocalExecutor one(weights, so, 1);
    // Micro-batches of 16 by rule, not by the stages' measured batch times (under TSan those favour fewer).
    auto two = make_pipeline({{0, 2}, {2, 5}}, so, 16);
    Batch whole;
    for (size_t i = 0; i < prompt.size(); ++i) whole.add(prompt[i], 0, static_cast<int32_t>(i), false);
    ASSERT_GT(two->split(whole).size(), 4u);
    GenerationParams gp;
    gp.n_predict = 50;
    gp.ignore_eos = true;
    gp.n_batch = 64;  // the prompt in three evaluations, the first two without an output token
    Sampler s1(params, tok->n_vocab());
    Sampler s2(params, tok->n_vocab());
    const auto a = Generator(one, *tok).generate(prompt, s1, gp, {});
    const auto b = Generator(*two, *tok).generate(prompt, s2, gp, {});
    EXPECT_EQ(b.tokens, a.tokens) << "temperature " << params.temperature;
    EXPECT_EQ(b.text, a.text);
    EXPECT_EQ(two->sequence_length(0), one.sequence_length(0));
  }
}

// Collects one request's outcome from the scheduler's thread.
struct Collector {
  std::mutex mutex;
  std::condition_variable cv;
  std::vector<SequenceDelta> deltas;
  std::optional<SequenceResult> result;
  SequenceCallbacks callbacks() {
    return {[this](const SequenceDelta& d) {
              std::lock_guard lock(mutex);
              deltas.push_back(d);
            },
            [this](const SequenceResult& r) {
              std::lock_guard lock(mutex);
              result = r;
              cv.notify_all();
            }};
  }
  SequenceResult wait() {
    std::unique_lock lock(mutex);
    if (!cv.wait_for(lock, 120s, [&] { return result.has_value(); })) throw std::runtime_error("request timed out");
    return *result;
  }
};

std::vector<std::unique_ptr<Collector>> serve_all(Executor& executor, const Tokenizer& tok,
                                                  const std::vector<SequenceRequest>& requests) {
  SchedulerOptions o;
  o.prefill_chunk = 24;  // long prompts in chunks next to running decoders: mixed batches
  Scheduler sched(executor, tok, o);
  std::vector<std::unique_ptr<Collector>> out;
  for (const auto& r : requests) {
    out.push_back(std::make_unique<Collector>());
    if (!sched.submit(r, out.back()->callbacks())) throw std::runtime_error("request refused");
  }
  for (auto& c : out) c->wait();
  return out;
}

TEST(PipelineSampling, SchedulerOverAPipelineEqualsOneNode) {
  auto weights = ModelWeights::load(stories());
  auto tok = Tokenizer::from_metadata(weights->file().metadata());
  std::vector<SequenceRequest> requests;
  for (size_t i = 0; i < 6; ++i) {
    SequenceRequest r;
    r.prompt = long_prompt(20 + 25 * i);
    r.sampler = i % 3 == 0 ? SamplerParams{.temperature = 0.0f} : noisy(100 + i, i == 4 ? -1 : 32);
    r.max_tokens = 20 + static_cast<int32_t>(i) * 5;
    r.ignore_eos = true;
    r.logprobs = i % 2 == 0 ? 3 : -1;
    requests.push_back(r);
  }
  StageOptions so{4, 512, GgmlType::F16};
  LocalExecutor one(weights, so, 1);
  auto two = make_pipeline({{0, 3}, {3, 5}}, so);
  const auto want = serve_all(one, *tok, requests);
  const auto got = serve_all(*two, *tok, requests);
  for (size_t i = 0; i < requests.size(); ++i) {
    const std::string what = fmt::format("request {}", i);
    ASSERT_EQ(got[i]->result->reason, FinishReason::Length) << what << ": " << got[i]->result->error;
    EXPECT_EQ(got[i]->result->tokens, want[i]->result->tokens) << what;
    ASSERT_EQ(got[i]->deltas.size(), want[i]->deltas.size()) << what;
    for (size_t k = 0; k < want[i]->deltas.size(); ++k) {
      const auto& w = want[i]->deltas[k];
      const auto& g = got[i]->deltas[k];
      EXPECT_EQ(g.token, w.token) << what;
      ASSERT_EQ(g.logprobs.has_value(), w.logprobs.has_value()) << what;
      if (w.logprobs) expect_same_pick(*w.logprobs, *g.logprobs, what);
    }
  }
  for (int64_t s = 0; s < 4; ++s) EXPECT_EQ(two->sequence_length(s), 0);
}

TEST(PipelineSampling, SamplingNeedsOneOutputTokenPerSequence) {
  auto p = make_pipeline({{0, 3}, {3, 5}}, {2, 64, GgmlType::F16});
  Sampler s(SamplerParams{}, static_cast<int32_t>(p->config().n_vocab));
  Batch b;
  b.add(1, 0, 0, true);
  b.add(5, 0, 1, true);
  const SampleRequest reqs[2] = {{&s, -1}, {&s, -1}};
  std::vector<SampledToken> out;
  try {
    p->decode_sampled(b, reqs, out);
    FAIL() << "two outputs of one sequence were sampled";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("several output tokens"), std::string::npos) << e.what();
  }
  EXPECT_THROW(p->decode_sampled(b, std::span<const SampleRequest>(reqs, 1), out), Error);
  EXPECT_EQ(p->sequence_length(0), 0);  // nothing ran
}

TEST(PipelineSampling, PartsTooBigForOneMessageAreCut) {
  ModelConfig c = ModelWeights::load(stories())->config();
  c.n_vocab = 1 << 20;  // 4 MiB of logits per row: 32 rows fit half a message's matrix limit
  cluster::PipelineExecutor p(c, 4096, 1, {});
  Batch b;
  for (int32_t i = 0; i < 100; ++i) b.add(1, 0, i, true);
  const auto parts = p.split(b);
  ASSERT_EQ(parts.size(), 4u);
  int32_t next = 0;
  for (const auto& part : parts) {
    EXPECT_LE(part.n_outputs(), 32);
    for (int32_t pos : part.pos) EXPECT_EQ(pos, next++);  // in order
  }
  EXPECT_EQ(next, 100);
}

// Two groups of sequences with a step each in flight through two stages (what the scheduler and bench do with a
// pipeline's two lanes) pick the same tokens as one node stepping all four sequences in one batch.
TEST(PipelineSampling, StepsInFlightEqualOneNode) {
  auto weights = ModelWeights::load(stories());
  StageOptions so{4, 128, GgmlType::F16};
  LocalExecutor one(weights, so, 1);
  auto two = make_pipeline({{0, 2}, {2, 5}}, so);
  ASSERT_EQ(two->lanes(), 2);
  EXPECT_EQ(one.lanes(), 1);
  const auto n_vocab = static_cast<int32_t>(one.config().n_vocab);
  std::vector<Sampler> want_samplers;
  std::vector<Sampler> got_samplers;
  for (int s = 0; s < 4; ++s) {
    want_samplers.emplace_back(noisy(40 + static_cast<uint64_t>(s), 16), n_vocab);
    got_samplers.emplace_back(noisy(40 + static_cast<uint64_t>(s), 16), n_vocab);
  }
  std::vector<int32_t> want_next = {1, 1, 1, 1};
  std::vector<int32_t> got_next = want_next;
  const int steps = 24;
  for (int i = 0; i < steps; ++i) {
    Batch all;
    std::vector<SampleRequest> reqs;
    for (int s = 0; s < 4; ++s) {
      all.add(want_next[static_cast<size_t>(s)], s, i, true);
      reqs.push_back({&want_samplers[static_cast<size_t>(s)], -1});
    }
    std::vector<SampledToken> picks;
    one.decode_sampled(all, reqs, picks);
    for (int s = 0; s < 4; ++s) {
      want_next[static_cast<size_t>(s)] = picks[static_cast<size_t>(s)].token;
      want_samplers[static_cast<size_t>(s)].accept(picks[static_cast<size_t>(s)].token);
    }
  }
  // Group g holds sequences g and g + 2; each group's next step starts as soon as its last one is back.
  std::map<uint64_t, int> group_of;
  std::vector<int> stepped = {0, 0};
  const auto submit = [&](int g) {
    Batch b;
    std::vector<SampleRequest> reqs;
    for (int s = g; s < 4; s += 2) {
      b.add(got_next[static_cast<size_t>(s)], s, stepped[static_cast<size_t>(g)], true);
      reqs.push_back({&got_samplers[static_cast<size_t>(s)], -1});
    }
    group_of[two->submit_step(b, reqs)] = g;
  };
  submit(0);
  submit(1);
  EXPECT_EQ(group_of.size(), 2u);  // both in flight before either is collected
  while (!group_of.empty()) {
    StepResult r = two->collect_step();
    ASSERT_TRUE(r.error.empty()) << r.error;
    const int g = group_of.at(r.ticket);
    group_of.erase(r.ticket);
    ASSERT_EQ(r.sampled.size(), 2u);
    for (int k = 0; k < 2; ++k) {
      const auto s = static_cast<size_t>(g + 2 * k);
      got_next[s] = r.sampled[static_cast<size_t>(k)].token;
      got_samplers[s].accept(got_next[s]);
    }
    if (++stepped[static_cast<size_t>(g)] < steps) submit(g);
  }
  EXPECT_EQ(got_next, want_next);
  for (int64_t s = 0; s < 4; ++s) EXPECT_EQ(two->sequence_length(s), steps);
}

TEST(PipelineSampling, ASequenceIsInOneStepAtATime) {
  auto p = make_pipeline({{0, 3}, {3, 5}}, {2, 64, GgmlType::F16});
  Sampler s0(SamplerParams{}, static_cast<int32_t>(p->config().n_vocab));
  Sampler s1(SamplerParams{}, static_cast<int32_t>(p->config().n_vocab));
  Batch a;
  a.add(1, 0, 0, true);
  const SampleRequest r0{&s0, -1};
  const uint64_t ticket = p->submit_step(a, std::span<const SampleRequest>(&r0, 1));
  const auto expect_error = [](const std::function<void()>& f, const std::string& words) {
    try {
      f();
      FAIL() << "no error; expected one saying '" << words << "'";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(words), std::string::npos) << e.what();
    }
  };
  Batch again;
  again.add(5, 0, 1, true);
  again.add(1, 1, 0, true);
  const SampleRequest both[2] = {{&s0, -1}, {&s1, -1}};
  expect_error([&] { p->submit_step(again, both); }, "already in a step in flight");
  expect_error([&] { p->clear_sequence(0); }, "while a step uses it");
  expect_error([&] { p->truncate_sequence(0, 0); }, "while a step uses it");
  // The other sequence may step meanwhile.
  Batch other;
  other.add(1, 1, 0, true);
  const SampleRequest r1{&s1, -1};
  const uint64_t ticket1 = p->submit_step(other, std::span<const SampleRequest>(&r1, 1));
  std::set<uint64_t> back;
  for (int i = 0; i < 2; ++i) {
    const StepResult r = p->collect_step();
    EXPECT_TRUE(r.error.empty()) << r.error;
    EXPECT_EQ(r.sampled.size(), 1u);
    back.insert(r.ticket);
  }
  EXPECT_EQ(back, (std::set<uint64_t>{ticket, ticket1}));
  EXPECT_EQ(p->sequence_length(0), 1);
  EXPECT_EQ(p->sequence_length(1), 1);
  expect_error([&] { p->collect_step(); }, "no step is in flight");
  p->clear_sequence(0);  // free again
  EXPECT_EQ(p->sequence_length(0), 0);
}

}  // namespace
}  // namespace tessera

namespace tessera {
namespace {

// A sampler state from the wire that claims more draws than any generation makes is refused at once: catching up
// discards draws one by one, and 2^60 of them would stall a worker for years.
TEST(PipelineSampling, ImpossibleDrawCountsAreRefused) {
  net::SamplingParams w;
  w.seq = 3;
  w.draws = 1000;
  EXPECT_EQ(cluster::from_wire(w).state.draws, 1000u);
  w.draws = uint64_t{1} << 60;
  try {
    cluster::from_wire(w);
    FAIL() << "2^60 draws accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("sequence 3 claims"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace tessera
