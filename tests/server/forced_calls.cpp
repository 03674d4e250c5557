// The forced-call tests' shared functions, templates, renders and sentence check (forced_calls.h).
#include "forced_calls.h"

#include <algorithm>
#include <fstream>
#include <stdexcept>

#include "chat/derived.h"
#include "grammar/matcher.h"
#include "jinja/template.h"
#include "support/json_validate.h"
#include "support/test_paths.h"

namespace tessera::test {

using json = nlohmann::ordered_json;

bool same_json(std::string_view text, const json& want) {
  return nlohmann::json::parse(text, nullptr, false) == nlohmann::json::parse(want.dump());
}

CallFunctions::CallFunctions(json weather)
    : weather_(std::move(weather)),
      time_(json::parse(R"({"type": "object", "properties": {"zone": {"type": "string"}}, "required": []})")) {}

json CallFunctions::tools() const {
  return json::array(
      {{{"type", "function"},
        {"function", {{"name", "get_weather"}, {"description", "Weather"}, {"parameters", weather_}}}},
       {{"type", "function"}, {"function", {{"name", "get_time"}, {"description", "Time"}, {"parameters", time_}}}}});
}

server::CompletionRequest CallFunctions::request(const std::string& choice, bool parallel) const {
  json body = {{"messages", {{{"role", "user"}, {"content", "hi"}}}},
               {"tools", tools()},
               {"parallel_tool_calls", parallel},
               {"tool_choice", choice == "required" ? json("required")
                                                    : json{{"type", "function"}, {"function", {{"name", choice}}}}}};
  return server::parse_completion_request(body.dump(), server::Endpoint::Chat);
}

std::string CallFunctions::validate(const chat::ToolCall& c) const {
  const auto args = nlohmann::json::parse(c.arguments, nullptr, false);
  if (!args.is_object()) return "arguments are not an object: " + c.arguments;
  const auto schema = nlohmann::json::parse((c.name == "get_weather" ? weather_ : time_).dump());
  if (c.name == "get_weather" || c.name == "get_time") return json_invalid(args, schema, schema);
  return "unknown function " + c.name;
}

std::vector<json> tool_call_cases() {
  std::ifstream in(shared_dir() / "fixtures/templates/expected.json", std::ios::binary);
  std::vector<json> out;
  if (!in) return out;
  for (const auto& e : json::parse(in)) {
    if (e["case"] == "06_tool_call") out.push_back(e);
  }
  return out;
}

CallTemplate call_template(const json& tool_call_case) {
  CallTemplate c;
  c.name = tool_call_case["template"];
  std::ifstream t(shared_dir() / "fixtures/templates/templates" / c.name, std::ios::binary);
  c.source.assign(std::istreambuf_iterator<char>(t), {});
  c.bos = tool_call_case["variables"]["bos_token"];
  c.eos = tool_call_case["variables"]["eos_token"];
  c.format = chat::template_output_format(c.source, c.bos, c.eos);
  return c;
}

CallTemplate call_template(const std::string& name) {
  for (const auto& e : tool_call_cases()) {
    if (e["template"] == name) return call_template(e);
  }
  throw std::runtime_error("no 06_tool_call case for the template " + name + " in the shared fixtures");
}

std::string render_call(const CallTemplate& c, const json& tools, const json& args) {
  const json call = {
      {"id", "call00001"}, {"type", "function"}, {"function", {{"name", "get_weather"}, {"arguments", args}}}};
  const json ctx = {
      {"messages",
       {{{"role", "user"}, {"content", "hi"}}, {{"role", "assistant"}, {"content", ""}, {"tool_calls", {call}}}}},
      {"tools", tools},
      {"add_generation_prompt", false},
      {"bos_token", c.bos},
      {"eos_token", c.eos}};
  jinja::RenderOptions options;
  options.now = jinja::DateTime{2026, 1, 15, 12, 0, 0};
  return jinja::Template(c.source).render(ctx, options);
}

bool has_sentence(const server::OutputGrammar& g, const chat::OutputFormat& f, const std::string& text, size_t open,
                  size_t name, const json& args) {
  for (size_t start = open - std::min<size_t>(open, 40); start <= open; ++start) {
    grammar::Matcher m(g.compiled);
    for (size_t i = start; i < text.size() && m.advance(static_cast<uint8_t>(text[i]));) {
      ++i;
      if (!m.can_end() || i <= name) continue;
      const auto p = chat::parse_output(text.substr(start, i - start), f, true);
      if (p.calls.size() == 1 && same_json(p.calls[0].arguments, args)) return true;
    }
  }
  return false;
}

}  // namespace tessera::test
