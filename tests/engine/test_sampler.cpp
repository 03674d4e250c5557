// Sampler: greedy and seeded draws, each truncation step checked against the renormalised distribution it should
// leave, the penalty arithmetic, logprobs, and parameter validation.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "engine/sampler.h"
#include "util/error.h"

namespace tessera {
namespace {

// Everything off except what a test turns on.
SamplerParams plain(float temperature = 1.0f, uint64_t seed = 1234) {
  SamplerParams p;
  p.temperature = temperature;
  p.top_k = 0;
  p.top_p = 1.0f;
  p.min_p = 0.0f;
  p.seed = seed;
  return p;
}

std::vector<float> log_probs(const std::vector<double>& probs) {
  std::vector<float> logits;
  for (double p : probs) logits.push_back(static_cast<float>(std::log(p)));
  return logits;
}

std::vector<double> frequencies(Sampler& sampler, const std::vector<float>& logits, int draws) {
  std::vector<double> freq(logits.size(), 0.0);
  for (int i = 0; i < draws; ++i) freq[static_cast<size_t>(sampler.sample(logits))] += 1.0 / draws;
  return freq;
}

// Tokens outside the kept set must never come up, and the rest must follow `expected` (already renormalised).
void expect_distribution(const std::vector<double>& freq, const std::vector<double>& expected) {
  ASSERT_EQ(freq.size(), expected.size());
  for (size_t i = 0; i < freq.size(); ++i) {
    if (expected[i] == 0.0) {
      EXPECT_EQ(freq[i], 0.0) << "token " << i << " should have been truncated";
    } else {
      EXPECT_NEAR(freq[i], expected[i], 0.015) << "token " << i;
    }
  }
}

std::vector<double> normalised(std::vector<double> weights) {
  const double total = std::accumulate(weights.begin(), weights.end(), 0.0);
  for (double& w : weights) w /= total;
  return weights;
}

std::vector<float> random_logits(size_t n, uint32_t seed) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> normal(0.0f, 3.0f);
  std::vector<float> logits(n);
  for (float& l : logits) l = normal(gen);
  return logits;
}

constexpr int kDraws = 20000;

TEST(Sampler, GreedyPicksTheArgmaxAndTheLowestIndexOnTies) {
  Sampler sampler(plain(0.0f), 5);
  EXPECT_EQ(sampler.sample(std::vector<float>{0.1f, 2.0f, -1.0f, 1.9f, 0.0f}), 1);
  EXPECT_EQ(sampler.sample(std::vector<float>{0.0f, 3.0f, 1.0f, 3.0f, 3.0f}), 1);
  // llama.cpp treats a negative temperature as greedy too.
  Sampler negative(plain(-1.0f), 3);
  EXPECT_EQ(negative.sample(std::vector<float>{-5.0f, -2.0f, -3.0f}), 1);
  // NaN logits are never chosen.
  const float nan = std::numeric_limits<float>::quiet_NaN();
  EXPECT_EQ(negative.sample(std::vector<float>{nan, -2.0f, nan}), 1);
}

TEST(Sampler, SameSeedSameTokensDifferentSeedDifferentTokens) {
  const std::vector<float> logits(50, 0.0f);  // uniform: every draw depends on the random stream
  auto run = [&](uint64_t seed) {
    Sampler sampler(plain(1.0f, seed), 50);
    std::vector<int32_t> tokens;
    for (int i = 0; i < 200; ++i) tokens.push_back(sampler.sample(logits));
    return tokens;
  };
  EXPECT_EQ(run(42), run(42));
  EXPECT_NE(run(42), run(43));
  EXPECT_NE(run(42), run(uint64_t{42} | (uint64_t{1} << 40)));  // the high half of the seed counts

  Sampler sampler(plain(1.0f, 42), 50);
  EXPECT_EQ(sampler.seed(), 42u);
  std::vector<int32_t> first;
  for (int i = 0; i < 200; ++i) first.push_back(sampler.sample(logits));
  sampler.reset();
  std::vector<int32_t> again;
  for (int i = 0; i < 200; ++i) again.push_back(sampler.sample(logits));
  EXPECT_EQ(first, again);
}

// What a pipeline's last stage does: a fresh sampler restored from another's state picks what the original
// would, token for token; the original then skips the draw the copy made and the two stay in step.
TEST(Sampler, RestoredFromItsStateASamplerPicksTheSame) {
  for (int32_t last_n : {0, 6, -1}) {
    SamplerParams p = plain(1.0f, 77);
    p.repeat_penalty = 1.5f;
    p.frequency_penalty = 0.4f;
    p.presence_penalty = 0.3f;
    p.repeat_last_n = last_n;
    p.top_k = 20;
    Sampler original(p, 64);
    std::unique_ptr<Sampler> cached;  // a long-lived copy, as a worker keeps per sequence
    for (int32_t t : {3, 5, 5, 9}) original.accept(t);
    for (int step = 0; step < 60; ++step) {
      const auto logits = random_logits(64, static_cast<uint32_t>(step));
      const SamplerState state = original.state();
      EXPECT_EQ(state.params.seed, 77u);
      if (last_n == 0) {
        EXPECT_TRUE(state.history.empty());
      } else if (last_n > 0) {
        EXPECT_LE(state.history.size(), static_cast<size_t>(last_n));
      }
      Sampler fresh(state.params, 64);
      fresh.restore(state.draws, state.history);
      if (!cached || step % 7 == 0) cached = std::make_unique<Sampler>(state.params, 64);
      cached->restore(state.draws, state.history);
      const SampledToken remote = fresh.sample_with_logprobs(logits, 3);
      const int32_t again = cached->sample(logits);
      const SampledToken here = original.sample_with_logprobs(logits, 3);
      ASSERT_EQ(remote.token, here.token) << "last_n " << last_n << " step " << step;
      EXPECT_EQ(again, here.token);
      EXPECT_EQ(remote.logprob, here.logprob);
      EXPECT_EQ(fresh.draws(), original.draws());
      original.accept(here.token);
    }
    // skip_sample moves the stream as one sample() would.
    Sampler a(p, 64), b(p, 64);
    const auto logits = random_logits(64, 1);
    a.sample(logits);
    b.skip_sample();
    EXPECT_EQ(a.draws(), 1u);
    EXPECT_EQ(b.draws(), 1u);
    EXPECT_EQ(a.sample(logits), b.sample(logits));
  }
  // Greedy draws nothing, and a randomly seeded sampler's state names a seed that is not "random".
  Sampler greedy(plain(0.0f), 8);
  greedy.sample(random_logits(8, 2));
  greedy.skip_sample();
  EXPECT_EQ(greedy.draws(), 0u);
  Sampler random(plain(1.0f, SamplerParams::kRandomSeed), 8);
  EXPECT_NE(random.state().params.seed, SamplerParams::kRandomSeed);
  EXPECT_EQ(random.state().params.seed, random.seed());
}

TEST(Sampler, TopKOfOneIsGreedy) {
  SamplerParams params;  // the defaults otherwise, temperature included
  params.top_k = 1;
  params.seed = 7;
  Sampler top1(params, 1000);
  Sampler greedy(plain(0.0f), 1000);
  for (uint32_t round = 0; round < 50; ++round) {
    std::vector<float> logits = random_logits(1000, round);
    logits[500] = logits[900] = *std::max_element(logits.begin(), logits.end()) + 1.0f;  // a tie for first place
    EXPECT_EQ(top1.sample(logits), greedy.sample(logits));
    EXPECT_EQ(top1.sample(logits), 500);
  }
}

TEST(Sampler, TopKKeepsTheKBestRenormalised) {
  SamplerParams params = plain();
  params.top_k = 2;
  Sampler sampler(params, 4);
  // The best two are not at the front, so the selection has to find them.
  const std::vector<float> logits = log_probs({0.1, 0.3, 0.2, 0.4});
  expect_distribution(frequencies(sampler, logits, kDraws), {0.0, 3.0 / 7.0, 0.0, 4.0 / 7.0});
}

TEST(Sampler, TopPKeepsTheSmallestPrefixReachingP) {
  const std::vector<float> logits = log_probs({0.15, 0.5, 0.05, 0.3});
  SamplerParams params = plain();
  params.top_p = 0.75f;  // 0.5 < 0.75 <= 0.5 + 0.3
  Sampler two(params, 4);
  expect_distribution(frequencies(two, logits, kDraws), {0.0, 0.625, 0.0, 0.375});

  params.top_p = 0.9f;  // 0.8 < 0.9 <= 0.95
  Sampler three(params, 4);
  expect_distribution(frequencies(three, logits, kDraws), normalised({0.15, 0.5, 0.0, 0.3}));

  // The same on a vocabulary big enough for the histogram path: five tokens carry 90% of the mass and 1995
  // others share the rest.
  std::vector<double> probs(2000, 0.1 / 1995);
  probs[1500] = 0.3;
  probs[200] = 0.25;
  probs[1000] = 0.2;
  probs[400] = 0.1;
  probs[1200] = 0.05;
  std::vector<double> expected(2000, 0.0);
  expected[1500] = 0.3 / 0.75;
  expected[200] = 0.25 / 0.75;
  expected[1000] = 0.2 / 0.75;
  params.top_p = 0.7f;  // 0.55 < 0.7 <= 0.75
  Sampler big(params, 2000);
  expect_distribution(frequencies(big, log_probs(probs), kDraws), expected);
}

// Draws from a top-p sampler and checks every token against the set a full sort (logit descending, lower id
// first on ties) says top-p keeps.
void expect_top_p_set(const std::vector<float>& logits, float top_p, size_t min_kept) {
  std::vector<size_t> order(logits.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return logits[a] > logits[b]; });
  double total = 0.0;
  for (float l : logits) total += std::exp(static_cast<double>(l));
  std::vector<bool> kept(logits.size(), false);
  double cumulative = 0.0;
  size_t n_kept = 0;
  for (size_t idx : order) {
    kept[idx] = true;
    ++n_kept;
    cumulative += std::exp(static_cast<double>(logits[idx])) / total;
    if (cumulative >= top_p) break;
  }
  ASSERT_GE(n_kept, min_kept);
  ASSERT_LT(n_kept, logits.size());

  SamplerParams params = plain();
  params.top_p = top_p;
  Sampler sampler(params, static_cast<int32_t>(logits.size()));
  std::vector<bool> seen(logits.size(), false);
  for (int i = 0; i < 2000; ++i) {
    const int32_t token = sampler.sample(logits);
    ASSERT_TRUE(kept[static_cast<size_t>(token)]) << "token " << token << " is outside the top-p set";
    seen[static_cast<size_t>(token)] = true;
  }
  EXPECT_TRUE(seen[order[0]]);
}

TEST(Sampler, TopPOverLargeVocabulariesMatchesAFullSort) {
  // Spread-out logits over a big vocabulary (the histogram path), hundreds of survivors.
  expect_top_p_set(random_logits(5000, 99), 0.9f, 256);
  // A flat distribution under the histogram threshold: the quickselect alone has to find ~900 tokens.
  std::vector<float> flat = random_logits(1000, 3);
  for (float& l : flat) l *= 0.1f;
  expect_top_p_set(flat, 0.9f, 800);
  // Thousands of exact ties in the bucket where the mass crosses top_p: lower ids must win them.
  std::vector<float> ties(6000, 0.0f);
  for (size_t i = 0; i < 10; ++i) ties[i * 7] = 5.0f;
  ties[5999] = -20.0f;
  expect_top_p_set(ties, 0.7f, 1000);
}

TEST(Sampler, MinPDropsTokensBelowAFractionOfTheBest) {
  const std::vector<float> logits = log_probs({0.05, 0.3, 0.15, 0.5});
  SamplerParams params = plain();
  params.min_p = 0.25f;  // keeps p >= 0.125
  Sampler sampler(params, 4);
  expect_distribution(frequencies(sampler, logits, kDraws), normalised({0.0, 0.3, 0.15, 0.5}));
}

TEST(Sampler, TemperatureScalesAfterTruncation) {
  const std::vector<float> logits = {2.0f, 1.0f, 0.0f};
  Sampler hot(plain(2.0f), 3);
  expect_distribution(frequencies(hot, logits, kDraws), normalised({std::exp(1.0), std::exp(0.5), std::exp(0.0)}));

  // With the temperature applied first, the flatter distribution would let a third token into the top-p set.
  SamplerParams params = plain(3.0f);
  params.top_p = 0.75f;
  Sampler truncated(params, 4);
  expect_distribution(frequencies(truncated, log_probs({0.5, 0.3, 0.15, 0.05}), kDraws),
                      normalised({std::cbrt(0.5), std::cbrt(0.3), 0.0, 0.0}));
}

TEST(Sampler, PenaltiesChangeLogitsAsDefined) {
  SamplerParams params = plain();
  params.repeat_penalty = 2.0f;
  params.frequency_penalty = 0.5f;
  params.presence_penalty = 0.25f;
  params.repeat_last_n = -1;  // whole history
  Sampler sampler(params, 4);
  for (int32_t token : {1, 1, 2}) sampler.accept(token);
  std::vector<float> logits = {1.0f, 2.0f, -1.0f, 3.0f};
  sampler.apply_penalties(logits);
  EXPECT_FLOAT_EQ(logits[0], 1.0f);
  EXPECT_FLOAT_EQ(logits[1], 2.0f / 2.0f - (2 * 0.5f + 0.25f));   // positive: divided
  EXPECT_FLOAT_EQ(logits[2], -1.0f * 2.0f - (1 * 0.5f + 0.25f));  // negative: multiplied
  EXPECT_FLOAT_EQ(logits[3], 3.0f);

  // A window of 2 sees only the last two accepted tokens: 1 once and 2 once.
  params.repeat_last_n = 2;
  Sampler windowed(params, 4);
  for (int32_t token : {1, 1, 2}) windowed.accept(token);
  logits = {1.0f, 2.0f, -1.0f, 3.0f};
  windowed.apply_penalties(logits);
  EXPECT_FLOAT_EQ(logits[1], 2.0f / 2.0f - 0.75f);
  EXPECT_FLOAT_EQ(logits[2], -2.0f - 0.75f);
  // Tokens leave the window as new ones arrive.
  windowed.accept(3);
  windowed.accept(3);
  logits = {1.0f, 2.0f, -1.0f, 3.0f};
  windowed.apply_penalties(logits);
  EXPECT_FLOAT_EQ(logits[1], 2.0f);
  EXPECT_FLOAT_EQ(logits[2], -1.0f);
  EXPECT_FLOAT_EQ(logits[3], 3.0f / 2.0f - (2 * 0.5f + 0.25f));

  windowed.reset();
  logits = {1.0f, 2.0f, -1.0f, 3.0f};
  windowed.apply_penalties(logits);
  EXPECT_EQ(logits, (std::vector<float>{1.0f, 2.0f, -1.0f, 3.0f}));

  // repeat_last_n = 0 turns every penalty off, as in llama.cpp.
  params.repeat_last_n = 0;
  Sampler off(params, 4);
  off.accept(1);
  logits = {1.0f, 2.0f, -1.0f, 3.0f};
  off.apply_penalties(logits);
  EXPECT_EQ(logits, (std::vector<float>{1.0f, 2.0f, -1.0f, 3.0f}));
}

TEST(Sampler, PenaltiesSteerTheChoice) {
  SamplerParams params = plain(0.0f);
  params.repeat_penalty = 2.0f;
  Sampler sampler(params, 2);
  const std::vector<float> logits = {1.0f, 1.5f};
  EXPECT_EQ(sampler.sample(logits), 1);
  sampler.accept(1);
  EXPECT_EQ(sampler.sample(logits), 0);  // 1.5 / 2 < 1
}

TEST(Sampler, LogprobsComeFromThePenalisedDistributionBeforeTruncation) {
  SamplerParams params = plain(1.0f);
  params.top_k = 1;
  params.presence_penalty = 1.0f;
  Sampler sampler(params, 4);
  sampler.accept(3);
  const std::vector<float> logits = {1.0f, 2.0f, 0.5f, 3.5f};  // token 3 is penalised to 2.5
  const std::vector<double> penalised = {1.0, 2.0, 0.5, 2.5};
  double total = 0.0;
  for (double l : penalised) total += std::exp(l);
  const double log_total = std::log(total);

  const SampledToken result = sampler.sample_with_logprobs(logits, 3);
  EXPECT_EQ(result.token, 3);
  // top_k = 1 left one candidate, yet the reported probability is that of the full softmax.
  EXPECT_NEAR(result.logprob, 2.5 - log_total, 1e-5);
  ASSERT_EQ(result.top.size(), 3u);
  const int32_t expected_tokens[] = {3, 1, 0};
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(result.top[i].token, expected_tokens[i]);
    EXPECT_NEAR(result.top[i].logprob, penalised[static_cast<size_t>(expected_tokens[i])] - log_total, 1e-5);
  }

  const SampledToken all = sampler.sample_with_logprobs(logits, 100);  // clamped to the vocabulary
  ASSERT_EQ(all.top.size(), 4u);
  double mass = 0.0;
  for (const TokenLogprob& t : all.top) mass += std::exp(static_cast<double>(t.logprob));
  EXPECT_NEAR(mass, 1.0, 1e-5);
  EXPECT_TRUE(sampler.sample_with_logprobs(logits, 0).top.empty());
  EXPECT_THROW(sampler.sample_with_logprobs(logits, -1), Error);
}

TEST(Sampler, DefaultChainOnALargeVocabularyStaysInTheTopK) {
  const std::vector<float> logits = random_logits(150000, 5);
  std::vector<float> sorted = logits;
  std::nth_element(sorted.begin(), sorted.begin() + 39, sorted.end(), std::greater<float>());
  const float kth_best = sorted[39];
  SamplerParams params;
  params.seed = 11;
  Sampler sampler(params, 150000);
  for (int i = 0; i < 200; ++i) {
    const int32_t token = sampler.sample(logits);
    ASSERT_GE(logits[static_cast<size_t>(token)], kth_best);
    sampler.accept(token);
  }
}

std::string validation_error(const SamplerParams& params) {
  try {
    params.validate();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(SamplerParams, ValidateNamesTheFieldAndItsRange) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(validation_error(SamplerParams{}), "");
  auto with = [](auto change) {
    SamplerParams p;
    change(p);
    return validation_error(p);
  };
  EXPECT_EQ(with([](SamplerParams& p) { p.top_p = 1.5f; }), "top_p must be in (0, 1], got 1.5");
  EXPECT_EQ(with([](SamplerParams& p) { p.top_p = 0.0f; }), "top_p must be in (0, 1], got 0");
  EXPECT_EQ(with([&](SamplerParams& p) { p.temperature = nan; }),
            "temperature must be a finite number (<= 0 means greedy), got nan");
  EXPECT_EQ(with([&](SamplerParams& p) { p.temperature = inf; }),
            "temperature must be a finite number (<= 0 means greedy), got inf");
  EXPECT_EQ(with([](SamplerParams& p) { p.top_k = -2; }), "top_k must be >= -1 (0 or -1 disables it), got -2");
  EXPECT_EQ(with([](SamplerParams& p) { p.min_p = 1.5f; }), "min_p must be in [0, 1], got 1.5");
  EXPECT_EQ(with([](SamplerParams& p) { p.min_p = -0.1f; }), "min_p must be in [0, 1], got -0.1");
  EXPECT_EQ(with([](SamplerParams& p) { p.repeat_penalty = 0.0f; }),
            "repeat_penalty must be a finite number > 0 (1 disables it), got 0");
  EXPECT_EQ(with([](SamplerParams& p) { p.repeat_last_n = -2; }),
            "repeat_last_n must be >= -1 (0 disables penalties, -1 means all), got -2");
  EXPECT_EQ(with([&](SamplerParams& p) { p.presence_penalty = nan; }),
            "presence_penalty must be a finite number, got nan");
  EXPECT_EQ(with([&](SamplerParams& p) { p.frequency_penalty = -inf; }),
            "frequency_penalty must be a finite number, got -inf");
  // Edge values that are valid.
  EXPECT_EQ(with([](SamplerParams& p) {
              p.temperature = -1.0f;
              p.top_k = -1;
              p.top_p = 1.0f;
              p.min_p = 1.0f;
              p.repeat_last_n = -1;
            }),
            "");
}

TEST(SamplerParams, SamplerRejectsBadInputs) {
  SamplerParams bad;
  bad.top_p = 2.0f;
  EXPECT_THROW(Sampler(bad, 10), Error);
  EXPECT_THROW(Sampler(SamplerParams{}, 0), Error);
  Sampler sampler(SamplerParams{}, 10);
  EXPECT_THROW(sampler.sample(std::vector<float>(9, 0.0f)), Error);
  EXPECT_THROW(sampler.accept(10), Error);
  EXPECT_THROW(sampler.accept(-1), Error);
}

}  // namespace
}  // namespace tessera
