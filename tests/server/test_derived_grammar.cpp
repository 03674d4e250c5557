// The forced-call grammar for syntaxes derived from the templates of ../shared/fixtures/templates: it accepts the
// template's own rendering of a call, rejects a call of another function, and what it generates reads back as a
// valid call of an offered function.
#include <gtest/gtest.h>

#include <fstream>
#include <random>

#include "chat/derived.h"
#include "grammar/matcher.h"
#include "grammar/random_walk.h"
#include "server/chat_output.h"
#include "server/markup_literals.h"
#include "server/openai_api.h"
#include "support/test_paths.h"

namespace tessera::server {
namespace {

using nlohmann::json;

bool matches(const OutputGrammar& g, const std::string& text) {
  grammar::Matcher m(g.compiled);
  return m.advance(text) && m.can_end();
}

TEST(ChatToolsDerived, ForcedGrammarAcceptsTheTemplatesOwnCalls) {
  std::ifstream in(test::shared_dir() / "fixtures/templates/expected.json", std::ios::binary);
  ASSERT_TRUE(in) << "missing expected.json";
  // The sentinel function the derivation rendered, offered as the only tool.
  const std::string tool = std::string(R"({"messages":[{"role":"user","content":"hi"}],"tool_choice":"required",
    "tools":[{"type":"function","function":{"name":")") +
                           std::string(chat::kSentinelName) + R"(","parameters":{"type":"object",
    "properties":{"__tessera_ka__":{"type":"string"}},"required":["__tessera_ka__"]}}}]})";
  const auto request = parse_completion_request(tool, Endpoint::Chat);
  size_t derived = 0;
  for (const auto& e : json::parse(in)) {
    if (e["case"] != "06_tool_call") continue;
    const std::string name = e["template"];
    std::ifstream t(test::shared_dir() / "fixtures/templates/templates" / name, std::ios::binary);
    const std::string source(std::istreambuf_iterator<char>(t), {});
    const std::string bos = e["variables"]["bos_token"], eos = e["variables"]["eos_token"];
    const chat::OutputFormat base = chat::template_output_format(source, bos, eos);
    if (base.tools != chat::ToolFamily::Derived) continue;
    SCOPED_TRACE(name);
    const chat::OutputFormat f = output_format(base, request.tools, "");
    ++derived;
    const OutputGrammar g = forced_tool_grammar(request.tools, f, source);
    const std::string sample = chat::derive_tool_syntax(source, bos, eos).sample;
    EXPECT_TRUE(matches(g, sample)) << sample;
    std::string other = sample;
    other.replace(other.find(chat::kSentinelName), chat::kSentinelName.size(), "__tessera_fx__");
    EXPECT_FALSE(matches(g, other)) << other;
    // Random sentences of the grammar parse back into calls of the tool with a string argument.
    std::mt19937 rng(7);
    int seen = 0;
    for (int i = 0; i < 20; ++i) {
      std::string out;
      if (!test::random_sentence(g.compiled, rng, out, test::markup_literals(f))) continue;
      ++seen;
      const auto p = chat::parse_output(out, f, true);
      ASSERT_GE(p.calls.size(), 1u) << out;
      for (const auto& c : p.calls) {
        EXPECT_EQ(c.name, chat::kSentinelName);
        const auto args = json::parse(c.arguments);
        EXPECT_TRUE(args.contains("__tessera_ka__") && args["__tessera_ka__"].is_string()) << out;
      }
    }
    EXPECT_GT(seen, 0);
  }
  // Kimi K2, Apriel, Nemotron, MiniMax M1, Cohere, GigaChat, functionary, Apertus; the key/value ones too.
  EXPECT_GE(derived, 12u);
}

}  // namespace
}  // namespace tessera::server
