// Token masks over real vocabularies equal a brute-force check of every token, along random constrained walks;
// the end token is allowed exactly when the grammar can end. Also the tool-call grammars' output validates.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <random>

#include "engine/grammar_vocab.h"
#include "gguf/gguf_file.h"
#include "grammar/constraint.h"
#include "grammar/json_schema.h"
#include "grammar/parser.h"
#include "grammar/random_walk.h"
#include "grammar/tool_call.h"
#include "support/json_validate.h"
#include "support/test_paths.h"
#include "util/error.h"

namespace tessera {
namespace {

using nlohmann::json;

std::unique_ptr<Tokenizer> load_vocab(const std::string& name) {
  const gguf::GgufFile file =
      gguf::GgufFile::open(test::shared_dir() / "models" / "vocab" / ("ggml-vocab-" + name + ".gguf"));
  return Tokenizer::from_metadata(file.metadata());
}

// Walks `steps` tokens (or to the end), checking each mask against every token; returns the text.
std::string checked_walk(const std::shared_ptr<const grammar::Grammar>& g,
                         const std::shared_ptr<const grammar::TokenTrie>& trie, std::mt19937& rng, int steps) {
  grammar::TokenConstraint c(g, trie);
  grammar::Matcher reference(g);
  std::string text;
  for (int step = 0; step < steps; ++step) {
    const auto mask = c.mask();
    std::vector<int32_t> allowed;
    for (int32_t t = 0; t < trie->n_vocab(); ++t) {
      const bool in_mask = (mask[static_cast<size_t>(t) / 64] >> (t % 64)) & 1;
      const std::string& piece = trie->piece(t);
      const bool expected = trie->is_end(t) ? reference.can_end() : !piece.empty() && reference.allows(piece);
      EXPECT_EQ(in_mask, expected) << "token " << t << " '" << piece << "' after '" << text << "'";
      if (in_mask) allowed.push_back(t);
    }
    if (allowed.empty()) break;
    // Prefer tokens that close something, so walks finish documents rather than wander in strings.
    int32_t pick = allowed[std::uniform_int_distribution<size_t>(0, allowed.size() - 1)(rng)];
    for (int tries = 0; tries < 8; ++tries) {
      const int32_t t = allowed[std::uniform_int_distribution<size_t>(0, allowed.size() - 1)(rng)];
      const std::string& p = trie->piece(t);
      if (trie->is_end(t) || p.find_first_of("\"]},") != std::string::npos) pick = t;
    }
    c.accept(pick);
    if (trie->is_end(pick)) break;
    EXPECT_TRUE(reference.advance(trie->piece(pick)));
    text += trie->piece(pick);
  }
  return text;
}

class TokenMask : public ::testing::TestWithParam<std::string> {};

TEST_P(TokenMask, EqualsBruteForce) {
  const auto tok = load_vocab(GetParam());
  const auto trie = make_token_trie(*tok);
  ASSERT_FALSE(trie->end_tokens().empty());
  const auto schema =
      std::make_shared<grammar::Grammar>(grammar::parse_grammar(grammar::json_schema_grammar(test::kTestSchema)));
  const auto object = std::make_shared<grammar::Grammar>(grammar::parse_grammar(grammar::json_object_grammar()));
  std::mt19937 rng(11);
  for (int walk = 0; walk < 3; ++walk) {
    checked_walk(schema, trie, rng, 60);
    checked_walk(object, trie, rng, 40);
  }
}

INSTANTIATE_TEST_SUITE_P(Vocabs, TokenMask, ::testing::Values("llama-spm", "gpt-2", "deepseek-llm"));

TEST(TokenMask, FinishedDocumentsValidateAndOnlyEndFollows) {
  const auto tok = load_vocab("gpt-2");
  const auto trie = make_token_trie(*tok);
  const auto g =
      std::make_shared<grammar::Grammar>(grammar::parse_grammar(grammar::json_schema_grammar(test::kTestSchema)));
  const json schema = json::parse(test::kTestSchema);
  std::mt19937 rng(5);
  int finished = 0;
  for (int run = 0; run < 30; ++run) {
    grammar::TokenConstraint c(g, trie);
    std::string text;
    for (int step = 0; step < 400 && !c.ended(); ++step) {
      const auto mask = c.mask();
      std::vector<int32_t> allowed;
      for (int32_t t = 0; t < trie->n_vocab(); ++t) {
        if ((mask[static_cast<size_t>(t) / 64] >> (t % 64)) & 1) allowed.push_back(t);
      }
      ASSERT_FALSE(allowed.empty()) << text;
      int32_t pick = allowed[std::uniform_int_distribution<size_t>(0, allowed.size() - 1)(rng)];
      for (int tries = 0; tries < 12; ++tries) {
        const int32_t t = allowed[std::uniform_int_distribution<size_t>(0, allowed.size() - 1)(rng)];
        if (trie->is_end(t) || trie->piece(t).find_first_of("\"]}") != std::string::npos) pick = t;
      }
      c.accept(pick);
      if (!trie->is_end(pick)) text += trie->piece(pick);
    }
    if (!c.ended()) continue;
    ++finished;
    json doc;
    ASSERT_NO_THROW(doc = json::parse(text)) << text;
    EXPECT_EQ(test::json_invalid(doc, schema, schema), "") << text;
  }
  EXPECT_GE(finished, 20);
}

// The cost of one uncached mask (a whole trie walk) along a constrained walk, printed for
// docs/structured-output.md; the masks themselves are checked above.
TEST(TokenMask, UncachedMaskTime) {
  for (const std::string vocab : {"llama-spm", "gpt-2"}) {
    const auto tok = load_vocab(vocab);
    const auto trie = make_token_trie(*tok);
    const auto g =
        std::make_shared<grammar::Grammar>(grammar::parse_grammar(grammar::json_schema_grammar(test::kTestSchema)));
    grammar::TokenConstraint c(g, trie);
    grammar::Matcher m(g);
    std::vector<uint64_t> words((static_cast<size_t>(trie->n_vocab()) + 63) / 64);
    std::mt19937 rng(1);
    double total = 0, worst = 0;
    int n = 0;
    for (int step = 0; step < 200 && !c.ended(); ++step) {
      const auto t0 = std::chrono::steady_clock::now();
      m.allowed_tokens(*trie, words);
      const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
      total += ms;
      worst = std::max(worst, ms);
      ++n;
      std::vector<int32_t> allowed;
      for (int32_t t = 0; t < trie->n_vocab(); ++t) {
        if ((words[static_cast<size_t>(t) / 64] >> (t % 64)) & 1) allowed.push_back(t);
      }
      ASSERT_FALSE(allowed.empty());
      int32_t pick = allowed[std::uniform_int_distribution<size_t>(0, allowed.size() - 1)(rng)];
      for (int tries = 0; tries < 8; ++tries) {
        const int32_t t = allowed[std::uniform_int_distribution<size_t>(0, allowed.size() - 1)(rng)];
        if (trie->is_end(t) || trie->piece(t).find_first_of("\"]},") != std::string::npos) pick = t;
      }
      c.accept(pick);
      if (!trie->is_end(pick)) {
        ASSERT_TRUE(m.advance(trie->piece(pick)));
      }
    }
    std::printf("uncached mask, %s (%d tokens): mean %.3f ms, worst %.3f ms over %d steps\n", vocab.c_str(),
                trie->n_vocab(), total / n, worst, n);
  }
}

TEST(TokenMask, RejectsWhatTheGrammarForbids) {
  const auto tok = load_vocab("gpt-2");
  const auto trie = make_token_trie(*tok);
  grammar::TokenConstraint c(std::make_shared<grammar::Grammar>(grammar::parse_grammar("root ::= \"{\" \"}\"")), trie);
  EXPECT_THROW(c.accept(trie->end_tokens()[0]), Error);
  const auto open = tok->find_token("{");
  ASSERT_TRUE(open.has_value());
  EXPECT_TRUE(c.allows(*open));
  c.accept(*open);
  EXPECT_FALSE(c.allows(*open));
  EXPECT_THROW(c.accept(*open), Error);
  const auto close = tok->find_token("}");
  ASSERT_TRUE(close.has_value());
  c.accept(*close);
  EXPECT_TRUE(c.allows(trie->end_tokens()[0]));
  EXPECT_TRUE(c.can_end());
}

// Tool-call grammars: every finished walk parses into a call of a listed tool whose arguments validate.
TEST(ToolCallGrammar, OutputsParseIntoValidCalls) {
  const std::string weather = R"({"type":"object","properties":{"city":{"type":"string","maxLength":8},
    "unit":{"enum":["c","f"]}},"required":["city","unit"]})";
  const std::string add = R"({"type":"object","properties":{"a":{"type":"integer"},"b":{"type":"integer"}},
    "required":["a","b"]})";
  const std::vector<grammar::ToolSchema> tools = {{"get_weather", weather}, {"add", add}};
  const std::map<std::string, json> schemas = {{"get_weather", json::parse(weather)}, {"add", json::parse(add)}};
  std::mt19937 rng(9);
  for (auto format :
       {grammar::ToolCallFormat::Hermes, grammar::ToolCallFormat::Llama3, grammar::ToolCallFormat::Mistral}) {
    for (bool several : {false, true}) {
      const auto g = std::make_shared<grammar::Grammar>(
          grammar::parse_grammar(grammar::tool_call_grammar(tools, format, several)));
      int seen = 0;
      for (int i = 0; i < 60; ++i) {
        std::string out;
        if (!test::random_sentence(g, rng, out)) continue;
        ++seen;
        std::vector<json> calls;
        const std::string key = format == grammar::ToolCallFormat::Llama3 ? "parameters" : "arguments";
        if (format == grammar::ToolCallFormat::Hermes) {
          for (size_t at = out.find("<tool_call>"); at != std::string::npos; at = out.find("<tool_call>", at + 1)) {
            const size_t end = out.find("</tool_call>", at);
            ASSERT_NE(end, std::string::npos) << out;
            calls.push_back(json::parse(out.substr(at + 11, end - at - 11)));
          }
        } else if (format == grammar::ToolCallFormat::Mistral) {
          ASSERT_EQ(out.rfind("[TOOL_CALLS]", 0), 0u) << out;
          for (const auto& c : json::parse(out.substr(12))) calls.push_back(c);
        } else {
          size_t start = 0;
          for (size_t at; (at = out.find("}; {", start)) != std::string::npos; start = at + 3) {
            calls.push_back(json::parse(out.substr(start, at + 1 - start)));
          }
          calls.push_back(json::parse(out.substr(start)));
        }
        ASSERT_FALSE(calls.empty()) << out;
        if (!several) {
          EXPECT_EQ(calls.size(), 1u) << out;
        }
        for (const auto& call : calls) {
          const std::string name = call.at("name");
          ASSERT_TRUE(schemas.contains(name)) << out;
          EXPECT_EQ(test::json_invalid(call.at(key), schemas.at(name), schemas.at(name)), "") << out;
        }
      }
      EXPECT_GE(seen, 20);
    }
  }
}

}  // namespace
}  // namespace tessera
