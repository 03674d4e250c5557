// Real `tessera worker` processes on loopback: a split model gives the single-node output; warm caches and local
// files (split GGUF sets too) send no weights; wrong keys, busy workers, killed workers and too little memory are
// clear errors naming the worker; a worker serves the next head after one goes away.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <thread>

#include "cluster/local_stage_endpoint.h"
#include "cluster/pipeline_executor.h"
#include "cluster/remote_stage_endpoint.h"
#include "engine/local_executor.h"
#include "gguf/gguf_file.h"
#include "gguf/gguf_split.h"
#include "net/keys.h"
#include "support/scalar_isa.h"  // micro-batched prompts give exactly one node's logits
#include "support/worker_process.h"
#include "util/error.h"

namespace tessera {
namespace {

using namespace std::chrono_literals;

std::filesystem::path stories() { return test::source_dir() / "models/stories260K.gguf"; }

using test::tessera;

std::unique_ptr<cluster::RemoteStageEndpoint> remote(const test::WorkerProcess& w, const ModelWeights& model,
                                                     cluster::CompletionQueue& done, LayerRange layers, bool first,
                                                     bool last, const net::ClusterKey* key = nullptr, int index = 0) {
  cluster::RemoteStageOptions o;
  o.stage = {1, 64, GgmlType::F32};
  o.wire = net::WireType::F32;
  o.connect_timeout = 3000ms;
  // RTT only: the bandwidth probe's megabytes would hide what these tests count (weights and activations).
  o.measure_bytes = 0;
  return std::make_unique<cluster::RemoteStageEndpoint>("w", w.address(), key, index, model, layers, first, last, o,
                                                        done);
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
  const auto three =
      tessera({"run", "-p", "Once upon a time", "-n", "60", "--temp", "0", "--workers",
               "a=" + a.address() + ",b=" + b.address(), "--split", "0-1@local,2-3@a,4-4@b", "--wire-type", "f32"});
  ASSERT_EQ(three.exit_code, 0) << three.err;
  EXPECT_EQ(three.out, one.out);
}

// Every gemma fixture through two worker processes, the boundary between a layer and the earlier layer whose K/V it
// reuses (gemma4: layer 3 reads layer 1, layer 4 reads layer 2), against llama.cpp's logits: the scalar kernels
// sum like ggml, so the fixture's tighter tier holds (the fp16-GELU tier for F32 files, the faithful tier for
// quantized ones), with its required greedy tokens.
TEST(Workers, GemmaFixturesOverTwoWorkersMatchLlamaCpp) {
  struct Case {
    const char* name;
    const char* file;
    int64_t boundary;
  };
  const Case cases[] = {{"gemma3-f32", "gemma3-f32.gguf", 3},
                        {"gemma3-q8_0", "gemma3-q8_0.gguf", 5},
                        {"gemma4-f32", "gemma4-f32.gguf", 3},
                        {"gemma4-q8_0", "gemma4-q8_0.gguf", 2},
                        {"gemma4moe-f32", "gemma4moe-f32.gguf", 2},
                        {"gemma4moe-q4_k_m", "gemma4moe-q4_k_m.gguf", 1},
                        {"gemma4moe-q4_k_m-split", "gemma4moe-q4_k_m-split-00001-of-00003.gguf", 3}};
  test::WorkerProcess wa, wb;
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const auto dir = test::shared_dir() / "fixtures/models";
    std::ifstream json_in(dir / (std::string(c.name) + ".json"));
    const auto ref = nlohmann::json::parse(json_in);
    const auto& tol_all = ref["tolerance"];
    const auto& tol = tol_all.contains("faithful_gelu_fp16") ? tol_all["faithful_gelu_fp16"]
                                                             : tol_all["faithful_activation_quantization"];
    const auto prompt = ref["tokens"].get<std::vector<int32_t>>();
    const int64_t v = ref["n_vocab"];
    std::ifstream logits_in(dir / (std::string(c.name) + ".logits.f32"), std::ios::binary);
    std::vector<float> expected(prompt.size() * static_cast<size_t>(v));
    logits_in.read(reinterpret_cast<char*>(expected.data()),
                   static_cast<std::streamsize>(expected.size() * sizeof(float)));

    auto model = ModelWeights::load(dir / c.file);
    const int64_t n_layer = model->config().n_layer;
    cluster::PipelineExecutor p(model->config(), 64, 1, {5});
    p.add_stage(remote(wa, *model, p.completions(), {0, c.boundary}, true, false));
    p.add_stage(remote(wb, *model, p.completions(), {c.boundary, n_layer}, false, true, nullptr, 1));
    Batch b;
    for (size_t i = 0; i < prompt.size(); ++i) b.add(prompt[i], 0, static_cast<int32_t>(i), true);
    std::vector<float> got;
    p.decode(b, got);
    ASSERT_EQ(got.size(), expected.size());
    double max_diff = 0, sum = 0;
    for (size_t i = 0; i < got.size(); ++i) {
      const double d = std::fabs(static_cast<double>(got[i]) - expected[i]);
      max_diff = std::max(max_diff, d);
      sum += d;
    }
    EXPECT_LE(max_diff, tol["max_abs_logit_diff"].get<double>());
    EXPECT_LE(sum / static_cast<double>(got.size()), tol["mean_abs_logit_diff"].get<double>());
    const int required = tol["greedy_tokens_required"];
    const auto want = ref["greedy"]["tokens"].get<std::vector<int32_t>>();
    std::vector<int32_t> greedy;
    const float* last = got.data() + (prompt.size() - 1) * static_cast<size_t>(v);
    int32_t next = static_cast<int32_t>(std::max_element(last, last + v) - last);
    for (int i = 0; i < required; ++i) {
      greedy.push_back(next);
      Batch d;
      d.add(next, 0, static_cast<int32_t>(prompt.size()) + i, true);
      p.decode(d, got);
      next = static_cast<int32_t>(std::max_element(got.begin(), got.end()) - got.begin());
    }
    EXPECT_EQ(greedy, std::vector<int32_t>(want.begin(), want.begin() + required));
  }
}

TEST(Workers, IdenticalLogitsWithF32OnTheWire) {
  test::WorkerProcess w;
  auto model = ModelWeights::load(stories());
  cluster::PipelineExecutor p(model->config(), 64, 1, {4});
  p.add_stage(std::make_unique<cluster::LocalStageEndpoint>("local", 0,
                                                            ModelWeights::load(stories(), {0, 3}, true, false),
                                                            StageOptions{1, 64, GgmlType::F32}, 1, p.completions()));
  cluster::RemoteStageOptions o;
  o.stage = {1, 64, GgmlType::F32};
  o.wire = net::WireType::F32;
  p.add_stage(std::make_unique<cluster::RemoteStageEndpoint>("w", w.address(), nullptr, 1, *model, LayerRange{3, 5},
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

TEST(Workers, TheLinkIsMeasuredAtConnect) {
  test::WorkerProcess w;
  auto model = ModelWeights::load(stories());
  cluster::CompletionQueue done;
  cluster::RemoteStageOptions o;
  o.stage = {1, 64, GgmlType::F32};
  o.measure_bytes = 1u << 20;
  auto ep = std::make_unique<cluster::RemoteStageEndpoint>("w", w.address(), nullptr, 0, *model, LayerRange{0, 5}, true,
                                                           true, o, done);
  EXPECT_GT(ep->link().rtt_s, 0.0);
  EXPECT_LT(ep->link().rtt_s, 1.0);
  EXPECT_EQ(ep->link().pings, 5);
  // Loopback moves far more than 10 MB/s even on a busy machine; both directions were timed.
  EXPECT_GT(ep->link().upload_bytes_per_s, 10e6);
  EXPECT_GT(ep->link().download_bytes_per_s, 10e6);
  // An untimed and a timed megabyte each way, on top of the weights.
  EXPECT_GT(ep->link_stats().bytes_sent, 2u << 20);
  EXPECT_GT(ep->link_stats().bytes_received, 2u << 20);
  EXPECT_TRUE(ep->up());
  w.stop(SIGKILL);
  // The receiver notices the closed socket at once; the heartbeat timeout bounds it otherwise.
  for (int i = 0; i < 50 && ep->up(); ++i) std::this_thread::sleep_for(100ms);
  EXPECT_FALSE(ep->up());
}

// A refused TruncateSequence (a sequence past the worker's slots) is an error about that message alone: the Forward
// that follows it still gets its own answer (the error used to be taken for the Forward's).
TEST(Workers, AnErrorAboutATruncateIsNotBlamedOnTheNextForward) {
  auto model = ModelWeights::load(stories());
  cluster::CompletionQueue done;
  test::WorkerProcess w;
  auto ep = remote(w, *model, done, {0, 5}, true, true);
  ep->truncate_sequence(40, 0);  // one slot: sequence 40 does not exist there
  cluster::StageJob job;
  job.id = 1;
  job.batch.add(1, 0, 0, true);
  ep->submit(std::move(job));
  const cluster::StageDone d = done.pop();
  EXPECT_EQ(d.id, 1u);
  EXPECT_TRUE(d.error.empty()) << d.error;
  EXPECT_EQ(d.logits.size(), static_cast<size_t>(model->config().n_vocab));
  EXPECT_TRUE(ep->up());
}

// --idle-timeout: a head that only heartbeats loses its session, and the worker takes the next head.
TEST(Workers, AnIdleHeadLosesItsSessionAfterTheIdleTimeout) {
  auto model = ModelWeights::load(stories());
  cluster::CompletionQueue done;
  test::WorkerProcess w({"--idle-timeout", "1"});
  auto first = remote(w, *model, done, {0, 5}, true, true);
  EXPECT_TRUE(first->up());
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  while (first->up() && std::chrono::steady_clock::now() < deadline) std::this_thread::sleep_for(100ms);
  EXPECT_FALSE(first->up());
  auto second = remote(w, *model, done, {0, 5}, true, true);
  EXPECT_TRUE(second->up());
}

TEST(Workers, WarmCacheAndLocalFileSendNoWeights) {
  test::TempDir dir;
  std::filesystem::create_directories(dir / "models");
  std::filesystem::copy_file(stories(), dir / "models/stories260K.gguf");
  auto model = ModelWeights::load(stories());
  cluster::CompletionQueue done;
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

TEST(Workers, SplitSetUnderModelsServesItsLayersWithoutWeightsSent) {
  test::TempDir dir;
  std::filesystem::create_directories(dir / "models");
  const auto parts = gguf::write_split(gguf::GgufFile::open(stories()), dir / "models/stories260K", 3);
  auto model = ModelWeights::load(parts.front());
  cluster::CompletionQueue done;
  {
    // Only the split set under --models: each stage's tensors come from whichever files hold them.
    test::WorkerProcess w({"--models", (dir / "models").string()});
    auto head = remote(w, *model, done, {0, 2}, true, false);
    EXPECT_EQ(head->load_report().weight_bytes_sent, 0u);
    head.reset();
    auto tail = remote(w, *model, done, {2, 5}, false, true);
    EXPECT_EQ(tail->load_report().weight_bytes_sent, 0u);
  }
  {
    // Run from the split set over two such workers: the single file's text on one node.
    test::WorkerProcess a({"--models", (dir / "models").string()}), b({"--models", (dir / "models").string()});
    const auto one = tessera({"run", "-p", "Once upon a time", "-n", "40", "--temp", "0"});
    ASSERT_EQ(one.exit_code, 0) << one.err;
    const auto two = tessera({"run", "-m", parts.front().string(), "-p", "Once upon a time", "-n", "40", "--temp", "0",
                              "--workers", "a=" + a.address() + ",b=" + b.address()});
    ASSERT_EQ(two.exit_code, 0) << two.err;
    EXPECT_EQ(two.out, one.out);
  }
  // A set with a file missing on the worker: the head sends the weights instead.
  std::filesystem::remove(parts[1]);
  test::WorkerProcess broken({"--models", (dir / "models").string()});
  auto sent = remote(broken, *model, done, {0, 5}, true, true);
  EXPECT_GT(sent->load_report().weight_bytes_sent, 1000000u);
}

TEST(Workers, BusyWorkerRefusesASecondHeadAndServesTheNext) {
  test::WorkerProcess w;
  auto model = ModelWeights::load(stories());
  cluster::CompletionQueue done;
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
  cluster::PipelineExecutor p(model->config(), 64, 1, {});
  p.add_stage(std::make_unique<cluster::LocalStageEndpoint>("local", 0,
                                                            ModelWeights::load(stories(), {0, 3}, true, false),
                                                            StageOptions{1, 64, GgmlType::F16}, 1, p.completions()));
  cluster::RemoteStageOptions o;
  o.stage = {1, 64, GgmlType::F16};
  p.add_stage(std::make_unique<cluster::RemoteStageEndpoint>("b", w.address(), nullptr, 1, *model, LayerRange{3, 5},
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
  cluster::CompletionQueue done;
  const auto wrong = net::load_cluster_key((dir / "b.key").string());
  const auto t0 = std::chrono::steady_clock::now();
  try {
    remote(keyed, *model, done, {0, 5}, true, true, &wrong);
    FAIL() << "a head with the wrong key was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("worker w"), std::string::npos) << e.what();
  }
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 10s);
  const auto right = net::load_cluster_key((dir / "a.key").string());
  auto ok = remote(keyed, *model, done, {0, 5}, true, true, &right);
  EXPECT_TRUE(ok->connection().encrypted());
  ok.reset();

  test::WorkerProcess small({"--mem-limit", "100000"});
  try {
    remote(small, *model, done, {0, 5}, true, true);
    FAIL() << "the stage should not fit";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("not enough memory"), std::string::npos) << e.what();
    // Admitted (or not) before its buffers were sized for the announced tensors and any were sent.
    EXPECT_NE(std::string(e.what()).find("before any were sent"), std::string::npos) << e.what();
  }
  EXPECT_TRUE(small.running());
}

std::string read_bytes(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// A prompt of ~250 tokens: 16 micro-batches over two workers, the first 15 without an output token (the worker
// used to fail building a logits matrix of zero rows for them).
TEST(Workers, LongPromptOverTwoWorkersEqualsOneNode) {
  test::TempDir dir;
  {
    std::ofstream out(dir / "prompt.txt");
    for (int i = 0; i < 12; ++i) out << "Once upon a time, there was a little girl named Lily. She liked to play. ";
  }
  const std::string prompt = (dir / "prompt.txt").string();
  test::WorkerProcess a, b;
  const std::string workers = "a=" + a.address() + ",b=" + b.address();
  const std::vector<std::vector<std::string>> modes = {
      {"--temp", "0"},
      {"--temp", "0.9", "--seed", "5", "--repeat-penalty", "1.3", "--frequency-penalty", "0.2", "--top-k", "0"}};
  for (const auto& mode : modes) {
    std::vector<std::string> args = {"run", "-f", prompt, "-n", "40", "--ignore-eos", "-c", "512"};
    args.insert(args.end(), mode.begin(), mode.end());
    const auto one = tessera(args);
    ASSERT_EQ(one.exit_code, 0) << one.err;
    // f32 activations: f16 would round the hidden states, and seeded sampling would drift from one node's.
    args.insert(args.end(), {"--workers", workers, "--wire-type", "f32"});
    const auto two = tessera(args);
    ASSERT_EQ(two.exit_code, 0) << two.err;
    EXPECT_EQ(two.out, one.out) << mode[1];
    EXPECT_EQ(two.err.find("error"), std::string::npos) << two.err;
  }
  // --logits-out keeps the logits path: every prompt position's row, as one node writes them.
  const auto one =
      tessera({"run", "-f", prompt, "-n", "3", "--temp", "0", "-c", "512", "--logits-out", (dir / "one.f32").string()});
  ASSERT_EQ(one.exit_code, 0) << one.err;
  const auto two = tessera({"run", "-f", prompt, "-n", "3", "--temp", "0", "-c", "512", "--logits-out",
                            (dir / "two.f32").string(), "--workers", workers, "--wire-type", "f32"});
  ASSERT_EQ(two.exit_code, 0) << two.err;
  EXPECT_EQ(two.out, one.out);
  const std::string x = read_bytes(dir / "one.f32");
  EXPECT_GT(x.size(), 250u * 512 * 4);
  EXPECT_EQ(read_bytes(dir / "two.f32"), x);
}

// Seeded sampling with penalties and logprobs, on the last worker: the picks equal one node's exactly, and a
// decoded token costs a few hidden states on the wire, not a row of logits.
TEST(Workers, LastWorkerSamplesLikeOneNodeAndSendsNoLogits) {
  test::WorkerProcess wa, wb;
  auto model = ModelWeights::load(stories());
  const ModelConfig& c = model->config();
  StageOptions so{2, 256, GgmlType::F32};
  cluster::PipelineExecutor p(c, so.n_ctx, so.n_slots, {});
  cluster::RemoteStageOptions o;
  o.stage = so;
  o.wire = net::WireType::F32;  // exact hidden states, so the logits (and logprobs) equal one node's
  auto a = std::make_unique<cluster::RemoteStageEndpoint>("a", wa.address(), nullptr, 0, *model, LayerRange{0, 2}, true,
                                                          false, o, p.completions());
  auto b = std::make_unique<cluster::RemoteStageEndpoint>("b", wb.address(), nullptr, 1, *model, LayerRange{2, 5},
                                                          false, true, o, p.completions());
  const cluster::RemoteStageEndpoint* links[2] = {a.get(), b.get()};
  p.add_stage(std::move(a));
  p.add_stage(std::move(b));
  LocalExecutor one(model, so, 1);

  SamplerParams sp;
  sp.temperature = 0.8f;
  sp.repeat_penalty = 1.3f;
  sp.repeat_last_n = 32;
  sp.presence_penalty = 0.1f;
  sp.seed = 1234;
  const auto n_vocab = static_cast<int32_t>(c.n_vocab);
  // Two sequences decoding together: one with logprobs, one greedy without.
  SamplerParams greedy;
  greedy.temperature = 0.0f;
  Sampler here[2] = {Sampler(sp, n_vocab), Sampler(greedy, n_vocab)};
  Sampler there[2] = {Sampler(sp, n_vocab), Sampler(greedy, n_vocab)};
  const int32_t top[2] = {5, -1};
  std::vector<int32_t> pos = {0, 0};
  // Prompts: 40 and 25 tokens in one batch (mixed sequences, several micro-batches).
  Batch batch;
  for (int32_t s = 0; s < 2; ++s) {
    const int32_t n = s == 0 ? 40 : 25;
    for (int32_t i = 0; i < n; ++i) {
      const int32_t t = i == 0 ? 1 : 260 + (i * 31 + s * 7) % 240;
      batch.add(t, s, pos[static_cast<size_t>(s)]++, i + 1 == n);
      here[s].accept(t);
      there[s].accept(t);
    }
  }
  auto bytes = [&] {
    uint64_t n = 0;
    for (const auto* l : links) n += l->link_stats().bytes_sent + l->link_stats().bytes_received;
    return n;
  };
  auto messages = [&](size_t i) {
    const auto st = links[i]->link_stats();
    return st.messages_sent + st.messages_received;  // heartbeats are counted apart
  };
  std::vector<SampledToken> want, got;
  uint64_t decode_bytes = 0;
  int decoded = 0;
  for (int step = 0; step < 30; ++step) {
    const SampleRequest rh[2] = {{&here[0], top[0]}, {&here[1], top[1]}};
    const SampleRequest rt[2] = {{&there[0], top[0]}, {&there[1], top[1]}};
    one.decode_sampled(batch, rh, want);
    const uint64_t before = bytes();
    const uint64_t messages_before[2] = {messages(0), messages(1)};
    const size_t parts = p.split(batch).size();
    p.decode_sampled(batch, rt, got);
    if (step > 0) {
      decode_bytes += bytes() - before;
      decoded += 2;
      // Each micro-batch (one per sequence here) is one Forward and one ForwardResult per stage: no round trip
      // beyond the hops.
      EXPECT_EQ(parts, 2u);
      EXPECT_EQ(messages(0) - messages_before[0], 2 * parts);
      EXPECT_EQ(messages(1) - messages_before[1], 2 * parts);
    }
    ASSERT_EQ(got.size(), 2u);
    for (size_t s = 0; s < 2; ++s) {
      const std::string what = fmt::format("step {} sequence {}", step, s);
      EXPECT_EQ(got[s].token, want[s].token) << what;
      EXPECT_EQ(got[s].logprob, want[s].logprob) << what;
      ASSERT_EQ(got[s].top.size(), want[s].top.size()) << what;
      for (size_t k = 0; k < want[s].top.size(); ++k) EXPECT_EQ(got[s].top[k].token, want[s].top[k].token) << what;
      here[s].accept(want[s].token);
      there[s].accept(got[s].token);
    }
    batch.clear();
    for (int32_t s = 0; s < 2; ++s)
      batch.add(want[static_cast<size_t>(s)].token, s, pos[static_cast<size_t>(s)]++, true);
  }
  EXPECT_EQ(want[0].top.size(), 5u);
  // Per decoded token: the hidden state to and from the boundary (f32) plus ids, positions, the sampler's
  // state with its penalty window and the top-5 logprobs. A row of logits alone would be n_vocab * 4 bytes.
  const double per_token = static_cast<double>(decode_bytes) / decoded;
  EXPECT_LT(per_token, 2.0 * c.n_embd * 4 + 600) << per_token;
  EXPECT_LT(per_token, n_vocab * 4 / 2) << per_token;
  std::printf("wire bytes per decoded token: %.0f (n_embd %lld, n_vocab %d)\n", per_token,
              static_cast<long long>(c.n_embd), n_vocab);
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
