// Tool calling and reasoning through `tessera serve` on a random-weight model with a Hermes-style template
// (tests/server/node/hermes_tools.jinja): tool_choice "required" and a named function force calls whose
// arguments validate against the schema, whole and streamed; the tool result sent back in history is accepted;
// a template that opens <think> gives reasoning_content, whole and streamed alike; bad tool fields are 400s;
// --tool-format overrides the family the template's markers select; a syntax derived from a corpus template, with
// JSON arguments and with key/value markup (nested markup for lists and objects too); reasoning markers derived
// from a corpus template (Kimi K3's).
#include <set>

#include "server/serve_test_util.h"
#include "support/json_validate.h"
#include "support/tiny_model.h"

namespace tessera::test {
namespace {

std::string template_file(const std::string& name) { return (source_dir() / "tests/server/node" / name).string(); }

const json kSchema = json::parse(R"({"type": "object", "properties": {
  "city": {"type": "string", "maxLength": 12}, "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
  "days": {"type": "integer"}}, "required": ["city", "unit"], "additionalProperties": false})");

json tools() {
  return json::array(
      {{{"type", "function"},
        {"function", {{"name", "get_weather"}, {"description", "Weather"}, {"parameters", kSchema}}}},
       {{"type", "function"},
        {"function", {{"name", "get_time"}, {"parameters", {{"type", "object"}, {"properties", json::object()}}}}}}});
}

json ask(int seed) {
  return {{"messages", {{{"role", "user"}, {"content", "Weather in Paris?"}}}},
          {"tools", tools()},
          {"tool_choice", {{"type", "function"}, {"function", {{"name", "get_weather"}}}}},
          {"max_tokens", 400},
          {"seed", seed},
          {"temperature", 1.0}};
}

// The answer to `q` (random tokens after a prompt that opens the reasoning block) is all reasoning_content and no
// content, whole and streamed alike.
void expect_all_reasoning(httplib::Client& c, const json& q) {
  const json whole = post(c, "/v1/chat/completions", q);
  const json& m = whole["choices"][0]["message"];
  ASSERT_TRUE(m.contains("reasoning_content")) << whole.dump();
  EXPECT_FALSE(m["reasoning_content"].get<std::string>().empty());
  EXPECT_EQ(m["content"], "");
  json sq = q;
  sq["stream"] = true;
  auto r = c.Post("/v1/chat/completions", sq.dump(), "application/json");
  ASSERT_TRUE(r);
  std::string reasoning, content;
  for (const json& chunk : parse_stream(r->body)) {
    const json& d = chunk["choices"][0]["delta"];
    if (d.contains("reasoning_content")) reasoning += d["reasoning_content"].get<std::string>();
    if (d.contains("content")) content += d["content"].get<std::string>();
  }
  EXPECT_EQ(reasoning, m["reasoning_content"]);
  EXPECT_EQ(content, "");
}

TEST(ServeTools, ForcedCallsValidateWholeAndStreamedAndHistoryIsAccepted) {
  ServeProcess s(
      {"-m", random_tiny_llama(), "-t", "1", "-c", "2048", "--chat-template", template_file("hermes_tools.jinja")});
  auto c = client(s);
  for (int seed = 1; seed <= 5; ++seed) {
    const json r = post(c, "/v1/chat/completions", ask(seed));
    const json& choice = r["choices"][0];
    ASSERT_EQ(choice["finish_reason"], "tool_calls") << r.dump();
    const json& calls = choice["message"]["tool_calls"];
    ASSERT_EQ(calls.size(), 1u) << r.dump();
    EXPECT_TRUE(choice["message"]["content"].is_null());
    EXPECT_TRUE(calls[0]["id"].get<std::string>().starts_with("call_"));
    EXPECT_EQ(calls[0]["function"]["name"], "get_weather");
    const json args = json::parse(calls[0]["function"]["arguments"].get<std::string>());
    EXPECT_EQ(json_invalid(args, kSchema, kSchema), "") << args.dump();
  }
  // "required": any of the tools.
  json req = ask(9);
  req["tool_choice"] = "required";
  req["parallel_tool_calls"] = false;  // one call: a random model would rarely choose to stop adding more
  const json any = post(c, "/v1/chat/completions", req);
  ASSERT_EQ(any["choices"][0]["finish_reason"], "tool_calls") << any.dump();
  std::set<std::string> ids;
  for (const auto& call : any["choices"][0]["message"]["tool_calls"]) {
    EXPECT_TRUE(ids.insert(call["id"].get<std::string>()).second);
    const std::string name = call["function"]["name"];
    EXPECT_TRUE(name == "get_weather" || name == "get_time") << name;
    EXPECT_TRUE(json::parse(call["function"]["arguments"].get<std::string>()).is_object());
  }

  // Streamed: one call opened with its id, type and name, then argument pieces; finish_reason "tool_calls".
  json streamed = ask(3);
  streamed["stream"] = true;
  auto r = c.Post("/v1/chat/completions", streamed.dump(), "application/json");
  ASSERT_TRUE(r);
  std::string args, finish, id;
  for (const json& chunk : parse_stream(r->body)) {
    const json& ch = chunk["choices"][0];
    if (ch["finish_reason"].is_string()) finish = ch["finish_reason"];
    if (ch["delta"].contains("content")) {
      EXPECT_EQ(ch["delta"]["content"], "") << chunk.dump();
    }
    if (!ch["delta"].contains("tool_calls")) continue;
    const json& call = ch["delta"]["tool_calls"][0];
    EXPECT_EQ(call["index"], 0);
    if (call.contains("id")) {
      EXPECT_TRUE(id.empty());
      id = call["id"];
      EXPECT_EQ(call["type"], "function");
      EXPECT_EQ(call["function"]["name"], "get_weather");
      EXPECT_EQ(call["function"]["arguments"], "");
    } else {
      EXPECT_FALSE(id.empty()) << "arguments before the call opened";
      args += call["function"]["arguments"].get<std::string>();
    }
  }
  EXPECT_EQ(finish, "tool_calls");
  const json parsed = json::parse(args, nullptr, false);
  ASSERT_TRUE(parsed.is_object()) << args;
  EXPECT_EQ(json_invalid(parsed, kSchema, kSchema), "") << args;
  // The same seed whole gives the same arguments.
  const json same = post(c, "/v1/chat/completions", ask(3));
  EXPECT_EQ(same["choices"][0]["message"]["tool_calls"][0]["function"]["arguments"], args);

  // The tool result goes back in the history: accepted, answered with text (tools offered, choice auto).
  json history = {
      {"messages",
       {{{"role", "user"}, {"content", "Weather in Paris?"}},
        {{"role", "assistant"},
         {"content", nullptr},
         {"tool_calls",
          {{{"id", id}, {"type", "function"}, {"function", {{"name", "get_weather"}, {"arguments", args}}}}}}},
        {{"role", "tool"}, {"tool_call_id", id}, {"content", "{\"temperature\": 18}"}}}},
      {"tools", tools()},
      {"max_tokens", 8},
      {"seed", 1}};
  const json answer = post(c, "/v1/chat/completions", history);
  EXPECT_TRUE(answer["choices"][0]["message"].contains("content")) << answer.dump();

  // Bad fields: 400 naming them.
  json bad = ask(1);
  bad["tool_choice"] = {{"type", "function"}, {"function", {{"name", "nope"}}}};
  expect_error(c.Post("/v1/chat/completions", bad.dump(), "application/json"), 400, "invalid_request_error",
               "tool_choice", nullptr);
  bad = ask(1);
  bad["tools"][0]["function"]["parameters"]["properties"]["city"]["pattern"] = "[A-Z].*";
  expect_error(c.Post("/v1/chat/completions", bad.dump(), "application/json"), 400, "invalid_request_error", "tools",
               nullptr);
}

TEST(ServeTools, ToolFormatFlagOverridesTheTemplate) {
  // The Hermes-style template, read as Llama 3: the forced call is Llama 3's JSON and parses back.
  ServeProcess s({"-m", random_tiny_llama(), "-t", "1", "-c", "2048", "--chat-template",
                  template_file("hermes_tools.jinja"), "--tool-format", "llama3"});
  auto c = client(s);
  const json r = post(c, "/v1/chat/completions", ask(2));
  ASSERT_EQ(r["choices"][0]["finish_reason"], "tool_calls") << r.dump();
  const json args =
      json::parse(r["choices"][0]["message"]["tool_calls"][0]["function"]["arguments"].get<std::string>());
  EXPECT_EQ(json_invalid(args, kSchema, kSchema), "") << args.dump();
  EXPECT_NE(run_command({tessera_bin().string(), "serve", "-m", random_tiny_llama(), "--tool-format", "xml"}).exit_code,
            0);
}

TEST(ServeTools, ReasoningFromATemplateThatOpensThink) {
  ServeProcess s(
      {"-m", random_tiny_llama(), "-t", "1", "-c", "1024", "--chat-template", template_file("think_opened.jinja")});
  auto c = client(s);
  const json q = {{"messages", {{{"role", "user"}, {"content", "hi"}}}},
                  {"max_tokens", 24},
                  {"seed", 4},
                  {"chat_template_kwargs", {{"enable_thinking", true}}}};
  // The model never closed </think> in 24 random tokens: all of it is reasoning, nothing is lost.
  ASSERT_NO_FATAL_FAILURE(expect_all_reasoning(c, q));
}

// A template whose call syntax no reader knows by hand (Kimi K2's, from ../shared/fixtures/templates): the server
// derives it at start, forces calls in it and reads them back, whole and streamed.
TEST(ServeTools, DerivedSyntaxForcedCallsReadBack) {
  const auto kimi = shared_dir() / "fixtures/templates/templates/moonshotai-Kimi-K2.jinja";
  ServeProcess s({"-m", random_tiny_llama(), "-t", "1", "-c", "2048", "--chat-template", kimi.string()});
  auto c = client(s);
  for (int seed = 1; seed <= 3; ++seed) {
    const json r = post(c, "/v1/chat/completions", ask(seed));
    const json& choice = r["choices"][0];
    ASSERT_EQ(choice["finish_reason"], "tool_calls") << r.dump();
    const json& calls = choice["message"]["tool_calls"];
    ASSERT_EQ(calls.size(), 1u) << r.dump();
    EXPECT_EQ(calls[0]["function"]["name"], "get_weather");
    const json args = json::parse(calls[0]["function"]["arguments"].get<std::string>());
    EXPECT_EQ(json_invalid(args, kSchema, kSchema), "") << args.dump();
  }
  json req = ask(4);
  req["stream"] = true;
  auto r = c.Post("/v1/chat/completions", req.dump(), "application/json");
  ASSERT_TRUE(r);
  std::string name, arguments;
  for (const json& ch : parse_stream(r->body)) {
    if (!ch["choices"][0]["delta"].contains("tool_calls")) continue;
    const json& f = ch["choices"][0]["delta"]["tool_calls"][0]["function"];
    if (f.contains("name")) name += f["name"].get<std::string>();
    arguments += f.value("arguments", "");
  }
  EXPECT_EQ(name, "get_weather");
  EXPECT_EQ(json_invalid(json::parse(arguments), kSchema, kSchema), "") << arguments;
}

// A template whose calls write arguments as key/value markup (Seed-OSS: Qwen3-Coder's <function=f><parameter=k>v
// </parameter>, derived at start): tool_choice "required" forces calls in it; every response reads back valid.
TEST(ServeTools, DerivedKeyValueRequiredCallsValidate) {
  const auto seed_oss = shared_dir() / "fixtures/templates/templates/ByteDance-Seed-OSS.jinja";
  ServeProcess s({"-m", random_tiny_llama(), "-t", "1", "-c", "2048", "--chat-template", seed_oss.string()});
  auto c = client(s);
  int valid = 0;
  for (int seed = 1; seed <= 20; ++seed) {
    json req = ask(seed);
    req["tool_choice"] = "required";
    req["parallel_tool_calls"] = false;
    const json r = post(c, "/v1/chat/completions", req);
    const json& choice = r["choices"][0];
    EXPECT_EQ(choice["finish_reason"], "tool_calls") << r.dump();
    const json& calls = choice["message"]["tool_calls"];
    if (!calls.is_array() || calls.size() != 1u) {
      ADD_FAILURE() << r.dump();
      continue;
    }
    const std::string name = calls[0]["function"]["name"];
    const json args = json::parse(calls[0]["function"]["arguments"].get<std::string>());
    const json schema = name == "get_weather" ? kSchema : json{{"type", "object"}, {"properties", json::object()}};
    const std::string problem = json_invalid(args, schema, schema);
    EXPECT_EQ(problem, "") << name << " " << args.dump();
    EXPECT_TRUE(name == "get_weather" || name == "get_time") << name;
    valid += problem.empty() && (name == "get_weather" || name == "get_time");
  }
  EXPECT_EQ(valid, 20);
}

// Templates whose forced calls follow their own markup where no JSON fits it: GLM 4.6 (hermes reader, XML pairs)
// and MiniMax M3 (lists and objects as nested XML): every "required" response reads back valid, list and object
// parameters included.
TEST(ServeTools, NativeMarkupRequiredCallsValidate) {
  const json schema = json::parse(R"({"type": "object", "properties": {"city": {"type": "string", "maxLength": 12},
    "tags": {"type": "array", "items": {"type": "string", "maxLength": 6}, "maxItems": 2},
    "where": {"type": "object", "properties": {"lat": {"type": "number"}}, "required": ["lat"]}},
    "required": ["city", "tags", "where"], "additionalProperties": false})");
  for (const std::string name : {"GLM-4.6.jinja", "MiniMax-M3.jinja"}) {
    SCOPED_TRACE(name);
    const auto file = shared_dir() / "fixtures/templates/templates" / name;
    ServeProcess s({"-m", random_tiny_llama(), "-t", "1", "-c", "4096", "--chat-template", file.string()});
    auto c = client(s);
    int valid = 0;
    for (int seed = 1; seed <= 8; ++seed) {
      json req = ask(seed);
      req["tools"][0]["function"]["parameters"] = schema;
      req["max_tokens"] = 1200;  // a random model spells M3's markup byte by byte
      const json r = post(c, "/v1/chat/completions", req);
      const json& calls = r["choices"][0]["message"]["tool_calls"];
      if (!calls.is_array() || calls.size() != 1u) {
        ADD_FAILURE() << r.dump();
        continue;
      }
      EXPECT_EQ(calls[0]["function"]["name"], "get_weather");
      const json args = json::parse(calls[0]["function"]["arguments"].get<std::string>());
      const std::string problem = json_invalid(args, schema, schema);
      EXPECT_EQ(problem, "") << args.dump();
      valid += problem.empty();
    }
    EXPECT_EQ(valid, 8);
  }
}

// Reasoning markers derived from a corpus template (Kimi K3's "<|open|>think<|sep|>..<|close|>think<|sep|>", which
// its generation prompt opens): random tokens after that prompt are reasoning_content, whole and streamed alike;
// a forced call first closes the block with the derived markers and reads back with empty reasoning.
TEST(ServeTools, DerivedReasoningMarkersGiveReasoningContent) {
  const auto k3 = shared_dir() / "fixtures/templates/templates/Kimi-K3.jinja";
  ServeProcess s({"-m", random_tiny_llama(), "-t", "1", "-c", "2048", "--chat-template", k3.string()});
  auto c = client(s);
  const json q = {{"messages", {{{"role", "user"}, {"content", "hi"}}}}, {"max_tokens", 24}, {"seed", 4}};
  ASSERT_NO_FATAL_FAILURE(expect_all_reasoning(c, q));

  const json call = post(c, "/v1/chat/completions", ask(5));
  const json& cm = call["choices"][0]["message"];
  ASSERT_EQ(call["choices"][0]["finish_reason"], "tool_calls") << call.dump();
  ASSERT_EQ(cm["tool_calls"].size(), 1u) << call.dump();
  EXPECT_EQ(cm["tool_calls"][0]["function"]["name"], "get_weather");
  const json args = json::parse(cm["tool_calls"][0]["function"]["arguments"].get<std::string>());
  EXPECT_EQ(json_invalid(args, kSchema, kSchema), "") << args.dump();
  EXPECT_FALSE(cm.contains("reasoning_content")) << call.dump();
}

}  // namespace
}  // namespace tessera::test
