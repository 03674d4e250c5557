// The continuous-batching scheduler against Generator (what `tessera run` uses): alone and batched outputs equal,
// cancellation frees the slot, a full queue refuses, stop strings, token and context limits, a long prompt does
// not stall decoding sequences, logprobs, requests that can never run, and an executor with two lanes (as a
// pipeline has) getting two steps over disjoint sequences in flight, and requests moved to another scheduler when
// their executor fails for good.
#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <deque>
#include <future>
#include <mutex>
#include <set>

#include "engine/generator.h"
#include "engine/local_executor.h"
#include "engine/scheduler.h"
#include "support/scalar_isa.h"  // batched rows equal a request run alone
#include "support/test_paths.h"
#include "util/error.h"

namespace tessera {
namespace {

using namespace std::chrono_literals;

std::filesystem::path stories() { return test::source_dir() / "models/stories260K.gguf"; }

struct Model {
  explicit Model(const std::filesystem::path& path, int64_t n_slots = 4, int64_t n_ctx = 512)
      : weights(ModelWeights::load(path)),
        tokenizer(Tokenizer::from_metadata(weights->file().metadata())),
        executor(weights, StageOptions{n_slots, n_ctx, GgmlType::F16}, 1) {}
  std::shared_ptr<const ModelWeights> weights;
  std::unique_ptr<Tokenizer> tokenizer;
  LocalExecutor executor;
};

// Forwards to a real executor; a test can hold every forward pass at a gate to line events up.
class GatedExecutor : public Executor {
 public:
  explicit GatedExecutor(Executor& inner) : inner_(inner) {}
  const ModelConfig& config() const override { return inner_.config(); }
  int64_t n_ctx() const override { return inner_.n_ctx(); }
  int64_t n_slots() const override { return inner_.n_slots(); }
  void decode(const Batch& batch, std::vector<float>& logits) override {
    {
      std::unique_lock lock(mutex_);
      ++waiting_;
      changed_.notify_all();
      changed_.wait(lock, [&] { return open_; });
      --waiting_;
    }
    inner_.decode(batch, logits);
  }
  void clear_sequence(int64_t seq) override { inner_.clear_sequence(seq); }
  void truncate_sequence(int64_t seq, int64_t n) override { inner_.truncate_sequence(seq, n); }
  int64_t sequence_length(int64_t seq) const override { return inner_.sequence_length(seq); }

  void close() {
    std::lock_guard lock(mutex_);
    open_ = false;
  }
  void open() {
    std::lock_guard lock(mutex_);
    open_ = true;
    changed_.notify_all();
  }
  // Waits until a forward pass is held at the closed gate.
  bool wait_held(std::chrono::milliseconds timeout) {
    std::unique_lock lock(mutex_);
    return changed_.wait_for(lock, timeout, [&] { return waiting_ > 0; });
  }

 private:
  Executor& inner_;
  std::mutex mutex_;
  std::condition_variable changed_;
  bool open_ = true;
  int waiting_ = 0;
};

// Collects one request's deltas and result; wait() blocks until on_done (bounded).
struct Collector {
  std::mutex mutex;
  std::condition_variable cv;
  std::vector<SequenceDelta> deltas;
  std::string text;
  std::optional<SequenceResult> result;
  std::function<void(const SequenceDelta&)> also;  // extra per-delta hook (called under the lock)

  SequenceCallbacks callbacks() {
    return {[this](const SequenceDelta& d) {
              std::lock_guard lock(mutex);
              deltas.push_back(d);
              text += d.text;
              if (also) also(d);
              cv.notify_all();
            },
            [this](const SequenceResult& r) {
              std::lock_guard lock(mutex);
              result = r;
              cv.notify_all();
            }};
  }
  SequenceResult wait(std::chrono::seconds timeout = 60s) {
    std::unique_lock lock(mutex);
    if (!cv.wait_for(lock, timeout, [&] { return result.has_value(); })) throw std::runtime_error("request timed out");
    return *result;
  }
  bool wait_deltas(size_t n, std::chrono::seconds timeout = 30s) {
    std::unique_lock lock(mutex);
    return cv.wait_for(lock, timeout, [&] { return deltas.size() >= n || result.has_value(); });
  }
};

SequenceRequest request(const Tokenizer& tok, const std::string& text, uint64_t seed, int32_t max_tokens) {
  SequenceRequest r;
  r.prompt = tok.encode(text, true, true);
  r.sampler.seed = seed;
  r.max_tokens = max_tokens;
  return r;
}

// What `tessera run` produces for the same request: Generator on a fresh single-slot executor.
GenerationResult run_alone(const std::filesystem::path& path, const SequenceRequest& r, int64_t n_ctx = 512) {
  Model m(path, 1, n_ctx);
  Sampler sampler(r.sampler, m.tokenizer->n_vocab());
  Generator gen(m.executor, *m.tokenizer);
  GenerationParams gp;
  gp.n_predict = r.max_tokens;
  gp.stop = r.stop;
  gp.ignore_eos = r.ignore_eos;
  return gen.generate(r.prompt, sampler, gp, {}, r.strip_leading_space);
}

void expect_same(const GenerationResult& want, const SequenceResult& got, const std::string& what) {
  EXPECT_EQ(got.tokens, want.tokens) << what;
  EXPECT_EQ(got.text, want.text) << what;
  const FinishReason reasons[] = {FinishReason::EndOfGeneration, FinishReason::Length, FinishReason::StopString,
                                  FinishReason::ContextFull};
  EXPECT_EQ(got.reason, reasons[static_cast<int>(want.reason)]) << what;
}

TEST(Scheduler, AloneEqualsGenerator) {
  Model m(stories());
  Scheduler sched(m.executor, *m.tokenizer, {});
  for (uint64_t seed : {1u, 2u, 3u}) {
    auto r = request(*m.tokenizer, "Once upon a time", seed, 60);
    r.sampler.temperature = seed == 3 ? 0.0f : 1.0f;
    Collector c;
    ASSERT_NE(sched.submit(r, c.callbacks()), nullptr);
    const auto got = c.wait();
    expect_same(run_alone(stories(), r), got, "seed " + std::to_string(seed));
    EXPECT_EQ(c.text, got.text);  // the deltas add up to the text
    EXPECT_EQ(got.n_prompt, static_cast<int64_t>(r.prompt.size()));
    EXPECT_GT(got.first_token_seconds, 0.0);
  }
}

TEST(Scheduler, BatchedEqualsAloneOnStoriesAndQuantizedMoe) {
  const std::vector<std::string> prompts = {
      "Once upon a time",      "The cat", "Lily and Ben went to the park.", "", "One day, a big dog",
      "Tom had a red ball. He"};
  for (const auto& path : {stories(), test::shared_dir() / "fixtures/models/qwen3moe-q4_k_m.gguf"}) {
    Model m(path, 4);
    SchedulerOptions o;
    o.prefill_chunk = 3;  // prompts in several chunks, next to running decoders
    Scheduler sched(m.executor, *m.tokenizer, o);
    std::vector<SequenceRequest> requests;
    std::vector<std::unique_ptr<Collector>> collectors;
    for (size_t i = 0; i < prompts.size(); ++i) {
      auto r = request(*m.tokenizer, prompts[i], 100 + i, 24 + static_cast<int32_t>(i) * 7);
      if (i % 3 == 1) r.sampler.temperature = 0.0f;
      if (i == 2) r.stop = {"."};
      if (i == 4) {
        r.sampler.frequency_penalty = 0.5f;
        r.sampler.repeat_last_n = -1;
      }
      r.strip_leading_space = prompts[i].empty();
      requests.push_back(r);
      collectors.push_back(std::make_unique<Collector>());
    }
    // Six requests on four slots at once: two wait in the queue and join when slots free up.
    for (size_t i = 0; i < requests.size(); ++i)
      ASSERT_NE(sched.submit(requests[i], collectors[i]->callbacks()), nullptr);
    for (size_t i = 0; i < requests.size(); ++i) {
      expect_same(run_alone(path, requests[i]), collectors[i]->wait(),
                  path.filename().string() + " #" + std::to_string(i));
    }
    const auto st = sched.stats();
    EXPECT_EQ(st.accepted, requests.size());
    EXPECT_EQ(st.active + st.queued, 0);
    uint64_t generated = 0;
    for (auto& c : collectors) generated += c->result->tokens.size();
    EXPECT_EQ(st.generated_tokens, generated);
    for (int64_t s = 0; s < 4; ++s) EXPECT_EQ(m.executor.sequence_length(s), 0) << "slot " << s << " not freed";
  }
}

TEST(Scheduler, CancellationFreesTheSlot) {
  // A context far longer than the test waits for: the endless request can only end by being cancelled.
  Model m(stories(), 1, 32768);
  Scheduler sched(m.executor, *m.tokenizer, {});
  auto endless = request(*m.tokenizer, "Once upon a time", 5, -1);
  endless.ignore_eos = true;
  Collector a;
  auto handle = sched.submit(endless, a.callbacks());
  ASSERT_NE(handle, nullptr);
  ASSERT_TRUE(a.wait_deltas(5));
  handle->cancel();
  const auto ra = a.wait();
  EXPECT_EQ(ra.reason, FinishReason::Cancelled);
  EXPECT_LT(ra.tokens.size(), 32000u);
  // The only slot is free again: the cache is empty and the next request runs as if alone.
  EXPECT_EQ(m.executor.sequence_length(0), 0);
  auto next = request(*m.tokenizer, "The dog", 9, 30);
  Collector b;
  ASSERT_NE(sched.submit(next, b.callbacks()), nullptr);
  expect_same(run_alone(stories(), next), b.wait(), "after cancel");
  const auto st = sched.stats();
  EXPECT_EQ(st.finished[static_cast<int>(FinishReason::Cancelled)], 1u);
  EXPECT_EQ(st.active, 0);
}

TEST(Scheduler, FullQueueRefusesAndQueuedRequestsCanBeCancelled) {
  Model m(stories(), 1);
  GatedExecutor gate(m.executor);
  SchedulerOptions o;
  o.max_queue = 2;
  Scheduler sched(gate, *m.tokenizer, o);
  gate.close();
  Collector a, b, c, d;
  ASSERT_NE(sched.submit(request(*m.tokenizer, "A", 1, 8), a.callbacks()), nullptr);
  ASSERT_TRUE(gate.wait_held(10s));  // a holds the slot, its first pass waits at the gate
  auto hb = sched.submit(request(*m.tokenizer, "B", 2, 8), b.callbacks());
  ASSERT_NE(hb, nullptr);
  ASSERT_NE(sched.submit(request(*m.tokenizer, "C", 3, 8), c.callbacks()), nullptr);
  EXPECT_EQ(sched.submit(request(*m.tokenizer, "D", 4, 8), d.callbacks()), nullptr);
  auto st = sched.stats();
  EXPECT_EQ(st.active, 1);
  EXPECT_EQ(st.queued, 2);
  EXPECT_EQ(st.rejected, 1u);
  EXPECT_DOUBLE_EQ(sched.load(), 3.0);
  hb->cancel();
  gate.open();
  EXPECT_EQ(a.wait().reason, FinishReason::Length);
  EXPECT_EQ(b.wait().reason, FinishReason::Cancelled);
  EXPECT_TRUE(b.result->tokens.empty());
  EXPECT_EQ(c.wait().tokens.size(), 8u);
  EXPECT_FALSE(d.result.has_value());
}

TEST(Scheduler, StopStringAndLimits) {
  Model m(stories(), 2, 64);
  Scheduler sched(m.executor, *m.tokenizer, {});
  // Greedy from BOS alone is the reference story; `tessera run --stop "red ball"` ends before it.
  SequenceRequest story;
  story.prompt = {m.tokenizer->bos()};
  story.sampler.temperature = 0;
  story.max_tokens = 60;
  story.stop = {"red ball"};
  story.strip_leading_space = true;
  Collector c1;
  sched.submit(story, c1.callbacks());
  const auto r1 = c1.wait();
  EXPECT_EQ(r1.reason, FinishReason::StopString);
  EXPECT_EQ(r1.text,
            "Once upon a time, there was a little girl named Lily. She loved to play outside in the park. One day, "
            "she saw a big, ");
  EXPECT_EQ(c1.text, r1.text);

  auto limited = request(*m.tokenizer, "Once", 4, 7);
  Collector c2;
  sched.submit(limited, c2.callbacks());
  EXPECT_EQ(c2.wait().reason, FinishReason::Length);
  EXPECT_EQ(c2.result->tokens.size(), 7u);

  auto none = request(*m.tokenizer, "Once", 4, 0);
  Collector c3;
  sched.submit(none, c3.callbacks());
  EXPECT_EQ(c3.wait().reason, FinishReason::Length);
  EXPECT_TRUE(c3.result->tokens.empty());

  // The context of 64 positions fills up: the same stop as Generator's.
  auto endless = request(*m.tokenizer, "Once upon a time there was a girl", 4, -1);
  endless.ignore_eos = true;
  Collector c4;
  sched.submit(endless, c4.callbacks());
  const auto r4 = c4.wait();
  EXPECT_EQ(r4.reason, FinishReason::ContextFull);
  expect_same(run_alone(stories(), endless, 64), r4, "context full");
}

TEST(Scheduler, LongPromptDoesNotStallDecoders) {
  Model m(stories(), 2, 2048);
  SchedulerOptions o;
  o.prefill_chunk = 32;
  Scheduler sched(m.executor, *m.tokenizer, o);
  std::string long_text;
  while (m.tokenizer->encode(long_text, true, true).size() < 800) long_text += "Lily and Ben played in the park. ";
  auto short_req = request(*m.tokenizer, "Once", 11, 60);
  short_req.ignore_eos = true;
  auto long_req = request(*m.tokenizer, long_text, 12, 5);

  Collector a, b;
  int a_before_b = 0;
  bool b_started = false;
  b.also = [&](const SequenceDelta&) { b_started = true; };
  // a's hook runs under a's lock and takes b's; b's never takes a's, so the order is fixed.
  a.also = [&](const SequenceDelta&) {
    std::lock_guard lock(b.mutex);
    if (!b_started) ++a_before_b;
  };
  ASSERT_NE(sched.submit(short_req, a.callbacks()), nullptr);
  ASSERT_TRUE(a.wait_deltas(1));
  ASSERT_NE(sched.submit(long_req, b.callbacks()), nullptr);
  const auto ra = a.wait();
  const auto rb = b.wait();
  // ~800 prompt tokens at 32 per pass: the short request streams a token per pass meanwhile.
  EXPECT_GE(a_before_b, 15);
  expect_same(run_alone(stories(), short_req, 2048), ra, "short");
  expect_same(run_alone(stories(), long_req, 2048), rb, "long");
  EXPECT_GE(sched.stats().prompt_tokens, long_req.prompt.size());
}

TEST(Scheduler, LogprobsComeWithEachToken) {
  Model m(stories(), 1);
  Scheduler sched(m.executor, *m.tokenizer, {});
  auto r = request(*m.tokenizer, "Once upon", 1, 10);
  r.sampler.temperature = 0;
  r.logprobs = 3;
  Collector c;
  sched.submit(r, c.callbacks());
  const auto res = c.wait();
  size_t with_token = 0;
  for (const auto& d : c.deltas) {
    if (d.token < 0) continue;
    ++with_token;
    ASSERT_TRUE(d.logprobs.has_value());
    ASSERT_EQ(d.logprobs->top.size(), 3u);
    EXPECT_EQ(d.logprobs->token, d.token);
    EXPECT_EQ(d.logprobs->top[0].token, d.token);  // greedy picks the most likely token
    EXPECT_LE(d.logprobs->logprob, 0.0f);
    EXPECT_GE(d.logprobs->top[0].logprob, d.logprobs->top[1].logprob);
  }
  EXPECT_EQ(with_token, res.tokens.size());
}

TEST(Scheduler, RequestsThatCanNeverRunAreErrors) {
  Model m(stories(), 1, 16);
  Scheduler sched(m.executor, *m.tokenizer, {});
  SequenceRequest empty;
  EXPECT_THROW(sched.submit(empty, {}), Error);
  auto too_long = request(*m.tokenizer, "Once upon a time there was a little girl named Lily who liked", 1, 4);
  try {
    sched.submit(too_long, {});
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("does not fit the context of 16 tokens"), std::string::npos) << e.what();
  }
  auto bad = request(*m.tokenizer, "Once", 1, 4);
  bad.sampler.top_p = 1.5f;
  EXPECT_THROW(sched.submit(bad, {}), Error);
  auto bad_token = request(*m.tokenizer, "Once", 1, 4);
  bad_token.prompt.push_back(100000);
  EXPECT_THROW(sched.submit(bad_token, {}), Error);
  EXPECT_EQ(sched.stats().accepted, 0u);
}

TEST(Scheduler, ShutdownEndsEveryRequest) {
  Model m(stories(), 1, 32768);
  Collector a, b;
  {
    Scheduler sched(m.executor, *m.tokenizer, {});
    auto r = request(*m.tokenizer, "Once", 1, -1);
    r.ignore_eos = true;
    sched.submit(r, a.callbacks());
    sched.submit(r, b.callbacks());
    ASSERT_TRUE(a.wait_deltas(2));
  }
  EXPECT_EQ(a.wait(1s).reason, FinishReason::Cancelled);
  EXPECT_EQ(b.wait(1s).reason, FinishReason::Cancelled);
}

// Passes for a two-lane executor (as a pipeline of two stages is) over a local one: a step stays in flight until
// collected, so the scheduler has to form groups of sequences and keep two steps going. Records what it saw.
class LanedExecutor : public Executor {
 public:
  explicit LanedExecutor(Executor& inner) : inner_(inner) {}
  const ModelConfig& config() const override { return inner_.config(); }
  int64_t n_ctx() const override { return inner_.n_ctx(); }
  int64_t n_slots() const override { return inner_.n_slots(); }
  void decode(const Batch& batch, std::vector<float>& logits) override { inner_.decode(batch, logits); }
  void clear_sequence(int64_t seq) override {
    if (busy_.count(static_cast<int32_t>(seq)) > 0) ++conflicts;
    inner_.clear_sequence(seq);
  }
  void truncate_sequence(int64_t seq, int64_t n) override {
    if (busy_.count(static_cast<int32_t>(seq)) > 0) ++conflicts;
    inner_.truncate_sequence(seq, n);
  }
  int64_t sequence_length(int64_t seq) const override { return inner_.sequence_length(seq); }
  int64_t lanes() const override { return 2; }
  uint64_t submit_step(const Batch& batch, std::span<const SampleRequest> requests) override {
    const std::set<int32_t> seqs(batch.seq.begin(), batch.seq.end());
    for (int32_t s : seqs) conflicts += busy_.insert(s).second ? 0 : 1;
    pending_.push_back({++last_, batch, {requests.begin(), requests.end()}, seqs});
    max_in_flight = std::max(max_in_flight, pending_.size());
    return last_;
  }
  StepResult collect_step() override {
    if (pending_.empty()) fail("no step is in flight");
    Pending p = std::move(pending_.front());
    pending_.pop_front();
    for (int32_t s : p.seqs) busy_.erase(s);
    StepResult r;
    r.ticket = p.ticket;
    inner_.decode_sampled(p.batch, p.requests, r.sampled);
    return r;
  }

  size_t max_in_flight = 0;
  int conflicts = 0;  // a sequence in two steps at once, or edited while in one

 private:
  struct Pending {
    uint64_t ticket;
    Batch batch;
    std::vector<SampleRequest> requests;
    std::set<int32_t> seqs;
  };
  Executor& inner_;
  std::deque<Pending> pending_;
  std::set<int32_t> busy_;
  uint64_t last_ = 0;
};

TEST(Scheduler, TwoLanesKeepTwoStepsOfDisjointSequencesInFlight) {
  Model m(stories(), 4);
  LanedExecutor laned(m.executor);
  std::vector<SequenceRequest> requests;
  std::vector<std::unique_ptr<Collector>> collectors;
  Collector a, b;
  {
    SchedulerOptions o;
    o.prefill_chunk = 3;
    Scheduler sched(laned, *m.tokenizer, o);
    const std::vector<std::string> prompts = {"Once upon a time", "The cat", "Lily and Ben went", "One day, a dog",
                                              "Tom had a red ball"};
    for (size_t i = 0; i < prompts.size(); ++i) {
      auto r = request(*m.tokenizer, prompts[i], 200 + i, 20 + static_cast<int32_t>(i) * 6);
      r.ignore_eos = true;
      requests.push_back(r);
      collectors.push_back(std::make_unique<Collector>());
      ASSERT_NE(sched.submit(r, collectors.back()->callbacks()), nullptr);
    }
    for (size_t i = 0; i < requests.size(); ++i) {
      expect_same(run_alone(stories(), requests[i]), collectors[i]->wait(), "request " + std::to_string(i));
    }
    // Stopping with steps in flight: they are collected first, and every request still ends.
    auto r = request(*m.tokenizer, "Once", 1, -1);
    r.ignore_eos = true;
    sched.submit(r, a.callbacks());
    sched.submit(r, b.callbacks());
    ASSERT_TRUE(a.wait_deltas(2));
    ASSERT_TRUE(b.wait_deltas(2));
  }
  EXPECT_EQ(laned.max_in_flight, 2u);
  EXPECT_EQ(laned.conflicts, 0);
  EXPECT_EQ(a.wait(1s).reason, FinishReason::Cancelled);
  EXPECT_EQ(b.wait(1s).reason, FinishReason::Cancelled);
}

// Fails every forward pass from the n-th on, as a pipeline does once it lost a node it could not replace.
class FailingExecutor : public Executor {
 public:
  FailingExecutor(Executor& inner, int fail_from) : inner_(inner), fail_from_(fail_from) {}
  const ModelConfig& config() const override { return inner_.config(); }
  int64_t n_ctx() const override { return inner_.n_ctx(); }
  int64_t n_slots() const override { return inner_.n_slots(); }
  void decode(const Batch& batch, std::vector<float>& logits) override {
    if (++calls_ >= fail_from_) fail("worker b (127.0.0.1:1) is gone and could not be replaced");
    inner_.decode(batch, logits);
  }
  void clear_sequence(int64_t seq) override { inner_.clear_sequence(seq); }
  void truncate_sequence(int64_t seq, int64_t n) override { inner_.truncate_sequence(seq, n); }
  int64_t sequence_length(int64_t seq) const override { return inner_.sequence_length(seq); }

 private:
  Executor& inner_;
  int fail_from_;
  int calls_ = 0;
};

TEST(Scheduler, RequestsMovedToAnotherSchedulerContinueWithTheSameTokensAndText) {
  Model ma(stories(), 4);
  Model mb(stories(), 4);
  FailingExecutor failing(ma.executor, 6);
  SchedulerOptions o;
  o.prefill_chunk = 3;  // the fault finds some prompts half evaluated, others decoding
  Scheduler b(mb.executor, *mb.tokenizer, o);
  Scheduler a(failing, *ma.tokenizer, o);
  a.set_mover([&](std::unique_ptr<Scheduler::Sequence>& s) { return b.adopt(s); });
  const std::vector<std::string> prompts = {"Once upon a time", "Lily and Ben went to the park. They saw a big",
                                            "The cat"};
  std::vector<SequenceRequest> requests;
  std::vector<std::unique_ptr<Collector>> collectors;
  for (size_t i = 0; i < prompts.size(); ++i) {
    auto r = request(*ma.tokenizer, prompts[i], 7 + i, 40);
    r.sampler.temperature = i == 0 ? 0.0f : 0.9f;  // seeded sampling goes on from the state it had
    r.sampler.frequency_penalty = 0.4f;            // and so does the penalty's token history
    if (i == 2) r.stop = {"."};
    requests.push_back(r);
    collectors.push_back(std::make_unique<Collector>());
    ASSERT_NE(a.submit(r, collectors.back()->callbacks()), nullptr);
  }
  for (size_t i = 0; i < requests.size(); ++i) {
    const SequenceResult got = collectors[i]->wait();
    expect_same(run_alone(stories(), requests[i]), got, "#" + std::to_string(i));
    EXPECT_EQ(collectors[i]->text, got.text) << "a token streamed twice or lost, #" << i;
  }
  EXPECT_EQ(a.stats().moved_out, requests.size());
  EXPECT_EQ(b.stats().moved_in, requests.size());
  EXPECT_EQ(a.stats().active, 0);
  uint64_t finished = 0;
  for (uint64_t n : b.stats().finished) finished += n;
  EXPECT_EQ(finished, requests.size());
}

TEST(Scheduler, ARequestNoOtherSchedulerTakesEndsWithAnErrorThatSaysSo) {
  Model m(stories(), 1);
  FailingExecutor failing(m.executor, 3);
  Scheduler a(failing, *m.tokenizer, {});
  a.set_mover([](std::unique_ptr<Scheduler::Sequence>&) { return false; });
  Collector c;
  ASSERT_NE(a.submit(request(*m.tokenizer, "Once upon a time", 1, 40), c.callbacks()), nullptr);
  const SequenceResult got = c.wait();
  EXPECT_EQ(got.reason, FinishReason::Error);
  EXPECT_NE(got.error.find("could not be replaced (and no other replica could take the request over)"),
            std::string::npos)
      << got.error;
  EXPECT_EQ(a.stats().moved_out, 0u);
  EXPECT_EQ(a.stats().active, 0);
}

}  // namespace
}  // namespace tessera
