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
  Gemma4,      // <|tool_call>call:f{key:<|"|>text<|"|>,n:1}<tool_call|>, repeated for several
};

// A call syntax learned from a chat template (chat::DerivedSyntax): literal text and slots. The grammar writes the
// literal text exactly as the template does. Arguments are a JSON object, or key/value pairs in the template's
// markup: each pair a pattern of Text, Key and Value pieces.
struct CallPiece {
  enum Kind { Text, Name, Args, Id, Index, Key, Value } kind = Text;
  std::string text;  // Text
};
struct CallSyntax {
  std::string open, sep, close;  // before the first call, between two, after the last
  std::vector<CallPiece> call;
  bool several = false;  // the template writes several calls in one turn
  bool json_args = true;
  std::vector<CallPiece> pair;       // one argument (json_args false)
  std::vector<CallPiece> pair_json;  // a non-text argument, where the template marks it apart (else empty)
  std::string pair_sep;              // between two arguments
  bool sorted_keys = false;          // the template writes arguments sorted by name (else: the schema's order)
  std::vector<std::string> avoid;    // tags no value may hold (where a family's reader ends the block at them)
  // Lists and objects as nested markup (MiniMax M3): one item (a Value), one member (Key, Value); else empty.
  std::vector<CallPiece> item, member;
  bool python_bools = false;  // boolean values written True / False (the template's Python str of a bool)
};

// The parameters whose schema is text (type "string", or an enum or const of strings): in pair markup their values
// are written raw, and a reader keeps them strings however they look; other values are written as JSON. Text inside
// lists and objects comes as paths too, for nested markup: "where" kMemberPath "name", "tags" kItemPath.
constexpr char kMemberPath = '\x1f';
constexpr char kItemPath = '\x1e';
std::vector<std::string> text_parameters(std::string_view parameters_json);

// Grammar text for one call (or, with several, one or more) of any of `tools`, after the literal `prefix` (e.g.
// "</think>\n\n" to close a reasoning block the prompt opened). Throws Error naming the tool whose schema is bad,
// or when `tools` is empty.
std::string tool_call_grammar(const std::vector<ToolSchema>& tools, ToolCallFormat format, bool several,
                              std::string_view prefix = {});
// The same for a learned syntax (several only where the syntax has them). Ids are 9 letters or digits (what
// Mistral-style templates insist on), call numbers one digit. Pair arguments: the schema's properties in declared
// order (required ones always, optional ones maybe, no others); a text value is any text without the tag that
// ends it (length-bounded: without the tag's first byte) or any of `avoid`, an enum of strings its values raw;
// lists and objects in nested markup where the syntax has it (item, member); other values JSON whose strings leave
// out the tag's first byte.
std::string tool_call_grammar(const std::vector<ToolSchema>& tools, const CallSyntax& syntax, bool several,
                              std::string_view prefix = {});

}  // namespace tessera::grammar
