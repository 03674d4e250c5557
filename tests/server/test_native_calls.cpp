// Forced calls in the markup each model was trained on: Qwen 3.5 and StepFun 3.5 (<function=NAME><parameter=KEY>),
// GLM 4.6 and Laguna (NAME<arg_key>K</arg_key><arg_value>V</arg_value>) inside <tool_call>, where the hermes
// reader also reads JSON; MiniMax M3's lists and objects as nested XML (<item>v</item>, <k>v</k>); gpt-oss's
// harmony call messages. Random sentences of the forced grammar (many seeds) are in that markup and read back into
// calls that validate; the template's own render of a call is a sentence.
#include <gtest/gtest.h>

#include <fstream>
#include <random>

#include "chat/derived.h"
#include "grammar/matcher.h"
#include "grammar/random_walk.h"
#include "jinja/template.h"
#include "server/chat_output.h"
#include "server/markup_literals.h"
#include "server/openai_api.h"
#include "support/json_validate.h"
#include "support/test_paths.h"

namespace tessera::server {
namespace {

using json = nlohmann::ordered_json;

bool same(std::string_view text, const json& want) {
  return nlohmann::json::parse(text, nullptr, false) == nlohmann::json::parse(want.dump());
}

// Text (free, enum, bounded), numbers, booleans, a list and an object.
const json kWeather = json::parse(R"({"type": "object", "properties": {
  "city": {"type": "string"}, "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
  "note": {"type": "string", "maxLength": 12}, "days": {"type": "integer"}, "detail": {"type": "boolean"},
  "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 3},
  "where": {"type": "object", "properties": {"lat": {"type": "number"}, "name": {"type": "string"}},
            "required": ["lat"]},
  "stops": {"type": "array", "maxItems": 2, "items": {"type": "object", "required": ["name"],
            "properties": {"name": {"type": "string"}, "hours": {"type": "array", "items": {"type": "integer"}}}}}},
  "required": ["city", "unit"], "additionalProperties": false})");
const json kTime = json::parse(R"({"type": "object", "properties": {"zone": {"type": "string"}}, "required": []})");

json tools() {
  return json::array(
      {{{"type", "function"},
        {"function", {{"name", "get_weather"}, {"description", "Weather"}, {"parameters", kWeather}}}},
       {{"type", "function"}, {"function", {{"name", "get_time"}, {"description", "Time"}, {"parameters", kTime}}}}});
}

CompletionRequest request(const std::string& choice, bool parallel) {
  json body = {{"messages", {{{"role", "user"}, {"content", "hi"}}}},
               {"tools", tools()},
               {"parallel_tool_calls", parallel},
               {"tool_choice", choice == "required" ? json("required")
                                                    : json{{"type", "function"}, {"function", {{"name", choice}}}}}};
  return parse_completion_request(body.dump(), Endpoint::Chat);
}

std::string validate(const chat::ToolCall& c) {
  const auto args = nlohmann::json::parse(c.arguments, nullptr, false);
  if (!args.is_object()) return "arguments are not an object: " + c.arguments;
  const auto schema = nlohmann::json::parse((c.name == "get_weather" ? kWeather : kTime).dump());
  if (c.name == "get_weather" || c.name == "get_time") return test::json_invalid(args, schema, schema);
  return "unknown function " + c.name;
}

struct Template {
  std::string name, source, bos, eos;
  chat::OutputFormat format;
};

Template load(const std::string& name) {
  Template c;
  c.name = name;
  std::ifstream in(test::shared_dir() / "fixtures/templates/expected.json", std::ios::binary);
  for (const auto& e : json::parse(in)) {
    if (e["template"] != name || e["case"] != "06_tool_call") continue;
    c.bos = e["variables"]["bos_token"];
    c.eos = e["variables"]["eos_token"];
  }
  std::ifstream t(test::shared_dir() / "fixtures/templates/templates" / name, std::ios::binary);
  c.source.assign(std::istreambuf_iterator<char>(t), {});
  c.format = chat::template_output_format(c.source, c.bos, c.eos);
  return c;
}

// The template's assistant turn calling get_weather with `args`.
std::string render_call(const Template& c, const json& args) {
  const json call = {
      {"id", "call00001"}, {"type", "function"}, {"function", {{"name", "get_weather"}, {"arguments", args}}}};
  const json ctx = {
      {"messages",
       {{{"role", "user"}, {"content", "hi"}}, {{"role", "assistant"}, {"content", ""}, {"tool_calls", {call}}}}},
      {"tools", tools()},
      {"add_generation_prompt", false},
      {"bos_token", c.bos},
      {"eos_token", c.eos}};
  jinja::RenderOptions options;
  options.now = jinja::DateTime{2026, 1, 15, 12, 0, 0};
  return jinja::Template(c.source).render(ctx, options);
}

// Whether some span of `text` from a start at or before `open` (up to 40 bytes before) to some end after `name` is
// a sentence of the grammar that reads back as one call with `args`.
bool has_sentence(const OutputGrammar& g, const chat::OutputFormat& f, const std::string& text, size_t open,
                  size_t name, const json& args) {
  for (size_t start = open - std::min<size_t>(open, 40); start <= open; ++start) {
    grammar::Matcher m(g.compiled);
    for (size_t i = start; i < text.size() && m.advance(static_cast<uint8_t>(text[i]));) {
      ++i;
      if (!m.can_end() || i <= name) continue;
      const auto p = chat::parse_output(text.substr(start, i - start), f, true);
      if (p.calls.size() == 1 && same(p.calls[0].arguments, args)) return true;
    }
  }
  return false;
}

struct Native {
  std::string file;
  chat::ToolFamily family;           // the reader's
  std::vector<std::string> markers;  // what every forced call of get_weather shows
  std::string list, object;          // what a call with "tags" / "where" shows
  std::string detail;                // what precedes a boolean "detail"
  bool python_bools = false;         // the template writes True / False
};

const std::string kNs = "]<]minimax[>[";
const std::vector<Native> kNative = {
    {"Qwen3.5-4B.jinja",
     chat::ToolFamily::Hermes,
     {"<tool_call>\n<function=get_", "<parameter=city>\n", "\n</parameter>", "</function>"},
     "<parameter=tags>\n[",
     "<parameter=where>\n{",
     "<parameter=detail>\n",
     true},
    {"StepFun3.5-Flash.jinja",
     chat::ToolFamily::Hermes,
     {"<tool_call>\n<function=get_", "<parameter=city>\n", "\n</parameter>", "</function>"},
     "<parameter=tags>\n[",
     "<parameter=where>\n{",
     "<parameter=detail>\n",
     true},
    {"GLM-4.6.jinja",
     chat::ToolFamily::Hermes,
     {"<tool_call>get_", "<arg_key>city</arg_key>", "<arg_value>", "</arg_value>"},
     "<arg_key>tags</arg_key>\n<arg_value>[",
     "<arg_key>where</arg_key>\n<arg_value>{",
     "<arg_key>detail</arg_key>\n<arg_value>"},
    {"poolside-Laguna-S-2.1.jinja",
     chat::ToolFamily::Hermes,
     {"<tool_call>get_", "<arg_key>city</arg_key><arg_value>", "</arg_value>"},
     "<arg_key>tags</arg_key><arg_value>[",
     "<arg_key>where</arg_key><arg_value>{",
     "<arg_key>detail</arg_key><arg_value>"},
    {"poolside-Laguna-XS-2.1.jinja",
     chat::ToolFamily::Hermes,
     {"<tool_call>get_", "<arg_key>city</arg_key>\n<arg_value>", "</arg_value>\n"},
     "<arg_key>tags</arg_key>\n<arg_value>[",
     "<arg_key>where</arg_key>\n<arg_value>{",
     "<arg_key>detail</arg_key>\n<arg_value>"},
    {"poolside-Laguna-XS.2.jinja",
     chat::ToolFamily::Hermes,
     {"<tool_call>get_", "<arg_key>city</arg_key>\n<arg_value>", "</arg_value>\n"},
     "<arg_key>tags</arg_key>\n<arg_value>[",
     "<arg_key>where</arg_key>\n<arg_value>{",
     "<arg_key>detail</arg_key>\n<arg_value>"},
    {"MiniMax-M3.jinja",
     chat::ToolFamily::Derived,
     {kNs + "<tool_call>\n" + kNs + "<invoke name=\"get_", kNs + "<city>", kNs + "</city>", kNs + "</invoke>"},
     kNs + "<tags>" + kNs + "<item>",
     kNs + "<where>" + kNs + "<lat>",
     kNs + "<detail>"},
};

TEST(ChatToolsNative, ForcedCallsAreInTheTemplatesOwnMarkup) {
  for (const auto& n : kNative) {
    SCOPED_TRACE(n.file);
    const Template c = load(n.file);
    // The hermes reader stays (it reads JSON bodies too); the derived pairs are kept for the grammar.
    ASSERT_EQ(c.format.tools, n.family);
    ASSERT_TRUE(c.format.derived && !c.format.derived->json_args);
    if (n.family == chat::ToolFamily::Derived) {
      ASSERT_FALSE(c.format.derived->item.empty() || c.format.derived->member.empty());
    }
    int lists = 0, objects = 0;
    for (const std::string choice : {"required", "get_weather", "get_time"}) {
      const auto r = request(choice, true);
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
          EXPECT_EQ(validate(call), "") << out;
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
    const auto one = request("required", false);
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
  for (const auto& n : kNative) {
    SCOPED_TRACE(n.file);
    const Template c = load(n.file);
    const auto r = request("required", true);
    const chat::OutputFormat f = output_format(c.format, r.tools, "");
    const OutputGrammar g = forced_tool_grammar(r.tools, f, c.source);
    for (const auto& a : cases) {
      const json& args = a;
      const std::string text = render_call(c, args);
      const size_t name = text.rfind("get_weather");
      ASSERT_NE(name, std::string::npos);
      const size_t open = text.rfind(c.format.derived->marker, name);
      ASSERT_NE(open, std::string::npos) << text;
      // The reader reads the render back exactly (a text "42" stays text), and the render is a sentence.
      const auto read = chat::parse_output(text.substr(open), f, true);
      ASSERT_EQ(read.calls.size(), 1u) << text.substr(open);
      EXPECT_TRUE(same(read.calls[0].arguments, args)) << read.calls[0].arguments;
      EXPECT_TRUE(has_sentence(g, f, text, open, name, args)) << text.substr(open);
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
    const auto r = request(choice, true);
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
        EXPECT_EQ(validate(p.calls[0]), "") << out;
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
