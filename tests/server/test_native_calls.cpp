// Forced calls in the markup each model was trained on: Qwen 3.5 and StepFun 3.5 (<function=NAME><parameter=KEY>),
// GLM 4.6 and Laguna (NAME<arg_key>K</arg_key><arg_value>V</arg_value>) inside <tool_call>, where the hermes
// reader also reads JSON; MiniMax M3's lists and objects as nested XML (<item>v</item>, <k>v</k>); gpt-oss's
// harmony call messages. Random sentences of the forced grammar (many seeds) are in that markup and read back into
// calls that validate; the template's own render of a call is a sentence.
#include <gtest/gtest.h>

#include <random>

#include "chat/derived.h"
#include "forced_calls.h"
#include "grammar/random_walk.h"
#include "server/chat_output.h"
#include "server/markup_literals.h"

namespace tessera::server {
namespace {

using json = nlohmann::ordered_json;

// get_weather's arguments: text (free, enum, bounded), numbers, booleans, a list and an object.
const test::CallFunctions kFunctions(json::parse(R"({"type": "object", "properties": {
  "city": {"type": "string"}, "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
  "note": {"type": "string", "maxLength": 12}, "days": {"type": "integer"}, "detail": {"type": "boolean"},
  "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 3},
  "where": {"type": "object", "properties": {"lat": {"type": "number"}, "name": {"type": "string"}},
            "required": ["lat"]},
  "stops": {"type": "array", "maxItems": 2, "items": {"type": "object", "required": ["name"],
            "properties": {"name": {"type": "string"}, "hours": {"type": "array", "items": {"type": "integer"}}}}}},
  "required": ["city", "unit"], "additionalProperties": false})"));

struct Native {
  std::vector<std::string> files;    // the templates that write this markup
  chat::ToolFamily family;           // the reader's
  std::vector<std::string> markers;  // what every forced call of get_weather shows
  std::string list, object;          // what a call with "tags" / "where" shows
  std::string detail;                // what precedes a boolean "detail"
  bool python_bools = false;         // the template writes True / False
};

const std::string kNs = "]<]minimax[>[";
const std::vector<Native> kNative = {
    {{"Qwen3.5-4B.jinja", "StepFun3.5-Flash.jinja"},
     chat::ToolFamily::Hermes,
     {"<tool_call>\n<function=get_", "<parameter=city>\n", "\n</parameter>", "</function>"},
     "<parameter=tags>\n[",
     "<parameter=where>\n{",
     "<parameter=detail>\n",
     true},
    {{"GLM-4.6.jinja"},
     chat::ToolFamily::Hermes,
     {"<tool_call>get_", "<arg_key>city</arg_key>", "<arg_value>", "</arg_value>"},
     "<arg_key>tags</arg_key>\n<arg_value>[",
     "<arg_key>where</arg_key>\n<arg_value>{",
     "<arg_key>detail</arg_key>\n<arg_value>"},
    {{"poolside-Laguna-S-2.1.jinja"},
     chat::ToolFamily::Hermes,
     {"<tool_call>get_", "<arg_key>city</arg_key><arg_value>", "</arg_value>"},
     "<arg_key>tags</arg_key><arg_value>[",
     "<arg_key>where</arg_key><arg_value>{",
     "<arg_key>detail</arg_key><arg_value>"},
    {{"poolside-Laguna-XS-2.1.jinja", "poolside-Laguna-XS.2.jinja"},
     chat::ToolFamily::Hermes,
     {"<tool_call>get_", "<arg_key>city</arg_key>\n<arg_value>", "</arg_value>\n"},
     "<arg_key>tags</arg_key>\n<arg_value>[",
     "<arg_key>where</arg_key>\n<arg_value>{",
     "<arg_key>detail</arg_key>\n<arg_value>"},
    {{"MiniMax-M3.jinja"},
     chat::ToolFamily::Derived,
     {kNs + "<tool_call>\n" + kNs + "<invoke name=\"get_", kNs + "<city>", kNs + "</city>", kNs + "</invoke>"},
     kNs + "<tags>" + kNs + "<item>",
     kNs + "<where>" + kNs + "<lat>",
     kNs + "<detail>"},
};

// Each template with the markup it writes.
std::vector<std::pair<std::string, Native>> native_templates() {
  std::vector<std::pair<std::string, Native>> out;
  for (const auto& n : kNative) {
    for (const auto& file : n.files) out.emplace_back(file, n);
  }
  return out;
}

TEST(ChatToolsNative, ForcedCallsAreInTheTemplatesOwnMarkup) {
  for (const auto& [file, n] : native_templates()) {
    SCOPED_TRACE(file);
    const test::CallTemplate c = test::call_template(file);
    // The hermes reader stays (it reads JSON bodies too); the derived pairs are kept for the grammar.
    ASSERT_EQ(c.format.tools, n.family);
    ASSERT_TRUE(c.format.derived && !c.format.derived->json_args);
    if (n.family == chat::ToolFamily::Derived) {
      ASSERT_FALSE(c.format.derived->item.empty() || c.format.derived->member.empty());
    }
    int lists = 0, objects = 0;
    for (const std::string choice : {"required", "get_weather", "get_time"}) {
      const auto r = kFunctions.request(choice, true);
      const chat::OutputFormat f = output_format(c.format, r.tools, "");
      const OutputGrammar g = forced_tool_grammar(r.tools, f, c.source);
      std::mt19937 rng(29);
      int seen = 0, weather = 0, several = 0;
      for (int i = 0; i < 80; ++i) {
        std::string out;
        if (!test::random_sentence(g.compiled, rng, out, test::markup_literals(f), 8000)) continue;
        ++seen;
        EXPECT_EQ(out.find("<tool_call>{"), std::string::npos) << out;  // not hermes JSON
        EXPECT_EQ(out.find("<tool_call>\n{"), std::string::npos) << out;
        const auto p = chat::parse_output(out, f, true);
        ASSERT_GE(p.calls.size(), 1u) << out;
        several += p.calls.size() > 1;
        EXPECT_TRUE(p.content.find_first_not_of(" \n") == std::string::npos) << out;
        for (const auto& call : p.calls) {
          EXPECT_EQ(kFunctions.validate(call), "") << out;
          if (choice != "required") {
            EXPECT_EQ(call.name, choice) << out;
          }
          weather += call.name == "get_weather";
        }
        if (p.calls.size() == 1 && p.calls[0].name == "get_weather") {
          for (const auto& marker : n.markers) EXPECT_NE(out.find(marker), std::string::npos) << marker << "\n" << out;
          const auto args = json::parse(p.calls[0].arguments);
          if (args.contains("tags")) {
            ++lists;
            EXPECT_NE(out.find(n.list), std::string::npos) << out;
          }
          if (args.contains("detail")) {
            const bool b = args["detail"].get<bool>();
            const std::string v = n.python_bools ? (b ? "True" : "False") : (b ? "true" : "false");
            EXPECT_NE(out.find(n.detail + v), std::string::npos) << out;
          }
          if (args.contains("where")) {
            ++objects;
            EXPECT_NE(out.find(n.object), std::string::npos) << out;
          }
        }
      }
      EXPECT_GT(seen, 60);
      if (choice != "get_time") {
        EXPECT_GT(weather, 10);
      }
      if (choice == "required") {
        EXPECT_GT(several, 0);
      }
    }
    // Without parallel calls, one call.
    const auto one = kFunctions.request("required", false);
    const chat::OutputFormat f1 = output_format(c.format, one.tools, "");
    const OutputGrammar g1 = forced_tool_grammar(one.tools, f1, c.source);
    std::mt19937 rng(5);
    for (int i = 0; i < 20; ++i) {
      std::string out;
      if (test::random_sentence(g1.compiled, rng, out, test::markup_literals(f1), 8000)) {
        EXPECT_EQ(chat::parse_output(out, f1, true).calls.size(), 1u) << out;
      }
    }
    EXPECT_GT(lists, 3);
    EXPECT_GT(objects, 3);
  }
}

TEST(ChatToolsNative, TheTemplatesOwnCallsAreSentences) {
  // Text that reads as JSON, holds markup and lines; a number, a boolean, a list and an object.
  const std::vector<json> cases = {{{"city", "Paris"}, {"unit", "celsius"}},
                                   {{"city", "42"},
                                    {"unit", "celsius"},
                                    {"note", "a>b&c"},
                                    {"days", 3},
                                    {"detail", true},
                                    {"tags", {"x", "<y>", "7"}},
                                    {"where", {{"lat", 1.5}, {"name", "n"}}},
                                    {"stops", {{{"name", "a"}, {"hours", {1, 2}}}, {{"name", "true"}}}}},
                                   {{"city", "Paris <b>\"x\"</b>\nand more"}, {"unit", "fahrenheit"}}};
  for (const auto& [file, n] : native_templates()) {
    SCOPED_TRACE(file);
    const test::CallTemplate c = test::call_template(file);
    const auto r = kFunctions.request("required", true);
    const chat::OutputFormat f = output_format(c.format, r.tools, "");
    const OutputGrammar g = forced_tool_grammar(r.tools, f, c.source);
    for (const auto& a : cases) {
      const json& args = a;
      const std::string text = test::render_call(c, kFunctions.tools(), args);
      const size_t name = text.rfind("get_weather");
      ASSERT_NE(name, std::string::npos);
      const size_t open = text.rfind(c.format.derived->marker, name);
      ASSERT_NE(open, std::string::npos) << text;
      // The reader reads the render back exactly (a text "42" stays text), and the render is a sentence.
      const auto read = chat::parse_output(text.substr(open), f, true);
      ASSERT_EQ(read.calls.size(), 1u) << text.substr(open);
      EXPECT_TRUE(test::same_json(read.calls[0].arguments, args)) << read.calls[0].arguments;
      EXPECT_TRUE(test::has_sentence(g, f, text, open, name, args)) << text.substr(open);
      // Streamed byte by byte, every prefix's parse is a prefix of the final one (nested values included).
      const std::string out = text.substr(open);
      for (size_t len = 0; len <= out.size(); ++len) {
        const auto p = chat::parse_output(std::string_view(out).substr(0, len), f, false);
        ASSERT_LE(p.calls.size(), read.calls.size()) << out.substr(0, len);
        ASSERT_TRUE(read.content.starts_with(p.content)) << out.substr(0, len);
        for (size_t i = 0; i < p.calls.size(); ++i) {
          ASSERT_EQ(p.calls[i].name, read.calls[i].name);
          ASSERT_TRUE(read.calls[i].arguments.starts_with(p.calls[i].arguments)) << out.substr(0, len);
        }
      }
    }
  }
}

TEST(ChatToolsNative, HarmonyForcedCallsReadBackAndValidate) {
  // gpt-oss (no template of it in the corpus): the call is a commentary message to functions.NAME; the model ends
  // it with <|call|>, a control token the grammar leaves to the end-of-generation set.
  const std::string source = "<|start|>assistant<|channel|>final<|message|>";
  for (const std::string choice : {"required", "get_weather"}) {
    const auto r = kFunctions.request(choice, true);
    const chat::OutputFormat f = output_format(source, r.tools, "");
    ASSERT_EQ(f.tools, chat::ToolFamily::Harmony);
    const OutputGrammar g = forced_tool_grammar(r.tools, f, source);
    std::mt19937 rng(11);
    int seen = 0;
    for (int i = 0; i < 60; ++i) {
      std::string out;
      if (!test::random_sentence(g.compiled, rng, out, 8000)) continue;
      ++seen;
      EXPECT_TRUE(out.starts_with("<|channel|>commentary to=functions.get_")) << out;
      EXPECT_NE(out.find(" <|constrain|>json<|message|>{"), std::string::npos) << out;
      for (const std::string& end : {std::string(), std::string("<|call|>")}) {
        const auto p = chat::parse_output(out + end, f, true);
        ASSERT_EQ(p.calls.size(), 1u) << out;
        EXPECT_EQ(kFunctions.validate(p.calls[0]), "") << out;
        if (choice != "required") {
          EXPECT_EQ(p.calls[0].name, choice);
        }
      }
    }
    EXPECT_GT(seen, 40);
  }
}

}  // namespace
}  // namespace tessera::server
