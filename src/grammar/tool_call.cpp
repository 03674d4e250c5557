// Tool-call grammars: one rule per function pins its name and compiles its parameters schema; the family's
// wrapper then allows one call or a list of them.
#include "grammar/tool_call.h"

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "grammar/json_schema.h"
#include "grammar/parser.h"
#include "util/error.h"

namespace tessera::grammar {

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
                    i, quote_literal(name), quote_literal(nlohmann::json(args_key).dump()), args.expression);
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
