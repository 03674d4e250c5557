// A tool-call syntax learned from a chat template rather than written by hand: the template renders assistant
// turns with calls to sentinel functions, and where the sentinels land says what surrounds a call's name, how its
// arguments are written (a JSON object, or key/value pairs in the template's own markup) and what opens, separates
// and closes calls. parse_output reads ToolFamily::Derived output with it; grammar/tool_call.h forces it.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "chat/output.h"

namespace tessera::chat {

// The slots of a pattern: the bytes below stand for them inside the pattern strings (templates never render
// these control bytes). A slot that occurs again must repeat what its first occurrence read.
constexpr char kName = '\x01';   // the function name
constexpr char kArgs = '\x02';   // the arguments: a JSON object, or the pairs (DerivedSyntax::pair)
constexpr char kId = '\x03';     // a call id the model makes up
constexpr char kIndex = '\x04';  // the call's number (digits)
constexpr char kKey = '\x05';    // an argument's name (pairs)
constexpr char kValue = '\x06';  // an argument's value (pairs)

struct DerivedSyntax {
  std::string open;          // before the first call
  std::string call;          // one call: text with kName, kArgs, kId, kIndex slots
  std::string sep;           // between two calls
  std::string close;         // after the last call
  bool several = false;      // the template wrote two calls in one turn
  bool json_args = true;     // kArgs is a JSON object; otherwise pairs
  std::string pair;          // one argument: text with kKey and kValue slots
  std::string pair_json;     // a non-string argument where the template marks it apart ("" when it does not)
  std::string pair_sep;      // between two arguments
  std::string marker;        // the text that opens a block in the output (where the reader looks)
  bool sorted_keys = false;  // the template writes arguments sorted by name, whatever their order (dictsort)
  // Lists and objects written as nested markup rather than JSON (MiniMax M3's "<item>v</item>", "<k>v</k>"): one
  // list item (a kValue slot) and one object member (kKey, kValue); "" where the template writes them otherwise.
  std::string item, member;
  bool python_bools = false;  // booleans written True / False (Jinja's `| string` of a Python bool: Qwen 3.5)
};

// Paths of nested values in OutputFormat::text_args: a member's key follows kMemberPath, a list item is kItemPath.
constexpr char kMemberPath = '\x1f';
constexpr char kItemPath = '\x1e';

// What a template's sentinel conversations show: the learned syntax (when the template renders calls in a way the
// derivation understands) and the assistant turn with one sentinel call, as the model would write it.
struct Derivation {
  std::optional<DerivedSyntax> syntax;
  std::string sample;       // one call of kSentinelName with kSentinelArguments, as the template writes it
  std::string sample_many;  // two calls (empty when the template writes one call per turn)
};

constexpr std::string_view kSentinelName = "__tessera_fa__";
constexpr std::string_view kSentinelArguments = R"({"__tessera_ka__":"__tessera_va__"})";

// Derives the syntax of a Jinja chat template (bos/eos: the values the template gets). No throw: a template that
// cannot be parsed or rendered with tool calls gives an empty Derivation.
Derivation derive_tool_syntax(std::string_view template_source, std::string_view bos, std::string_view eos);

// The template's output format: detect_output_format's, unless its family's reader cannot read back the calls
// the template writes while a derived syntax can (ToolFamily::Derived, `derived` set).
OutputFormat template_output_format(std::string_view template_source, std::string_view bos, std::string_view eos);

}  // namespace tessera::chat
