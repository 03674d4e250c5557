// Tool calling and reasoning in chat requests: tools, tool_choice, parallel_tool_calls, history with assistant
// tool_calls and tool results as the template reads them, template variables; each bad field a 400 naming it;
// the forced-call grammar per family; answers and stream deltas with tool_calls and reasoning_content.
#include <gtest/gtest.h>

#include "grammar/matcher.h"
#include "server/chat_output.h"
#include "server/openai_api.h"

namespace tessera::server {
namespace {

using nlohmann::json;

const std::string kTools = R"("tools":[{"type":"function","function":{"name":"get_weather","description":"d",
  "parameters":{"type":"object","properties":{"unit":{"type":"string","enum":["c","f"]},"city":{"type":"string"}},
  "required":["city"]}}},{"type":"function","function":{"name":"get_time"}}])";
const std::string kHi = R"("messages":[{"role":"user","content":"hi"}])";

TEST(ChatTools, ToolsHistoryAndTemplateVariablesParse) {
  const auto r =
      parse_completion_request("{" + kTools + R"(,"tool_choice":{"type":"function","function":{"name":"get_weather"}},
      "parallel_tool_calls":false,"chat_template_kwargs":{"enable_thinking":false},"reasoning_effort":"low",
      "messages":[{"role":"user","content":"weather?"},
        {"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function",
          "function":{"name":"get_weather","arguments":"{\"unit\":\"c\",\"city\":\"Paris\"}"}}]},
        {"role":"tool","tool_call_id":"call_1","content":"18 C"}]})",
                               Endpoint::Chat);
  ASSERT_EQ(r.tools.functions.size(), 2u);
  EXPECT_EQ(r.tools.functions[0].name, "get_weather");
  EXPECT_EQ(r.tools.functions[1].parameters, nlohmann::ordered_json::object());
  EXPECT_EQ(r.tools.choice, ToolChoice::Named);
  EXPECT_EQ(r.tools.named, "get_weather");
  EXPECT_FALSE(r.tools.parallel);
  EXPECT_TRUE(r.tools.offered());
  // The schema keeps its key order (unit before city), as the template prints it.
  EXPECT_EQ(r.tools.tools[0]["function"]["parameters"]["properties"].begin().key(), "unit");
  ASSERT_EQ(r.chat_messages.size(), 3u);
  const auto& call = r.chat_messages[1]["tool_calls"][0];
  EXPECT_EQ(call["id"], "call_1");
  // Arguments reach the template as an object, in the order the client wrote them.
  ASSERT_TRUE(call["function"]["arguments"].is_object());
  EXPECT_EQ(call["function"]["arguments"].begin().key(), "unit");
  EXPECT_EQ(r.chat_messages[1]["content"], "");
  EXPECT_EQ(r.chat_messages[2]["role"], "tool");
  EXPECT_EQ(r.chat_messages[2]["tool_call_id"], "call_1");
  EXPECT_EQ(r.template_vars["enable_thinking"], false);
  EXPECT_EQ(r.template_vars["reasoning_effort"], "low");

  const auto none = parse_completion_request("{" + kHi + "," + kTools + R"(,"tool_choice":"none"})", Endpoint::Chat);
  EXPECT_FALSE(none.tools.offered());
}

TEST(ChatTools, EachBadFieldIsA400NamingIt) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {R"("tools":{})", "tools"},
      {R"("tools":[{"type":"retrieval"}])", "tools[0].type"},
      {R"("tools":[{"type":"function"}])", "tools[0].function"},
      {R"("tools":[{"type":"function","function":{"name":"a b"}}])", "tools[0].function.name"},
      {R"("tools":[{"type":"function","function":{"name":"f","parameters":[]}}])", "tools[0].function.parameters"},
      {R"("tools":[{"type":"function","function":{"name":"f","extra":1}}])", "tools[0].function.extra"},
      {R"("tools":[{"type":"function","function":{"name":"f"}},{"type":"function","function":{"name":"f"}}])",
       "tools[1].function.name"},
      {kTools + R"(,"tool_choice":"sometimes")", "tool_choice"},
      {kTools + R"(,"tool_choice":{"type":"function","function":{"name":"nope"}})", "tool_choice"},
      {kTools + R"(,"tool_choice":{"type":"function"})", "tool_choice.function"},
      {R"("tool_choice":"required")", "tool_choice"},
      {kTools + R"(,"tool_choice":"required","response_format":{"type":"json_object"})", "tool_choice"},
      {R"("parallel_tool_calls":"yes")", "parallel_tool_calls"},
      {R"("functions":[{"name":"f"}])", "functions"},
      {R"("chat_template_kwargs":[])", "chat_template_kwargs"},
      {R"("chat_template_kwargs":{"messages":[]})", "chat_template_kwargs.messages"},
      {R"("reasoning_effort":"extreme")", "reasoning_effort"},
  };
  for (const auto& [fields, param] : cases) {
    const std::string body = "{" + kHi + "," + fields + "}";
    try {
      parse_completion_request(body, Endpoint::Chat);
      ADD_FAILURE() << "accepted: " << body;
    } catch (const ApiError& e) {
      EXPECT_EQ(e.status(), 400) << body;
      EXPECT_EQ(e.param(), param) << body << ": " << e.what();
    }
  }
  const std::vector<std::pair<std::string, std::string>> messages = {
      {R"({"role":"assistant","tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":"{x"}}]})",
       "messages[0].tool_calls[0].function.arguments"},
      {R"({"role":"assistant","tool_calls":[{"type":"function","function":{"name":"f","arguments":"{}"}}]})",
       "messages[0].tool_calls[0].id"},
      {R"({"role":"assistant","tool_calls":{}})", "messages[0].tool_calls"},
      {R"({"role":"user","content":"x","tool_call_id":"c"})", "messages[0].tool_call_id"},
      {R"({"role":"tool","tool_call_id":"c"})", "messages[0].content"},
  };
  for (const auto& [message, param] : messages) {
    const std::string body = R"({"messages":[)" + message + "]}";
    try {
      parse_completion_request(body, Endpoint::Chat);
      ADD_FAILURE() << "accepted: " << body;
    } catch (const ApiError& e) {
      EXPECT_EQ(e.param(), param) << body << ": " << e.what();
    }
  }
}

bool accepts(const OutputGrammar& g, const std::string& text) {
  grammar::Matcher m(g.compiled);
  return m.advance(text) && m.can_end();
}

TEST(ChatTools, ForcedChoiceGrammarPerFamily) {
  auto r = parse_completion_request("{" + kHi + "," + kTools + R"(,"tool_choice":"required"})", Endpoint::Chat);
  chat::OutputFormat f = output_format("<tool_call>", r.tools, "");
  const auto hermes = forced_tool_grammar(r.tools, f, "<tool_call>");
  EXPECT_TRUE(accepts(hermes,
                      "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"unit\": \"c\", \"city\": "
                      "\"Paris\"}}\n</tool_call>"));
  EXPECT_TRUE(accepts(hermes,
                      "<tool_call>{\"name\":\"get_time\",\"arguments\":{}}</tool_call><tool_call>"
                      "{\"name\":\"get_weather\",\"arguments\":{\"city\":\"Oslo\"}}</tool_call>"));
  EXPECT_FALSE(accepts(hermes,
                       "<tool_call>{\"name\":\"get_weather\",\"arguments\":{\"unit\":\"k\",\"city\":\"x\"}}"
                       "</tool_call>"));
  EXPECT_FALSE(accepts(hermes, "<tool_call>{\"name\":\"get_weather\",\"arguments\":{}}</tool_call>"));
  EXPECT_FALSE(accepts(hermes, "Sure!"));

  // A named choice allows that function only; parallel_tool_calls false allows one call.
  r = parse_completion_request(
      "{" + kHi + "," + kTools + R"(,"tool_choice":{"type":"function","function":{"name":"get_time"}}})",
      Endpoint::Chat);
  const auto named = forced_tool_grammar(r.tools, f, "<tool_call>");
  EXPECT_TRUE(accepts(named, "<tool_call>{\"name\":\"get_time\",\"arguments\":{}}</tool_call>"));
  EXPECT_FALSE(accepts(named, "<tool_call>{\"name\":\"get_weather\",\"arguments\":{\"city\":\"x\"}}</tool_call>"));

  const std::string args = R"({"city":"Paris"})";
  const std::vector<std::pair<std::string, std::string>> families = {
      {"[TOOL_CALLS][ARGS]", "[TOOL_CALLS]get_weather[ARGS]" + args},
      {"[TOOL_CALLS]", "[TOOL_CALLS][{\"name\": \"get_weather\", \"arguments\": " + args + "}]"},
      {"<｜tool▁calls▁begin｜>", "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>get_weather<｜tool▁sep｜>" + args +
                                     "<｜tool▁call▁end｜><｜tool▁calls▁end｜>"},
      {"<｜tool▁calls▁begin｜>```json",
       "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>get_weather\n```json\n" + args +
           "\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>"},
      {"<|start_header_id|><|python_tag|>", "{\"name\": \"get_weather\", \"parameters\": " + args + "}"},
      {"<|channel|><|message|>", "<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>" + args},
  };
  r = parse_completion_request("{" + kHi + "," + kTools + R"(,"tool_choice":"required"})", Endpoint::Chat);
  for (const auto& [source, output] : families) {
    SCOPED_TRACE(source);
    f = output_format(source, r.tools, "");
    const auto g = forced_tool_grammar(r.tools, f, source);
    EXPECT_TRUE(accepts(g, output));
    // What the grammar forces, the parser reads back.
    const auto parsed = chat::parse_output(output, f, true);
    ASSERT_EQ(parsed.calls.size(), 1u);
    EXPECT_EQ(parsed.calls[0].name, "get_weather");
    EXPECT_EQ(json::parse(parsed.calls[0].arguments), json::parse(args));
  }
  // A prompt that opened <think> gets it closed first.
  f = output_format("<tool_call></think>", r.tools, "<｜Assistant｜><think>\n");
  EXPECT_TRUE(f.starts_in_reasoning);
  const auto think = forced_tool_grammar(r.tools, f, "<tool_call></think>");
  EXPECT_TRUE(accepts(think, "</think>\n\n<tool_call>{\"name\":\"get_time\",\"arguments\":{}}</tool_call>"));
  // A schema keyword the grammar cannot enforce is a 400 naming the tools.
  r = parse_completion_request("{" + kHi + R"(,"tools":[{"type":"function","function":{"name":"f","parameters":
      {"type":"object","properties":{"s":{"type":"string","pattern":"a+"}}}}}],"tool_choice":"required"})",
                               Endpoint::Chat);
  try {
    forced_tool_grammar(r.tools, output_format("<tool_call>", r.tools, ""), "<tool_call>");
    ADD_FAILURE() << "accepted a pattern";
  } catch (const ApiError& e) {
    EXPECT_EQ(e.param(), "tools");
  }
}

TEST(ChatTools, AnswerAndStreamShapes) {
  chat::OutputFormat f{chat::ToolFamily::Hermes, chat::ReasoningFormat::Think, true, false, {}, {}, {}};
  const std::string text =
      "<think>\nweather\n</think>\n\n<tool_call>\n{\"name\": \"get_time\", \"arguments\": {}}\n</tool_call>";
  ChatOutput whole(f);
  const json m = whole.message(text);
  EXPECT_TRUE(m["content"].is_null());
  EXPECT_EQ(m["reasoning_content"], "weather");
  ASSERT_EQ(m["tool_calls"].size(), 1u);
  EXPECT_TRUE(m["tool_calls"][0]["id"].get<std::string>().starts_with("call_"));
  EXPECT_EQ(m["tool_calls"][0]["type"], "function");
  EXPECT_EQ(m["tool_calls"][0]["function"]["arguments"], "{}");
  EXPECT_TRUE(whole.made_calls());

  ChatOutput stream(f);
  std::vector<json> deltas;
  for (char c : text) {
    for (auto& d : stream.push(std::string(1, c))) deltas.push_back(std::move(d));
  }
  for (auto& d : stream.finish()) deltas.push_back(std::move(d));
  std::string reasoning, args;
  int headers = 0;
  for (const auto& d : deltas) {
    EXPECT_FALSE(d.contains("content")) << d.dump();
    if (d.contains("reasoning_content")) reasoning += d["reasoning_content"].get<std::string>();
    if (!d.contains("tool_calls")) continue;
    const json& c = d["tool_calls"][0];
    EXPECT_EQ(c["index"], 0);
    if (c.contains("id")) {
      ++headers;
      EXPECT_EQ(c["function"]["name"], "get_time");
      EXPECT_EQ(c["function"]["arguments"], "");
      EXPECT_EQ(c["type"], "function");
    } else {
      args += c["function"]["arguments"].get<std::string>();
    }
  }
  EXPECT_EQ(reasoning, "weather");
  EXPECT_EQ(headers, 1);
  EXPECT_EQ(args, "{}");
  EXPECT_TRUE(stream.made_calls());
}

}  // namespace
}  // namespace tessera::server
