// Tool-call grammars: one rule per function pins its name and compiles its parameters schema; the family's
// wrapper then allows one call or a list of them.
#include "grammar/tool_call.h"

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "grammar/json_schema.h"
#include "grammar/parser.h"
#include "util/error.h"

namespace tessera::grammar {

namespace {

std::string lit(std::string_view s) { return quote_literal(std::string(s)); }

// One function's call in `format` (without the family's outer wrapper), as a grammar expression.
std::string call_expression(ToolCallFormat format, const std::string& name, const std::string& args) {
  const std::string json_name = nlohmann::json(name).dump();
  switch (format) {
    case ToolCallFormat::Hermes:
    case ToolCallFormat::Mistral:
    case ToolCallFormat::Llama3: {
      const std::string key = format == ToolCallFormat::Llama3 ? "\"parameters\"" : "\"arguments\"";
      return fmt::format("\"{{\" ws \"\\\"name\\\"\" ws \":\" ws {} ws \",\" ws {} ws \":\" ws {} ws \"}}\"",
                         lit(json_name), lit(key), args);
    }
    case ToolCallFormat::MistralArgs:
      return fmt::format("\"[TOOL_CALLS]\" {} \"[ARGS]\" {}", lit(name), args);
    case ToolCallFormat::DeepSeek:
      return fmt::format("\"<｜tool▁call▁begin｜>\" {} \"<｜tool▁sep｜>\" {} \"<｜tool▁call▁end｜>\"", lit(name), args);
    case ToolCallFormat::DeepSeekR1:
      return fmt::format(
          "\"<｜tool▁call▁begin｜>function<｜tool▁sep｜>\" {} \"\\n```json\\n\" {} \"\\n```<｜tool▁call▁end｜>\"",
          lit(name), args);
    case ToolCallFormat::Harmony:
      return fmt::format("\"<|channel|>commentary to=functions.\" {} \" <|constrain|>json<|message|>\" {}", lit(name),
                         args);
  }
  return {};
}

}  // namespace

std::string tool_call_grammar(const std::vector<ToolSchema>& tools, ToolCallFormat format, bool several,
                              std::string_view prefix) {
  if (tools.empty()) fail("a tool-call grammar needs at least one tool");
  std::string rules;
  std::string any_call;
  for (size_t i = 0; i < tools.size(); ++i) {
    SchemaRules args;
    try {
      args = json_schema_rules(tools[i].parameters, fmt::format("t{}-", i));
    } catch (const Error& e) {
      fail("tool '{}': {}", tools[i].name, e.what());
    }
    rules += args.rules;
    rules += fmt::format("call-{} ::= {}\n", i, call_expression(format, tools[i].name, args.expression));
    any_call += (i ? " | call-" : "call-") + std::to_string(i);
  }
  rules += "call ::= " + any_call + "\n";
  std::string root;
  switch (format) {
    case ToolCallFormat::Hermes:
      rules += "wrapped ::= \"<tool_call>\" ws call ws \"</tool_call>\"\n";
      root = several ? "wrapped ( ws wrapped )*" : "wrapped";
      break;
    case ToolCallFormat::Llama3:
      root = several ? "call ( \"; \" call )*" : "call";
      break;
    case ToolCallFormat::Mistral:
      root = several ? "\"[TOOL_CALLS]\" \"[\" ws call ( ws \",\" ws call )* ws \"]\""
                     : "\"[TOOL_CALLS]\" \"[\" ws call ws \"]\"";
      break;
    case ToolCallFormat::MistralArgs:
      root = several ? "call+" : "call";
      break;
    case ToolCallFormat::DeepSeek:
    case ToolCallFormat::DeepSeekR1:
      root = fmt::format("\"<｜tool▁calls▁begin｜>\" {} \"<｜tool▁calls▁end｜>\"", several ? "call+" : "call");
      break;
    case ToolCallFormat::Harmony:
      root = "call";  // one message per call: the model stops at <|call|> and is given the result
      break;
  }
  if (!prefix.empty()) root = lit(prefix) + " " + root;
  return "root ::= " + root + "\n" + rules + json_base_rules();
}

}  // namespace tessera::grammar
