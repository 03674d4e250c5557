// Forced calls in key/value call markup derived from the corpus templates (Qwen3-Coder-style <parameter=k>v,
// GLM's <arg_key>/<arg_value>, ...) and in Gemma 4's call notation: random walks through the forced grammar, many
// seeds, read back into calls whose arguments validate against the schema (text values holding tags, JSON values,
// optional keys); the template's own rendering of a call with such arguments is a sentence of the grammar.
#include <gtest/gtest.h>

#include <random>

#include "chat/derived.h"
#include "forced_calls.h"
#include "grammar/random_walk.h"
#include "server/chat_output.h"
#include "server/markup_literals.h"

namespace tessera::server {
namespace {

// Ordered: the schema's declared order is the order the grammar writes pairs in.
using json = nlohmann::ordered_json;

const test::CallFunctions kFunctions(json::parse(R"({"type": "object", "properties": {
  "city": {"type": "string"}, "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
  "note": {"type": "string", "maxLength": 12}, "days": {"type": "integer"}, "detail": {"type": "boolean"},
  "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 3},
  "where": {"type": "object", "properties": {"lat": {"type": "number"}}, "required": ["lat"]}},
  "required": ["city", "unit"], "additionalProperties": false})"));

// The corpus templates whose derived syntax writes arguments as key/value pairs, and Gemma 4's.
std::vector<test::CallTemplate> markup_templates() {
  std::vector<test::CallTemplate> out;
  for (const auto& e : test::tool_call_cases()) {
    test::CallTemplate c = test::call_template(e);
    const bool pairs = c.format.tools == chat::ToolFamily::Derived && !c.format.derived->json_args;
    if (pairs || c.format.tools == chat::ToolFamily::Gemma4) out.push_back(std::move(c));
  }
  return out;
}

TEST(ChatToolsDerivedPairs, RandomForcedCallsReadBackAndValidate) {
  const auto corpus = markup_templates();
  ASSERT_GE(corpus.size(), 4u);  // Qwen3-Coder-style, GLM, MiniMax, Seed-OSS, ..., Gemma 4
  bool gemma = false;
  for (const auto& c : corpus) {
    SCOPED_TRACE(c.name);
    gemma = gemma || c.format.tools == chat::ToolFamily::Gemma4;
    for (const std::string choice : {"required", "get_weather"}) {
      const auto r = kFunctions.request(choice, true);
      const chat::OutputFormat f = output_format(c.format, r.tools, "");
      const OutputGrammar g = forced_tool_grammar(r.tools, f, c.source);
      std::mt19937 rng(17);
      int seen = 0, several = 0;
      for (int i = 0; i < 60; ++i) {
        std::string out;
        if (!test::random_sentence(g.compiled, rng, out, test::markup_literals(f), 8000)) continue;
        ++seen;
        const auto p = chat::parse_output(out, f, true);
        ASSERT_GE(p.calls.size(), 1u) << out;
        several += p.calls.size() > 1;
        EXPECT_TRUE(p.content.find_first_not_of(" \n") == std::string::npos) << out;
        for (const auto& call : p.calls) {
          EXPECT_EQ(kFunctions.validate(call), "") << out;
          if (choice != "required") {
            EXPECT_EQ(call.name, choice);
          }
        }
      }
      EXPECT_GT(seen, 40);
      if (choice == "required" && c.format.derived && !c.format.derived->several) {
        EXPECT_EQ(several, 0);
      }
    }
  }
  EXPECT_TRUE(gemma);
}

TEST(ChatToolsDerivedPairs, TheTemplatesOwnCallsAreSentences) {
  // Plain arguments (every template's render must be a sentence); then text that looks like JSON, holds markup
  // and lines, a number, a list and an object, wherever the reader reads the template's render of them back (some
  // templates write these in ways no reader here knows: MiniCPM's CDATA).
  const std::vector<json> cases = {{{"city", "Paris"}, {"unit", "celsius"}},
                                   {{"city", "42"},
                                    {"unit", "celsius"},
                                    {"note", "a>b&c"},
                                    {"days", 3},
                                    {"tags", {"x", "<y>"}},
                                    {"where", {{"lat", 1.5}}}},
                                   {{"city", "Paris <b>\"x\"</b>\nand more"}, {"unit", "fahrenheit"}}};
  size_t rich = 0;  // the renders of the harder cases the reader reads back, each a sentence
  for (const auto& c : markup_templates()) {
    SCOPED_TRACE(c.name);
    const auto r = kFunctions.request("required", true);
    const chat::OutputFormat f = output_format(c.format, r.tools, "");
    const OutputGrammar g = forced_tool_grammar(r.tools, f, c.source);
    const std::string marker = c.format.derived ? c.format.derived->marker : "<|tool_call>";
    for (size_t k = 0; k < cases.size(); ++k) {
      const json& a = cases[k];
      const std::string text = test::render_call(c, kFunctions.tools(), a);
      const size_t name = text.rfind("get_weather");
      ASSERT_NE(name, std::string::npos);
      const size_t open = text.rfind(marker, name);
      ASSERT_NE(open, std::string::npos) << text;
      const auto read = chat::parse_output(text.substr(open), f, true);
      if (read.calls.empty() || !test::same_json(read.calls[0].arguments, a)) {
        EXPECT_GT(k, 0u) << "the reader does not read the template's plain call: " << text.substr(open);
        continue;
      }
      // Some start at or before the block's marker and some end after the call make a sentence that reads back.
      EXPECT_TRUE(test::has_sentence(g, f, text, open, name, a)) << text.substr(open);
      rich += k > 0;
    }
  }
  // 8 templates, 2 harder cases each: Seed-OSS and MiniCPM write lists as Python does, MiniCPM wraps text in
  // CDATA, Kimi K3 marks lists and objects with types of their own; the rest read back.
  EXPECT_GE(rich, 12u);
}

}  // namespace
}  // namespace tessera::server
