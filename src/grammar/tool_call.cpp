// Tool-call grammars: one rule per function pins its name and compiles its parameters schema; the family's
// wrapper then allows one call or a list of them.
#include "grammar/tool_call.h"

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "grammar/json_schema.h"
#include "util/error.h"

namespace tessera::grammar {

namespace {

std::string literal_of(const std::string& bytes) {
  std::string out = "\"";
  for (char c : bytes) {
    const auto u = static_cast<unsigned char>(c);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (u < 0x20 || u >= 0x7f) {
      out += fmt::format("\\x{:02x}", u);
    } else {
      out += c;
    }
  }
  return out + "\"";
}

}  // namespace

std::string tool_call_grammar(const std::vector<ToolSchema>& tools, ToolCallFormat format, bool several) {
  if (tools.empty()) fail("a tool-call grammar needs at least one tool");
  const std::string args_key = format == ToolCallFormat::Llama3 ? "parameters" : "arguments";
  std::string rules;
  std::string any_call;
  for (size_t i = 0; i < tools.size(); ++i) {
    SchemaRules args;
    try {
      args = json_schema_rules(tools[i].parameters, fmt::format("t{}-", i));
    } catch (const Error& e) {
      fail("tool '{}': {}", tools[i].name, e.what());
    }
    const std::string name = nlohmann::json(tools[i].name).dump();
    rules += args.rules;
    rules +=
        fmt::format("call-{} ::= \"{{\" ws \"\\\"name\\\"\" ws \":\" ws {} ws \",\" ws {} ws \":\" ws {} ws \"}}\"\n",
                    i, literal_of(name), literal_of(nlohmann::json(args_key).dump()), args.expression);
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
  }
  return "root ::= " + root + "\n" + rules + json_base_rules();
}

}  // namespace tessera::grammar
