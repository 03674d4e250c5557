// Grammar-constrained sampling in process: 50 completions of a random-weight model through the scheduler all
// parse and validate against a schema with nested objects, arrays, enums and required fields; a too-short token
// limit ends with Length; Generator (what `tessera run` uses) with a constrained sampler; the mask comes first.
#include <gtest/gtest.h>

#include <future>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>

#include "engine/generator.h"
#include "engine/grammar_vocab.h"
#include "engine/local_executor.h"
#include "engine/scheduler.h"
#include "grammar/constraint.h"
#include "grammar/json_schema.h"
#include "grammar/parser.h"
#include "support/json_validate.h"
#include "support/tiny_model.h"

namespace tessera {
namespace {

using nlohmann::json;

struct Model {
  explicit Model(const std::filesystem::path& path, int64_t n_slots = 4)
      : weights(ModelWeights::load(path)),
        tokenizer(Tokenizer::from_metadata(weights->file().metadata())),
        executor(weights, StageOptions{n_slots, 1024, GgmlType::F16}, 1) {}
  std::shared_ptr<const ModelWeights> weights;
  std::unique_ptr<Tokenizer> tokenizer;
  LocalExecutor executor;
};

SequenceResult run(Scheduler& sched, SequenceRequest r) {
  std::promise<SequenceResult> done;
  auto fut = done.get_future();
  SequenceCallbacks cb;
  cb.on_done = [&](const SequenceResult& res) { done.set_value(res); };
  EXPECT_NE(sched.submit(std::move(r), cb), nullptr);
  return fut.get();
}

TEST(GrammarSampling, FiftyCompletionsOfARandomModelValidate) {
  Model m(test::random_tiny_llama());
  Scheduler sched(m.executor, *m.tokenizer, {});
  const std::string text = grammar::json_schema_grammar(test::kTestSchema);
  const auto compiled = std::make_shared<grammar::Grammar>(grammar::parse_grammar(text));
  const json schema = json::parse(test::kTestSchema);
  // Submitted together, so constrained sequences share batches.
  std::vector<std::promise<SequenceResult>> done(50);
  for (size_t i = 0; i < done.size(); ++i) {
    SequenceRequest r;
    r.prompt = m.tokenizer->encode("Describe a pet as JSON:", true, true);
    r.sampler.seed = 100 + i;
    r.sampler.temperature = 1.0f;
    r.max_tokens = 600;
    r.grammar = text;
    r.compiled_grammar = compiled;
    SequenceCallbacks cb;
    cb.on_done = [&done, i](const SequenceResult& res) { done[i].set_value(res); };
    // The queue holds 64: all 50 fit.
    ASSERT_NE(sched.submit(std::move(r), cb), nullptr);
  }
  std::set<std::string> distinct;
  for (auto& d : done) {
    const SequenceResult res = d.get_future().get();
    ASSERT_EQ(res.reason, FinishReason::EndOfGeneration) << res.text << " " << res.error;
    json doc;
    ASSERT_NO_THROW(doc = json::parse(res.text)) << res.text;
    EXPECT_EQ(test::json_invalid(doc, schema, schema), "") << res.text;
    distinct.insert(res.text);
  }
  EXPECT_GT(distinct.size(), 40u);  // random weights, different seeds: the outputs differ
}

TEST(GrammarSampling, TooFewTokensEndsWithLength) {
  Model m(test::random_tiny_llama());
  Scheduler sched(m.executor, *m.tokenizer, {});
  SequenceRequest r;
  r.prompt = m.tokenizer->encode("x", true, true);
  r.sampler.seed = 1;
  r.max_tokens = 4;
  r.grammar = grammar::json_schema_grammar(test::kTestSchema);
  const SequenceResult res = run(sched, r);
  EXPECT_EQ(res.reason, FinishReason::Length);
  EXPECT_EQ(res.tokens.size(), 4u);
  EXPECT_FALSE(json::accept(res.text)) << res.text;
  EXPECT_EQ(res.text.rfind("{", 0), 0u) << res.text;
}

TEST(GrammarSampling, BadGrammarIsRefusedAtSubmit) {
  Model m(test::random_tiny_llama());
  Scheduler sched(m.executor, *m.tokenizer, {});
  SequenceRequest r;
  r.prompt = m.tokenizer->encode("x", true, true);
  r.grammar = "root ::= nothing";
  EXPECT_THROW(sched.submit(r, {}), Error);
}

TEST(GrammarSampling, GeneratorWithConstrainedSampler) {
  Model m(test::random_tiny_llama(), 1);
  const json schema = json::parse(test::kTestSchema);
  for (uint64_t seed : {1u, 2u, 3u}) {
    m.executor.clear_sequence(0);
    SamplerParams p;
    p.seed = seed;
    Sampler sampler(p, m.tokenizer->n_vocab());
    constrain_sampler(sampler, grammar::json_schema_grammar(test::kTestSchema), *m.tokenizer);
    Generator gen(m.executor, *m.tokenizer);
    GenerationParams gp;
    gp.n_predict = 600;
    const auto prompt = m.tokenizer->encode("JSON:", true, true);
    const GenerationResult r = gen.generate(prompt, sampler, gp, {});
    ASSERT_EQ(r.reason, StopReason::EndOfGeneration) << r.text;
    const json doc = json::parse(r.text);
    EXPECT_EQ(test::json_invalid(doc, schema, schema), "") << r.text;
  }
}

TEST(GrammarSampling, MaskComesBeforeEveryStep) {
  Model m(test::random_tiny_llama(), 1);
  SamplerParams p;
  p.temperature = 0.0f;  // greedy: the best allowed token, whatever outscores it
  Sampler sampler(p, m.tokenizer->n_vocab());
  constrain_sampler(sampler, "root ::= \"7\"", *m.tokenizer);
  // Every token that writes "7" (the piece and the byte token) scores below all others.
  std::vector<float> logits(static_cast<size_t>(m.tokenizer->n_vocab()), 5.0f);
  std::optional<TokenId> seven;
  for (TokenId t = 0; t < m.tokenizer->n_vocab(); ++t) {
    if (m.tokenizer->token_to_piece(t) != "7") continue;
    logits[static_cast<size_t>(t)] = -3.0f - static_cast<float>(t) * 0.001f;
    if (!seven) seven = t;
  }
  ASSERT_TRUE(seven.has_value());
  EXPECT_EQ(sampler.sample(logits), *seven);
  sampler.accept(*seven);
  EXPECT_TRUE(m.tokenizer->is_eog(sampler.sample(logits)));  // complete: only end-of-generation remains
  const SamplerState st = sampler.state();
  EXPECT_EQ(st.grammar, "root ::= \"7\"");
  EXPECT_EQ(st.grammar_tokens, std::vector<int32_t>{*seven});
}

}  // namespace
}  // namespace tessera
