// Tool-call grammars: one rule per function pins its name and compiles its parameters schema; the family's
// wrapper then allows one call or a list of them.
#include "grammar/tool_call.h"

#include <fmt/format.h>

#include <nlohmann/json.hpp>
#include <set>

#include "grammar/json_schema.h"
#include "grammar/pair_args.h"
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
    case ToolCallFormat::Gemma4:
      return fmt::format("\"<|tool_call>call:\" {} {} \"<tool_call|>\"", lit(name), args);
  }
  return {};
}

SchemaRules json_arguments(const ToolSchema& tool, size_t i) {
  return json_schema_rules(tool.parameters, fmt::format("t{}-", i));
}

SchemaRules gemma_arguments(const ToolSchema& tool, size_t i) {
  // The reader takes the name up to the arguments' brace.
  if (tool.name.find_first_of(" \n<{") != std::string::npos) fail("the name cannot be written in Gemma's calls");
  SchemaOptions options;
  options.notation = Notation::Gemma;
  return json_schema_rules(tool.parameters, fmt::format("t{}-", i), options);
}

// Each tool's arguments rule (from `arguments(tool, i)`), then `call-i` rules from `expression(name, args)` and
// `call` for any of them.
template <typename A, typename F>
std::string call_rules(const std::vector<ToolSchema>& tools, A arguments, F expression) {
  if (tools.empty()) fail("a tool-call grammar needs at least one tool");
  std::string rules;
  std::string any_call;
  for (size_t i = 0; i < tools.size(); ++i) {
    SchemaRules args;
    try {
      args = arguments(tools[i], i);
    } catch (const Error& e) {
      fail("tool '{}': {}", tools[i].name, e.what());
    }
    rules += args.rules;
    rules += fmt::format("call-{} ::= {}\n", i, expression(tools[i].name, args.expression));
    any_call += (i ? " | call-" : "call-") + std::to_string(i);
  }
  return rules + "call ::= " + any_call + "\n";
}

std::string optional_lit(std::string_view s) { return s.empty() ? std::string() : lit(s) + " "; }

}  // namespace

std::string tool_call_grammar(const std::vector<ToolSchema>& tools, const CallSyntax& syntax, bool several,
                              std::string_view prefix) {
  std::set<std::string> json_tags;
  const auto arguments = [&](const ToolSchema& tool, size_t i) {
    if (syntax.json_args) return json_arguments(tool, i);
    PairRules p = pair_arguments(tool.parameters, syntax, fmt::format("t{}-", i));
    json_tags.insert(p.json_tags.begin(), p.json_tags.end());
    return SchemaRules{p.expression, p.rules};
  };
  std::string rules = call_rules(tools, arguments, [&](const std::string& name, const std::string& args) {
    std::string e;
    for (const auto& p : syntax.call) {
      switch (p.kind) {
        case CallPiece::Text:
          e += optional_lit(p.text);
          break;
        case CallPiece::Name:
          e += lit(name) + " ";
          break;
        case CallPiece::Args:
          if (!args.empty()) e += args + " ";
          break;
        case CallPiece::Key:
        case CallPiece::Value:
          fail("a call pattern holds a key or value slot outside its arguments");
        case CallPiece::Id:
          e += "[a-zA-Z0-9]{9} ";
          break;
        case CallPiece::Index:
          e += "[0-9] ";
          break;
      }
    }
    return e;
  });
  std::string root = optional_lit(prefix) + optional_lit(syntax.open) + "call ";
  if (several && syntax.several) root += "( " + optional_lit(syntax.sep) + "call )* ";
  root += optional_lit(syntax.close);
  return "root ::= " + root + "\n" + rules + json_base_rules() + pair_base_rules(json_tags);
}

std::string tool_call_grammar(const std::vector<ToolSchema>& tools, ToolCallFormat format, bool several,
                              std::string_view prefix) {
  const bool gemma = format == ToolCallFormat::Gemma4;
  std::string rules =
      call_rules(tools, gemma ? gemma_arguments : json_arguments,
                 [&](const std::string& name, const std::string& args) { return call_expression(format, name, args); });
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
    case ToolCallFormat::Gemma4:
      root = several ? "call+" : "call";
      break;
  }
  if (!prefix.empty()) root = lit(prefix) + " " + root;
  return "root ::= " + root + "\n" + rules + json_base_rules() + (gemma ? gemma_base_rules() : "");
}

}  // namespace tessera::grammar
