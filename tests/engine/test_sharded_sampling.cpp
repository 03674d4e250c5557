// Sampling split by vocabulary over ranks (ShardedSampler, NucleusCut) against one node's Sampler on the whole row:
// ranks as threads with uneven ranges, many seeds and parameter sets, rows with ties, -inf, +inf and NaN, token for
// token over steps whose accepted tokens feed the penalties; the same logprobs and draws; and no collective carries
// anything that grows with the vocabulary.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <numeric>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "collective/thread_group.h"
#include "engine/nucleus.h"
#include "engine/sharded_sampling.h"
#include "grammar/constraint.h"
#include "grammar/parser.h"
#include "grammar/token_trie.h"
#include "util/error.h"

namespace tessera {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

// Passes every collective on to a thread group's rank, remembering the largest payload this rank put into one.
class Counting : public collective::Communicator {
 public:
  explicit Counting(collective::Communicator& inner) : inner_(inner) {}
  int rank() const override { return inner_.rank(); }
  int size() const override { return inner_.size(); }
  void all_reduce_sum(std::span<float> data) override {
    note(data.size() * sizeof(float));
    inner_.all_reduce_sum(data);
  }
  void broadcast(std::vector<uint8_t>& bytes, int root) override {
    note(rank() == root ? bytes.size() : 0);
    inner_.broadcast(bytes, root);
  }
  void gather(std::span<const float> mine, std::vector<float>& all, int root) override {
    note(mine.size() * sizeof(float));
    inner_.gather(mine, all, root);
  }
  void all_gather(std::span<const uint8_t> mine, std::vector<uint8_t>& all) override {
    note(mine.size());
    inner_.all_gather(mine, all);
  }
  void send(std::span<const uint8_t> bytes, int to) override {
    note(bytes.size());
    inner_.send(bytes, to);
  }
  void recv(std::vector<uint8_t>& bytes, int from) override { inner_.recv(bytes, from); }
  size_t largest = 0;
  size_t calls = 0;
  size_t total = 0;

 private:
  void note(size_t n) {
    largest = std::max(largest, n);
    ++calls;
    total += n;
  }
  collective::Communicator& inner_;
};

// Rows that stress the orderings: normal logits, many exact ties (a coarse grid, copies of the best), some -inf,
// NaN and +inf, now and then a flat row or one that is -inf everywhere.
std::vector<float> random_row(size_t n, std::mt19937& gen) {
  std::normal_distribution<float> normal(0.0f, 3.0f);
  std::uniform_int_distribution<int> kind_of(0, 19);
  std::uniform_int_distribution<size_t> at(0, n - 1);
  std::vector<float> row(n);
  const int kind = kind_of(gen);
  if (kind == 0) {
    std::fill(row.begin(), row.end(), 0.5f);
    return row;
  }
  if (kind == 1) {
    std::fill(row.begin(), row.end(), -kInf);
    return row;
  }
  for (float& l : row) l = normal(gen);
  if (kind < 6) {
    for (float& l : row) l = std::round(l * 2.0f) / 2.0f;  // thousands of ties
  }
  if (kind < 10) {
    const float best = *std::max_element(row.begin(), row.end());
    for (int i = 0; i < 5; ++i) row[at(gen)] = best;  // ties for first place, in any rank's range
  }
  if (kind == 10) row[at(gen)] = kInf;
  if (kind == 11) row[at(gen)] = row[at(gen)] = kInf;
  for (int i = 0; i < 20; ++i) row[at(gen)] = -kInf;
  for (int i = 0; i < 5; ++i) row[at(gen)] = std::numeric_limits<float>::quiet_NaN();
  if (kind == 12) row[at(gen)] = -0.0f;
  return row;
}

SamplerParams with(float temperature, int32_t top_k, float top_p, float min_p) {
  SamplerParams p;
  p.temperature = temperature;
  p.top_k = top_k;
  p.top_p = top_p;
  p.min_p = min_p;
  return p;
}

SamplerParams penalised(SamplerParams p, int32_t last_n = 16) {
  p.repeat_penalty = 1.3f;
  p.frequency_penalty = 0.2f;
  p.presence_penalty = 0.4f;
  p.repeat_last_n = last_n;
  return p;
}

struct Config {
  std::string name;
  SamplerParams params;
  int32_t top_logprobs = -1;
};

std::vector<Config> configs() {
  return {
      {"greedy", with(0.0f, 40, 0.95f, 0.05f)},
      {"greedy_penalties_logprobs", penalised(with(0.0f, 40, 0.95f, 0.05f)), 3},
      {"temperature_only", with(0.7f, 0, 1.0f, 0.0f)},
      {"defaults", SamplerParams{}},
      {"top_k_5_hot", with(1.3f, 5, 1.0f, 0.0f)},
      {"top_k_3000_top_p", with(0.9f, 3000, 0.9f, 0.0f)},  // more than a rank holds; top-p's histogram path
      {"top_k_whole_vocabulary", with(1.0f, 20000, 1.0f, 0.1f)},
      {"top_p", with(0.8f, 0, 0.9f, 0.0f)},
      {"top_p_at_temperature_1_min_p", with(1.0f, 0, 0.5f, 0.1f)},
      {"top_p_tiny", with(1.0f, 0, 1e-6f, 0.0f)},
      {"top_p_0_999", with(1.5f, 0, 0.999f, 0.0f)},
      {"min_p", with(0.8f, 0, 1.0f, 0.05f)},
      {"penalties_top_p", penalised(with(0.9f, 0, 0.8f, 0.0f))},
      {"penalties_whole_history_top_k", penalised(with(0.9f, 10, 0.9f, 0.05f), -1)},
      {"logprobs_top_p", with(0.8f, 0, 0.9f, 0.0f), 5},
      {"logprobs_top_k", with(0.8f, 20, 1.0f, 0.0f), 0},
      {"logprobs_temperature", with(0.6f, 0, 1.0f, 0.0f), 4},
  };
}

// Steps of `rows` rows (a sampler each) on one node and over ranks split at `bounds`; every pick, logprob and draw
// count must agree. Notes the largest payload any rank put into one collective, per row, and the most collectives
// a rank took part in for one step.
struct Traffic {
  size_t largest_per_row = 0;
  size_t calls_per_step = 0;
};

// A grammar over a made-up vocabulary (token t writes 1 to 3 copies of one of five letters; token 0 ends), so a
// mask leaves tokens allowed in every rank's range.
struct TestGrammar {
  std::shared_ptr<const grammar::Grammar> g =
      std::make_shared<grammar::Grammar>(grammar::parse_grammar("root ::= ( \"a\"+ | \"bb\" | \"c\" \"d\"* )* \"e\""));
  std::shared_ptr<const grammar::TokenTrie> trie;
  explicit TestGrammar(int64_t n_vocab) {
    std::vector<std::string> pieces(static_cast<size_t>(n_vocab));
    for (int64_t t = 1; t < n_vocab; ++t) {
      pieces[static_cast<size_t>(t)] =
          std::string(static_cast<size_t>(1 + t % 3), static_cast<char>('a' + (t / 3) % 5));
    }
    trie = std::make_shared<grammar::TokenTrie>(pieces, std::vector<int32_t>{0});
  }
  void constrain(Sampler& s) const { s.set_grammar("test", std::make_shared<grammar::TokenConstraint>(g, trie)); }
};

void expect_same_picks(const Config& config, const std::vector<int64_t>& bounds, uint32_t seed, int steps, size_t rows,
                       Traffic* traffic = nullptr, const TestGrammar* grammar = nullptr) {
  const int ranks = static_cast<int>(bounds.size()) - 1;
  const int64_t n_vocab = bounds.back();
  std::mt19937 gen(seed);
  std::vector<std::unique_ptr<Sampler>> one;
  std::vector<std::unique_ptr<Sampler>> apart;
  for (size_t i = 0; i < rows; ++i) {
    SamplerParams p = config.params;
    p.seed = seed * 31 + i;
    one.push_back(std::make_unique<Sampler>(p, static_cast<int32_t>(n_vocab)));
    apart.push_back(std::make_unique<Sampler>(p, static_cast<int32_t>(n_vocab)));
    for (int32_t t : {3, 3, 17, 4000, 12000, 19999}) {  // a history for the penalties, in every rank's range
      one.back()->accept(t);
      apart.back()->accept(t);
    }
    if (grammar != nullptr) {
      grammar->constrain(*one.back());
      grammar->constrain(*apart.back());
    }
  }
  collective::ThreadGroup group(ranks, std::chrono::seconds(20));
  std::vector<std::unique_ptr<Counting>> comms;
  std::vector<ShardedSampler> samplers(static_cast<size_t>(ranks));
  for (int r = 0; r < ranks; ++r) comms.push_back(std::make_unique<Counting>(group.rank(r)));
  for (int step = 0; step < steps; ++step) {
    std::vector<std::vector<float>> logits;
    for (size_t i = 0; i < rows; ++i) logits.push_back(random_row(static_cast<size_t>(n_vocab), gen));
    std::vector<SampleRequest> requests;
    for (auto& s : apart) requests.push_back({s.get(), config.top_logprobs});
    const std::vector<SampleSpec> specs = sample_specs(requests);
    const std::vector<uint8_t> sent = encode_specs(specs);
    std::vector<SampledToken> got;
    std::vector<std::string> errors(static_cast<size_t>(ranks));
    for (auto& c : comms) c->largest = c->calls = 0;
    auto rank_main = [&](int r) {
      try {
        const auto from = bounds[static_cast<size_t>(r)];
        const auto n_local = bounds[static_cast<size_t>(r) + 1] - from;
        std::vector<float> mine;
        for (const auto& row : logits) mine.insert(mine.end(), row.begin() + from, row.begin() + from + n_local);
        std::vector<SampledToken> none;
        if (r == 0) {
          samplers[0].sample(*comms[0], specs, mine, from, n_local, n_vocab, requests, got);
        } else {
          samplers[static_cast<size_t>(r)].sample(*comms[static_cast<size_t>(r)], decode_specs(sent), mine, from,
                                                  n_local, n_vocab, {}, none);
          if (!none.empty()) throw Error("a rank other than 0 got picks");
        }
      } catch (const std::exception& e) {
        errors[static_cast<size_t>(r)] = e.what();
      }
    };
    std::vector<std::thread> threads;
    for (int r = 1; r < ranks; ++r) threads.emplace_back(rank_main, r);
    rank_main(0);
    for (auto& t : threads) t.join();
    for (const auto& e : errors) EXPECT_EQ(e, "") << config.name;
    if (::testing::Test::HasFailure()) return;
    EXPECT_EQ(got.size(), rows);
    for (size_t i = 0; i < rows && i < got.size(); ++i) {
      const SampledToken want = Executor::sample_row({one[i].get(), config.top_logprobs}, logits[i]);
      ASSERT_EQ(got[i].token, want.token) << config.name << " seed " << seed << " step " << step << " row " << i;
      EXPECT_EQ(got[i].logprob, want.logprob) << config.name << " step " << step;
      ASSERT_EQ(got[i].top.size(), want.top.size()) << config.name;
      for (size_t k = 0; k < want.top.size(); ++k) {
        EXPECT_EQ(got[i].top[k].token, want.top[k].token) << config.name << " step " << step;
        EXPECT_EQ(got[i].top[k].logprob, want.top[k].logprob) << config.name << " step " << step;
      }
      ASSERT_EQ(apart[i]->draws(), one[i]->draws()) << config.name;
      if (grammar != nullptr && grammar->trie->is_end(want.token)) {
        grammar->constrain(*one[i]);  // the grammar ended: start it again
        grammar->constrain(*apart[i]);
        continue;
      }
      if (grammar != nullptr) {
        ASSERT_TRUE(one[i]->grammar()->allows(want.token)) << config.name << " picked a masked token";
      }
      one[i]->accept(want.token);
      apart[i]->accept(want.token);
    }
    for (const auto& c : comms) {
      if (traffic == nullptr) continue;
      traffic->largest_per_row = std::max(traffic->largest_per_row, c->largest / rows);
      traffic->calls_per_step = std::max(traffic->calls_per_step, c->calls);
    }
  }
}

class ShardedSampling : public ::testing::TestWithParam<Config> {};

TEST_P(ShardedSampling, SamePicksAsOneNodeOnTwoAndThreeUnevenRanks) {
  const Config& config = GetParam();
  const int64_t n_vocab = 20000;
  // Per row, what any rank put into any one collective: its best token and draw (16 bytes), its top-k and top
  // logprobs candidates (8 bytes each), a top-p histogram round (9 KiB at most); never a share of the row.
  const size_t k = config.params.top_k > 0 && config.params.top_k < n_vocab ? config.params.top_k : 0;
  const size_t n_top = config.top_logprobs > 0 ? static_cast<size_t>(config.top_logprobs) : 0;
  const size_t bound = 16 + 8 * (k + n_top) + 9 * 1024 + 8;
  ASSERT_LT(bound, n_vocab * sizeof(float) / 2);
  Traffic traffic;
  for (uint32_t seed : {1u, 2u, 3u}) {
    expect_same_picks(config, {0, 7001, n_vocab}, seed, 12, 2, &traffic);
    expect_same_picks(config, {0, 2000, 17000, n_vocab}, seed + 100, 12, 3, &traffic);
    if (HasFailure()) return;
  }
  EXPECT_LE(traffic.largest_per_row, bound) << config.name;
  // A few small collectives a step: candidates, a handful of top-p rounds, one broadcast per rank, the picks.
  EXPECT_LE(traffic.calls_per_step, 12u) << config.name;
}

INSTANTIATE_TEST_SUITE_P(Configs, ShardedSampling, ::testing::ValuesIn(configs()),
                         [](const auto& p) { return p.param.name; });

TEST(ShardedSampling, ManySeedsOfTopPAndTemperatureOnThreeRanks) {
  for (uint32_t seed = 10; seed < 40; ++seed) {
    expect_same_picks({"top_p", with(0.9f, 0, 0.7f + 0.01f * static_cast<float>(seed % 25), 0.0f)},
                      {0, 5000, 5003, 20000}, seed, 4, 1);
    expect_same_picks({"temperature", with(0.5f + 0.05f * static_cast<float>(seed % 10), 0, 1.0f, 0.0f)},
                      {0, 19000, 19999, 20000}, seed, 4, 1);
    if (HasFailure()) return;
  }
}

// A grammar's mask, computed on rank 0 and sent with the specs, gives every rank's range the same -inf entries as
// one node's Sampler: the picks agree and are always allowed tokens.
TEST(ShardedSampling, GrammarMaskOnEveryRank) {
  const TestGrammar grammar(20000);
  for (const Config& config : configs()) {
    expect_same_picks(config, {0, 7001, 20000}, 5, 10, 2, nullptr, &grammar);
    expect_same_picks(config, {0, 2000, 17000, 20000}, 6, 10, 3, nullptr, &grammar);
    if (HasFailure()) return;
  }
}

// NucleusCut directly: every split of a row (ranks simulated in turn) ends with one node's cut, and that cut is
// the smallest best-first prefix whose fixed-point mass reaches top_p of the total, found by a full sort.
TEST(NucleusCut, EverySplitFindsTheFullSortsCut) {
  std::mt19937 gen(5);
  for (int round = 0; round < 200; ++round) {
    const size_t n = round % 3 == 0 ? 300 : 6000;
    std::vector<float> row = random_row(n, gen);
    for (float& l : row) l = sanitize_logit(l);
    const float max_logit = *std::max_element(row.begin(), row.end());
    const float top_p = std::uniform_real_distribution<float>(0.05f, 0.999f)(gen);

    NucleusCut one;
    const uint64_t cut = one.solve(row, max_logit, top_p);
    if (max_logit == -kInf) {
      EXPECT_EQ(cut, 0u);
      continue;
    }
    std::vector<size_t> order(n);
    std::iota(order.begin(), order.end(), 0);
    std::sort(order.begin(), order.end(),
              [&](size_t a, size_t b) { return row[a] > row[b] || (row[a] == row[b] && a < b); });
    auto mass = [&](size_t i) {
      return static_cast<uint64_t>(static_cast<double>(std::exp(row[i] - max_logit)) * 0x1p62);
    };
    NucleusCut::Mass total = 0;
    for (size_t i = 0; i < n; ++i) total += mass(i);
    const NucleusCut::Mass target =
        (total * static_cast<uint64_t>(std::llround(static_cast<double>(top_p) * 0x1p32))) >> 32;
    NucleusCut::Mass prefix = 0;
    size_t last = 0;
    for (size_t i : order) {
      prefix += mass(i);
      last = i;
      if (prefix >= target && mass(i) > 0) break;
    }
    ASSERT_EQ(cut, order_key(row[last], static_cast<int32_t>(last))) << "round " << round;
    for (size_t i = 0; i < n; ++i) {
      EXPECT_EQ(one.kept(row[i], static_cast<int32_t>(i)), order_key(row[i], static_cast<int32_t>(i)) >= cut);
    }

    // The same row over 2 to 4 ranks at random bounds.
    const int ranks = 2 + round % 3;
    std::vector<int32_t> bounds = {0};
    for (int r = 1; r < ranks; ++r) bounds.push_back(std::uniform_int_distribution<int32_t>(1, 99)(gen) * n / 100);
    bounds.push_back(static_cast<int32_t>(n));
    std::sort(bounds.begin(), bounds.end());
    std::vector<NucleusCut> parts(static_cast<size_t>(ranks));
    for (int r = 0; r < ranks; ++r) {
      const auto from = static_cast<size_t>(bounds[static_cast<size_t>(r)]);
      const auto to = static_cast<size_t>(bounds[static_cast<size_t>(r) + 1]);
      parts[static_cast<size_t>(r)].begin(std::span<const float>(row).subspan(from, to - from),
                                          static_cast<int32_t>(from), max_logit, top_p);
    }
    int rounds = 0;
    while (!parts[0].done()) {
      std::vector<uint8_t> all;
      for (auto& p : parts) {
        const auto m = p.message();
        all.insert(all.end(), m.begin(), m.end());
      }
      for (auto& p : parts) p.read(all, ranks);
      ASSERT_LT(++rounds, 12);
    }
    for (const auto& p : parts) {
      ASSERT_TRUE(p.done());
      EXPECT_EQ(p.cut_key(), cut) << "round " << round << " over " << ranks << " ranks";
    }
  }
}

TEST(ShardedSampling, MalformedSpecsAreErrors) {
  SamplerParams p;
  p.seed = 1;
  Sampler s(p, 100);
  const std::vector<SampleRequest> requests = {{&s, 2}};
  std::vector<uint8_t> bytes = encode_specs(sample_specs(requests));
  const auto back = decode_specs(bytes);
  ASSERT_EQ(back.size(), 1u);
  EXPECT_EQ(back[0].params, s.params());
  EXPECT_EQ(back[0].top_logprobs, 2);
  bytes.pop_back();
  EXPECT_THROW(decode_specs(bytes), Error);
  bytes.push_back(0);
  bytes.push_back(0);
  EXPECT_THROW(decode_specs(bytes), Error);
}

}  // namespace
}  // namespace tessera
