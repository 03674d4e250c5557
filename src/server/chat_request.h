// The chat-only parts of a /v1/chat/completions body beyond plain messages: `tools`, `tool_choice`,
// `parallel_tool_calls`, the messages as the chat template reads them (assistant tool_calls with their arguments
// as objects, tool results), and the template's extra variables (`chat_template_kwargs`, `reasoning_effort`).
// Every problem is a 400 naming the field.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tokenizer/chat_template.h"

namespace tessera::server {

struct FunctionTool {
  std::string name;
  nlohmann::ordered_json parameters;  // a JSON schema ({} when the client sent none)
};

enum class ToolChoice { Auto, None, Required, Named };

struct ChatTools {
  nlohmann::ordered_json tools = nlohmann::ordered_json::array();  // as sent: the template's `tools`
  std::vector<FunctionTool> functions;
  ToolChoice choice = ToolChoice::Auto;
  std::string named;  // ToolChoice::Named: the function
  bool parallel = true;
  // Whether the model is offered the tools (and its output parsed for calls).
  bool offered() const { return !functions.empty() && choice != ToolChoice::None; }
  bool forced() const { return choice == ToolChoice::Required || choice == ToolChoice::Named; }
};

// `tools` (an array of {"type": "function", "function": {"name", "description", "parameters", "strict"}}).
void parse_tools(const nlohmann::ordered_json& v, ChatTools& out);
// `tool_choice`: "auto", "none", "required" or {"type": "function", "function": {"name": ..}}.
void parse_tool_choice(const nlohmann::ordered_json& v, ChatTools& out);
// After every field is read: a named or required choice needs the tools it names.
void check_tools(const ChatTools& t);

// One message as the template reads it, checked: role (developer becomes system), content (a string, the text
// of content parts joined, or null), name; assistant tool_calls (arguments parsed from their JSON string into an
// object, as Hugging Face templates expect) and reasoning_content; tool messages' tool_call_id. `plain` gets the
// role and content text for the hand-written formats.
nlohmann::ordered_json template_message(const nlohmann::ordered_json& m, const std::string& param, ChatMessage& plain);

// `chat_template_kwargs` (merged into the template's variables) and `reasoning_effort`.
void parse_template_kwargs(const nlohmann::ordered_json& v, nlohmann::ordered_json& vars);
void parse_reasoning_effort(const nlohmann::ordered_json& v, nlohmann::ordered_json& vars);

}  // namespace tessera::server
