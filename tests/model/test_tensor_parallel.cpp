// Tensor and expert parallelism in one process: N ranks as threads (collective::ThreadGroup), each a Stage holding
// its share of every layer, give one node's logits for every fixture architecture: F32 within 1e-4 (exact GELU,
// whose result does not flip with the order of a sum), quantized within the fixture's tolerance against
// llama.cpp, and the same greedy tokens; 2 and 3 ranks, uneven shares, expert parallelism for the MoE files.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <thread>

#include "collective/thread_group.h"
#include "model/shard.h"
#include "model/stage.h"
#include "model/synthetic_model.h"
#include "support/fixture_io.h"
#include "support/test_paths.h"
#include "util/error.h"

namespace tessera {
namespace {

std::filesystem::path fixture(const std::string& name) {
  return test::shared_dir() / "fixtures/models" / (name + ".gguf");
}

const std::vector<int32_t> kPrompt = {1, 403, 407, 261, 378, 383, 286, 261, 376, 298, 315, 421, 395, 317};

struct Result {
  std::vector<float> prompt_logits;  // every prompt position
  std::vector<int32_t> greedy;
  std::vector<float> last_logits;  // of the last greedy step
};

using test::argmax;

// The prompt in one batch and `steps` greedy steps, on one Stage per rank; rank 0's outputs.
Result run_file(const std::filesystem::path& file, StageOptions opts, int steps, int n_ranks, ShardSpec spec) {
  auto weights = ModelWeights::load(file);
  const int64_t n_vocab = weights->config().n_vocab;
  collective::ThreadGroup group(n_ranks, std::chrono::seconds(20));
  Result result;
  std::vector<std::string> errors(static_cast<size_t>(n_ranks));
  auto rank_main = [&](int r) {
    try {
      ThreadPool pool(1);
      StageOptions o = opts;
      if (n_ranks > 1) {
        o.shard = spec;
        o.shard.rank = r;
        o.shard.n_ranks = n_ranks;
      }
      collective::Communicator& comm = group.rank(r);
      Stage stage(weights, o, pool, n_ranks > 1 ? &comm : nullptr);
      Batch batch;
      for (size_t i = 0; i < kPrompt.size(); ++i) batch.add(kPrompt[i], 0, static_cast<int32_t>(i), true);
      StageOutput out;
      stage.forward(batch, nullptr, out);
      if (r == 0) result.prompt_logits = out.logits;
      std::vector<uint8_t> next(4);
      int32_t token = r == 0 ? argmax(out.logits.data() + (kPrompt.size() - 1) * n_vocab, n_vocab) : 0;
      for (int s = 0; s < steps; ++s) {
        // Rank 0 picks; the others learn the token from it, as the MPI executor's followers do.
        std::memcpy(next.data(), &token, 4);
        comm.broadcast(next, 0);
        std::memcpy(&token, next.data(), 4);
        if (r == 0) result.greedy.push_back(token);
        Batch b;
        b.add(token, 0, static_cast<int32_t>(kPrompt.size()) + s, true);
        stage.forward(b, nullptr, out);
        if (r == 0) {
          token = argmax(out.logits.data(), n_vocab);
          result.last_logits = out.logits;
        }
      }
    } catch (const std::exception& e) {
      errors[static_cast<size_t>(r)] = e.what();
    }
  };
  std::vector<std::thread> threads;
  for (int r = 0; r < n_ranks; ++r) threads.emplace_back(rank_main, r);
  for (auto& t : threads) t.join();
  for (const auto& e : errors) {
    if (!e.empty()) fail("{}", e);
  }
  return result;
}

Result run(const std::string& name, StageOptions opts, int steps, int n_ranks, ShardSpec spec) {
  return run_file(fixture(name), opts, steps, n_ranks, spec);
}

float max_diff(const std::vector<float>& a, const std::vector<float>& b) {
  EXPECT_EQ(a.size(), b.size());
  float m = 0.0f;
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) m = std::max(m, std::fabs(a[i] - b[i]));
  return m;
}

struct Layout {
  int n_ranks;
  std::vector<double> shares;
  bool tp;
  bool ep;
  double copies = 0;  // --ep-redundancy
};

std::string layout_name(const Layout& l) {
  std::string s;
  if (l.tp) s.append("tp");
  if (l.ep) s.append("ep");
  s.append(std::to_string(l.n_ranks));
  for (double x : l.shares) s.append(fmt::format("_{}", static_cast<int>(x)));
  if (l.copies > 0) s.append(fmt::format("_copies{}", static_cast<int>(l.copies * 100)));
  return s;
}

class TensorParallel : public ::testing::TestWithParam<std::tuple<std::string, Layout>> {};

TEST_P(TensorParallel, SameLogitsAsOneNode) {
  const auto& [name, layout] = GetParam();
  StageOptions opts{1, 64, GgmlType::F32};
  opts.exact_gelu = true;
  const ShardSpec spec{0, layout.n_ranks, layout.shares, layout.tp, layout.ep, layout.copies};
  const Result one = run(name, opts, 6, 1, {});
  const Result many = run(name, opts, 6, layout.n_ranks, spec);
  if (name.ends_with("f32")) {
    // One node's sums in another order.
    EXPECT_LE(max_diff(one.prompt_logits, many.prompt_logits), 1e-4f) << layout_name(layout);
    EXPECT_EQ(one.greedy, many.greedy) << layout_name(layout);
    EXPECT_LE(max_diff(one.last_logits, many.last_logits), 1e-4f);
    return;
  }
  // Quantized: where a rank's columns start inside a quant block (a K-quant's 256 elements over 3 ranks), that slice
  // is held in f32 and its products skip the activations' quantization: llama.cpp's reference with the fixture's
  // tolerance for any correct engine decides, and its required greedy tokens.
  const auto ref = test::load_json(test::shared_dir() / "fixtures/models" / (name + ".json"));
  const auto expected =
      test::read_logits(test::shared_dir() / "fixtures/models" / (name + ".logits.f32"), kPrompt.size() * 512);
  ASSERT_FALSE(expected.empty());
  const auto& tol = ref["tolerance"];
  double sum = 0;
  for (size_t i = 0; i < expected.size(); ++i) sum += std::fabs(many.prompt_logits[i] - expected[i]);
  EXPECT_LE(max_diff(many.prompt_logits, expected), tol["max_abs_logit_diff"].get<float>()) << layout_name(layout);
  EXPECT_LE(sum / static_cast<double>(expected.size()), tol["mean_abs_logit_diff"].get<double>());
  const int required = tol["greedy_tokens_required"];
  const auto want = ref["greedy"]["tokens"].get<std::vector<int32_t>>();
  ASSERT_GE(many.greedy.size(), static_cast<size_t>(required));
  EXPECT_EQ(std::vector<int32_t>(many.greedy.begin(), many.greedy.begin() + required),
            std::vector<int32_t>(want.begin(), want.begin() + required));
  std::printf("%s %s: max |diff| vs one node %.3g\n", name.c_str(), layout_name(layout).c_str(),
              max_diff(one.prompt_logits, many.prompt_logits));
}

std::string case_name(const ::testing::TestParamInfo<std::tuple<std::string, Layout>>& p) {
  std::string s = fmt::format("{}_{}", std::get<0>(p.param), layout_name(std::get<1>(p.param)));
  for (auto& ch : s) ch = (ch == '-' || ch == '.') ? '_' : ch;
  return s;
}

INSTANTIATE_TEST_SUITE_P(Every, TensorParallel,
                         ::testing::Combine(::testing::Values("llama-f32", "llama-q8_0", "qwen2-f32", "qwen2-q8_0",
                                                              "qwen3-f32", "qwen3-q8_0", "qwen3moe-f32",
                                                              "qwen3moe-q4_k_m", "mixtral-f32", "mixtral-q4_k_m",
                                                              "gemma3-f32", "gemma3-q8_0", "gemma4-f32", "gemma4-q8_0",
                                                              "gemma4moe-f32", "gemma4moe-q4_k_m"),
                                            ::testing::Values(Layout{2, {}, true, false}, Layout{3, {}, true, false},
                                                              Layout{3, {2, 1, 1}, true, false})),
                         case_name);

// Expert parallelism: the MoE fixtures.
INSTANTIATE_TEST_SUITE_P(
    Experts, TensorParallel,
    ::testing::Combine(::testing::Values("qwen3moe-f32", "qwen3moe-q4_k_m", "mixtral-f32", "mixtral-q4_k_m",
                                         "gemma4moe-f32", "gemma4moe-q4_k_m"),
                       ::testing::Values(Layout{2, {}, false, true}, Layout{3, {}, false, true},
                                         Layout{3, {1, 2, 1}, false, true}, Layout{2, {}, true, true},
                                         Layout{2, {}, false, true, 0.5}, Layout{3, {1, 2, 1}, false, true, 1.0},
                                         Layout{3, {}, true, true, 0.5})),
    case_name);

// --ep-redundancy: rank r also holds the next rank's first experts, and every routed pick runs on exactly one of
// its holders, evenly where the copies allow.
TEST(ExpertParallel, CopiesOfTheNextRanksExpertsAreHeldAndEachPickDealtToOneHolder) {
  const ShardSpec spec{0, 2, {}, false, true, 0.5};
  const ExpertHolders h(128, spec, "experts");
  ASSERT_TRUE(h.redundant());
  ASSERT_EQ(h.held(0).size(), 96u);  // 0-63 and 64-95
  ASSERT_EQ(h.held(1).size(), 96u);  // 64-127 and 0-31
  EXPECT_EQ(h.held(0).front(), 0);
  EXPECT_EQ(h.held(0).back(), 95);
  EXPECT_EQ(h.held(1).front(), 0);
  EXPECT_EQ(h.held(1)[31], 31);
  EXPECT_EQ(h.held(1)[32], 64);
  EXPECT_EQ(h.own(0), 64);
  // Two picks each only one rank holds (40: rank 0, 100: rank 1) and six both hold: 4/4.
  const std::vector<int64_t> picks = {40, 100, 0, 10, 20, 70, 80, 90};
  std::vector<double> load(2, 0.0);
  std::vector<int> dealt(8);
  h.deal(picks.data(), 8, load, dealt.data());
  EXPECT_EQ(dealt[0], 0);
  EXPECT_EQ(dealt[1], 1);
  EXPECT_EQ(std::count(dealt.begin(), dealt.end(), 0), 4);
  for (size_t i = 0; i < picks.size(); ++i) {
    const auto& held = h.held(dealt[i]);
    EXPECT_TRUE(std::binary_search(held.begin(), held.end(), picks[i])) << picks[i] << " on rank " << dealt[i];
  }
  // Five that only rank 0 holds: they stay there; the other three go to rank 1.
  const std::vector<int64_t> lopsided = {32, 33, 34, 35, 36, 0, 64, 65};
  std::fill(load.begin(), load.end(), 0.0);
  h.deal(lopsided.data(), 8, load, dealt.data());
  EXPECT_EQ(std::vector<int>(dealt.begin(), dealt.begin() + 5), std::vector<int>(5, 0));
  EXPECT_EQ(std::vector<int>(dealt.begin() + 5, dealt.end()), std::vector<int>(3, 1));
  // Uneven shares: the rank with twice the share gets about twice the picks of a batch.
  const ExpertHolders uneven(60, ShardSpec{0, 3, {2, 1, 1}, false, true, 1.0}, "experts");
  std::vector<double> batch(3, 0.0);
  std::vector<int> counts(3, 0);
  for (int64_t t = 0; t < 200; ++t) {
    std::vector<int64_t> p;
    for (int64_t i = 0; i < 4; ++i) p.push_back((t * 7 + i * 13) % 60);
    std::vector<int> d(4);
    uneven.deal(p.data(), 4, batch, d.data());
    for (int r : d) ++counts[static_cast<size_t>(r)];
  }
  EXPECT_NEAR(counts[0], 400, 40);
  EXPECT_NEAR(counts[1], 200, 40);
  // No copies without redundancy; a fraction out of range is an error naming the option.
  EXPECT_FALSE(ExpertHolders(128, ShardSpec{0, 2, {}, false, true, 0.0}, "experts").redundant());
  EXPECT_THROW(ExpertHolders(128, ShardSpec{0, 2, {}, false, true, 1.5}, "experts"), Error);
}

// The default fp16-table GELU under tensor parallelism still meets llama.cpp's reference within the fixture's tier
// for any correct engine, with its greedy tokens.
TEST(TensorParallel, GemmaWithTheGeluTableMatchesLlamaCpp) {
  for (const char* name : {"gemma4-f32", "gemma4moe-q4_k_m"}) {
    const auto dir = test::shared_dir() / "fixtures/models";
    const auto ref = test::load_json(dir / (std::string(name) + ".json"));
    const auto expected = test::read_logits(dir / (std::string(name) + ".logits.f32"), kPrompt.size() * 512);
    const auto& tol = ref["tolerance"];
    const int required = tol["greedy_tokens_required"];
    const Result r = run(name, StageOptions{1, 64, GgmlType::F32}, required, 3, ShardSpec{0, 3, {}, true, false});
    EXPECT_LE(max_diff(r.prompt_logits, expected), tol["max_abs_logit_diff"].get<float>()) << name;
    const auto want = ref["greedy"]["tokens"].get<std::vector<int32_t>>();
    EXPECT_EQ(r.greedy, std::vector<int32_t>(want.begin(), want.begin() + required)) << name;
  }
}

TEST(TensorParallel, ShareArithmetic) {
  ShardSpec s{0, 3, {2, 1, 1}, true, false};
  std::vector<std::pair<int64_t, int64_t>> got;
  for (int r = 0; r < 3; ++r) {
    s.rank = r;
    got.push_back(share_range(8, s, "heads"));
  }
  EXPECT_EQ(got, (std::vector<std::pair<int64_t, int64_t>>{{0, 4}, {4, 6}, {6, 8}}));
  s.shares = {};
  got.clear();
  for (int r = 0; r < 3; ++r) {
    s.rank = r;
    got.push_back(share_range(8, s, "heads"));
  }
  EXPECT_EQ(got, (std::vector<std::pair<int64_t, int64_t>>{{0, 3}, {3, 5}, {5, 8}}));
  s.rank = 1;  // 2 units over 3 ranks: the middle rank's part rounds to none
  EXPECT_THROW(share_range(2, s, "heads"), Error);
  EXPECT_EQ(parse_shares("2,1,1", 3), (std::vector<double>{2, 1, 1}));
  EXPECT_THROW(parse_shares("2,0,1", 3), Error);
  EXPECT_THROW(parse_shares("2,1", 3), Error);
}

// 3 blocks an expert over 2 ranks: dealt block-major, 6 one-block pieces each, instead of 2 and 1 blocks of every
// expert; 4 blocks: one contiguous piece of every expert.
TEST(TensorParallel, ExpertBlocksAreDealtWhenTheyDoNotDivide) {
  using P = std::tuple<int64_t, int64_t, int64_t>;
  auto pieces = [](int64_t units, int rank) {
    std::vector<P> out;
    for (const ExpertPiece& p : expert_pieces(4, units, ShardSpec{rank, 2, {}, true, false}, "experts")) {
      out.emplace_back(p.expert, p.first, p.count);
    }
    return out;
  };
  // Uneven shares: dealt in block-major order.
  std::vector<P> dealt;
  for (const ExpertPiece& p : expert_pieces(2, 2, ShardSpec{0, 2, {2, 1}, true, false}, "experts")) {
    dealt.emplace_back(p.expert, p.first, p.count);
    EXPECT_EQ(p.shared, -1);
  }
  EXPECT_EQ(dealt, (std::vector<P>{{0, 0, 1}, {0, 1, 1}, {1, 0, 1}}));
  EXPECT_EQ(pieces(4, 1), (std::vector<P>{{0, 2, 2}, {1, 2, 2}, {2, 2, 2}, {3, 2, 2}}));
}

// Equal shares: each rank holds its own block of every expert and both hold the third, which routed tokens deal.
TEST(TensorParallel, LeftOverExpertBlocksAreHeldByEveryRankAndDealtPerToken) {
  for (int rank = 0; rank < 2; ++rank) {
    const auto pieces = expert_pieces(2, 3, ShardSpec{rank, 2, {}, true, false}, "experts");
    ASSERT_EQ(pieces.size(), 4u);
    for (int64_t e = 0; e < 2; ++e) {
      const ExpertPiece& own = pieces[static_cast<size_t>(2 * e)];
      const ExpertPiece& shared = pieces[static_cast<size_t>(2 * e + 1)];
      EXPECT_EQ(own.expert, e);
      EXPECT_EQ(own.first, rank);
      EXPECT_EQ(own.shared, -1);
      EXPECT_EQ(shared.first, 2);
      EXPECT_EQ(shared.shared, 0);
    }
  }
  // Five blocks over 4 ranks would hold 2 where 1.25 is the share: past 1.5x, so dealt instead.
  for (const ExpertPiece& p : expert_pieces(2, 5, ShardSpec{0, 4, {}, true, false}, "experts")) EXPECT_EQ(p.shared, -1);
  // A token's 8 experts: 4 shared blocks run on each of 2 ranks; of 8 x 2 shared blocks over 3 ranks, 5 or 6 each.
  for (int64_t t = 0; t < 5; ++t) {
    std::vector<int> runs(2, 0), runs3(3, 0);
    for (int64_t i = 0; i < 8; ++i) {
      ++runs[static_cast<size_t>(shared_piece_rank(t * 8 + i, 0, 1, 2))];
      for (int j = 0; j < 2; ++j) ++runs3[static_cast<size_t>(shared_piece_rank(t * 8 + i, j, 2, 3))];
    }
    EXPECT_EQ(runs, (std::vector<int>{4, 4}));
    for (int n : runs3) EXPECT_TRUE(n == 5 || n == 6) << n;
  }
}

// Shared expert blocks give one node's logits: 3 and 5 Q8_0 blocks of expert rows over 2 ranks, 10 over 3.
TEST(TensorParallel, SharedExpertBlocksGiveOneNodesLogits) {
  const auto dir = std::filesystem::temp_directory_path() / fmt::format("tessera-tp-shared-{}", ::getpid());
  std::filesystem::create_directories(dir);
  for (const auto& [n_ff_exp, n_ranks] : {std::pair<int64_t, int>{96, 2}, {160, 2}, {320, 3}}) {
    SyntheticSpec spec;
    spec.config = preset_config("tiny", "qwen3moe");
    spec.config.n_ff_exp = n_ff_exp;
    spec.type = "q8_0";
    spec.threads = 1;
    const auto file = dir / fmt::format("moe-{}.gguf", n_ff_exp);
    write_synthetic_model(spec, file);
    StageOptions opts{1, 64, GgmlType::F32};
    const Result one = run_file(file, opts, 6, 1, {});
    const Result many = run_file(file, opts, 6, n_ranks, ShardSpec{0, n_ranks, {}, true, false});
    EXPECT_LE(max_diff(one.prompt_logits, many.prompt_logits), 1e-3f) << n_ff_exp << " over " << n_ranks;
    EXPECT_EQ(one.greedy, many.greedy) << n_ff_exp << " over " << n_ranks;
  }
  std::filesystem::remove_all(dir);
}

// A rank that never arrives ends the others' collective with an error instead of a hang.
TEST(TensorParallel, AMissingRankIsAnErrorNotAHang) {
  collective::ThreadGroup group(2, std::chrono::milliseconds(300));
  std::vector<float> v(4, 1.0f);
  const auto start = std::chrono::steady_clock::now();
  EXPECT_THROW(group.rank(0).all_reduce_sum(v), Error);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
}

// Point-to-point messages (a pipeline stage's activations): in the order sent, from the rank named; a receive from a
// rank that sends nothing is an error after the timeout.
TEST(TensorParallel, ThreadGroupMessagesArriveInOrderFromTheirSender) {
  collective::ThreadGroup group(3, std::chrono::milliseconds(300));
  group.rank(0).send(std::vector<uint8_t>{1, 2}, 2);
  group.rank(1).send(std::vector<uint8_t>{9}, 2);
  group.rank(0).send(std::vector<uint8_t>{3}, 2);
  std::vector<uint8_t> got;
  group.rank(2).recv(got, 0);
  EXPECT_EQ(got, (std::vector<uint8_t>{1, 2}));
  group.rank(2).recv(got, 0);
  EXPECT_EQ(got, (std::vector<uint8_t>{3}));
  group.rank(2).recv(got, 1);
  EXPECT_EQ(got, (std::vector<uint8_t>{9}));
  EXPECT_EQ(group.rank(0).stats().bytes, 3u);
  EXPECT_THROW(group.rank(2).recv(got, 1), Error);
  EXPECT_THROW(group.rank(0).send(std::vector<uint8_t>{1}, 0), Error);
}

}  // namespace
}  // namespace tessera
