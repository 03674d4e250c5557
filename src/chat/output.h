// What a chat model's output says: the answer (content), the reasoning before it (reasoning_content) and the tool
// calls, each model family writing them its own way. parse_output reads the text generated so far; with
// final == false it holds back what may still turn into a marker, so that the result of every prefix is a prefix
// of the final result (what streams rely on; tool-call arguments grow, calls only get added).
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

namespace tessera::chat {

// How a family writes tool calls.
enum class ToolFamily {
  Hermes,    // <tool_call>{"name": .., "arguments": {..}}</tool_call> (Hermes, Qwen 2.5/3, and the fallback)
  Llama3,    // {"name": .., "parameters": {..}} as the whole answer, or after <|python_tag|>; several joined by ";"
  Mistral,   // [TOOL_CALLS][{"name": .., "arguments": {..}}, ..] or [TOOL_CALLS]name[CALL_ID]id[ARGS]{..}
  DeepSeek,  // <｜tool▁calls▁begin｜><｜tool▁call▁begin｜>name<｜tool▁sep｜>{..}<｜tool▁call▁end｜>.. (V3.1; R1/V3's
             // "function<｜tool▁sep｜>name\n```json\n{..}\n```" too)
  Harmony,   // gpt-oss: <|channel|>commentary to=functions.name ..<|message|>{..}<|call|>; analysis = reasoning
  Gemma4,    // <|tool_call>call:name{key:<|"|>text<|"|>,..}<tool_call|>
  Derived,   // learned from the chat template's own rendering of calls (derived.h): OutputFormat::derived
};

struct DerivedSyntax;
using TextArguments = std::map<std::string, std::set<std::string>, std::less<>>;

// Reasoning markers around the thinking that precedes the answer.
enum class ReasoningFormat {
  None,
  Think,         // <think>..</think> (Qwen3, QwQ, DeepSeek R1/V3.1, ...)
  GemmaChannel,  // <|channel>thought\n..<channel|> (Gemma 4)
  Derived,       // learned from the chat template's render of reasoning_content: OutputFormat::markup
};

// Reasoning markers as a template writes them (ReasoningFormat::Derived, derive_reasoning.h).
struct ReasoningMarkup {
  std::string open;    // opens the block ("<mm:think>", Kimi K3's "<|open|>think<|sep|>")
  std::string close;   // closes it ("</mm:think>")
  std::string answer;  // what the template writes between the block and the answer, skipped when the output has
                       // it (Kimi K3's "<|open|>response<|sep|>"); empty for most
};

struct OutputFormat {
  ToolFamily tools = ToolFamily::Hermes;
  ReasoningFormat reasoning = ReasoningFormat::None;
  bool parse_tools = false;          // tools were offered and tool_choice is not "none"
  bool starts_in_reasoning = false;  // the prompt opened the reasoning block itself
  // ToolFamily::Derived: the syntax (without one: no calls read); another family: the pair markup its template
  // writes inside the family's blocks (Qwen 3.5, GLM), which forced calls follow.
  std::shared_ptr<const DerivedSyntax> derived;
  // Derived pair syntaxes: per function, the arguments whose schema is text; their values stay strings even where
  // they read as JSON (a "42" for a string parameter), as the template wrote them raw.
  std::shared_ptr<const TextArguments> text_args;
  ReasoningMarkup markup;  // ReasoningFormat::Derived: the markers
};

struct ToolCall {
  std::string name;
  std::string arguments;  // JSON text of an object (a prefix of it while a stream is still inside the call)
};

struct ParsedOutput {
  std::string reasoning;
  std::string content;
  std::vector<ToolCall> calls;
};

ParsedOutput parse_output(std::string_view text, const OutputFormat& format, bool final);

// The family and reasoning markers a chat template uses, from the markers its text contains (Hermes when it shows
// none: the most common convention for instruction-following tool use).
OutputFormat detect_output_format(std::string_view template_source);

// For --tool-format: hermes, llama3, mistral, deepseek, harmony, gemma4.
std::optional<ToolFamily> tool_family_from_name(std::string_view name);
std::string_view tool_family_name(ToolFamily family);

// Whether a rendered prompt ends inside an opened reasoning block (e.g. DeepSeek R1's generation prompt "<think>\n"),
// so the output starts as reasoning. A prompt that ends with the closing marker (MiniMax M3's "</mm:think>" with
// thinking off) or with an empty block does not.
bool prompt_opens_reasoning(std::string_view prompt, const OutputFormat& format);
bool prompt_opens_reasoning(std::string_view prompt, ReasoningFormat format);  // Think or GemmaChannel

// The text that ends the reasoning block the prompt opened and starts the answer ("</think>\n\n", Gemma's
// "<channel|>", a derived close followed by its answer text): what a forced answer writes first.
std::string reasoning_exit(const OutputFormat& format);

}  // namespace tessera::chat
