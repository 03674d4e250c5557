// A chat answer as the API returns it: the generated text split by src/chat into content, reasoning_content and
// tool_calls (with fresh "call_..." ids), as a whole message or as stream deltas; and the grammar that forces a
// call when tool_choice is "required" or names a function.
#pragma once

#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "chat/output.h"
#include "chat/stream.h"
#include "grammar/tool_call.h"
#include "server/chat_request.h"
#include "server/response_format.h"

namespace tessera::server {

// How a request's output is read: the template's family and reasoning markers, whether tools were offered, and
// whether the rendered prompt opened the reasoning block. `family` (--tool-format) overrides the template's markers.
chat::OutputFormat output_format(std::string_view template_source, const ChatTools& tools, std::string_view prompt,
                                 std::string_view family = {});
// The same from the template's format found once at start (chat::template_output_format).
chat::OutputFormat output_format(const chat::OutputFormat& template_format, const ChatTools& tools,
                                 std::string_view prompt, std::string_view family = {});

// Whether the output needs parsing at all (otherwise content is the text as generated).
bool parses_output(const chat::OutputFormat& f);

// A derived syntax (JSON arguments) as the grammar layer's call syntax.
grammar::CallSyntax call_syntax(const chat::DerivedSyntax& d);

// The compiled grammar for a forced tool choice (required: any tool, several when parallel; named: that one).
// A schema the grammar cannot express, or a family without a call grammar, is a 400 naming the field.
OutputGrammar forced_tool_grammar(const ChatTools& tools, const chat::OutputFormat& f,
                                  std::string_view template_source);

class ChatOutput {
 public:
  explicit ChatOutput(chat::OutputFormat format);

  // The whole answer: {"role", "content", "refusal", ["reasoning_content"], ["tool_calls"]}.
  nlohmann::json message(std::string_view text);
  // Stream: the delta objects the new piece adds (each becomes one chunk).
  std::vector<nlohmann::json> push(std::string_view piece);
  std::vector<nlohmann::json> finish();

  bool made_calls() const { return calls_ > 0; }

 private:
  std::vector<nlohmann::json> deltas(const chat::OutputDelta& d);
  std::string new_id();

  chat::OutputFormat format_;
  chat::OutputStream stream_;
  std::vector<std::string> ids_;
  size_t calls_ = 0;
  std::mt19937_64 rng_;
};

}  // namespace tessera::server
