// Grammars for tool calls in a model family's format, so a constrained model can only emit calls whose arguments
// validate against the called function's schema (for tool_choice "required" or a named function).
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace tessera::grammar {

struct ToolSchema {
  std::string name;
  std::string parameters;  // the function's JSON schema, as JSON text ("{}" accepts any arguments object)
};

enum class ToolCallFormat {
  Hermes,       // <tool_call>\n{"name": "f", "arguments": {...}}\n</tool_call> (Qwen, Hermes)
  Llama3,       // {"name": "f", "parameters": {...}} (Llama 3.x JSON tool calling); several separated by "; "
  Mistral,      // [TOOL_CALLS][{"name": "f", "arguments": {...}}, ...]
  MistralArgs,  // [TOOL_CALLS]f[ARGS]{...} (Mistral Small 3.2, Devstral, Magistral), repeated for several
  DeepSeek,  // <｜tool▁calls▁begin｜><｜tool▁call▁begin｜>f<｜tool▁sep｜>{...}<｜tool▁call▁end｜>...<｜tool▁calls▁end｜>
  DeepSeekR1,  // the same with "function<｜tool▁sep｜>f\n```json\n{...}\n```" inside (R1, V3)
  Harmony,     // gpt-oss: <|channel|>commentary to=functions.f <|constrain|>json<|message|>{...}
};

// A call syntax learned from a chat template (chat::DerivedSyntax, whose arguments are a JSON object): literal
// text and slots. The grammar writes the literal text exactly as the template does.
struct CallPiece {
  enum Kind { Text, Name, Args, Id, Index } kind = Text;
  std::string text;  // Text
};
struct CallSyntax {
  std::string open, sep, close;  // before the first call, between two, after the last
  std::vector<CallPiece> call;
  bool several = false;  // the template writes several calls in one turn
};

// Grammar text for one call (or, with several, one or more) of any of `tools`, after the literal `prefix` (e.g.
// "</think>\n\n" to close a reasoning block the prompt opened). Throws Error naming the tool whose schema is bad,
// or when `tools` is empty.
std::string tool_call_grammar(const std::vector<ToolSchema>& tools, ToolCallFormat format, bool several,
                              std::string_view prefix = {});
// The same for a learned syntax (several only where the syntax has them). Ids are 9 letters or digits (what
// Mistral-style templates insist on), call numbers one digit.
std::string tool_call_grammar(const std::vector<ToolSchema>& tools, const CallSyntax& syntax, bool several,
                              std::string_view prefix = {});

}  // namespace tessera::grammar
