// What the forced-call tests share (test_derived_pairs.cpp, test_native_calls.cpp): the two functions their
// requests offer, a corpus template with the tokens of its 06_tool_call case, that template's render of a call,
// and whether a span of a render is a sentence of the forced grammar that reads back as the call.
#pragma once

#include <cstddef>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "chat/output.h"
#include "server/openai_api.h"

namespace tessera::test {

// Equal as JSON, whatever the key order.
bool same_json(std::string_view text, const nlohmann::ordered_json& want);

// get_weather, with the test's own parameter schema, and get_time(zone).
class CallFunctions {
 public:
  explicit CallFunctions(nlohmann::ordered_json weather);

  nlohmann::ordered_json tools() const;
  // A chat request whose tool_choice is "required" or the function named `choice`.
  server::CompletionRequest request(const std::string& choice, bool parallel) const;
  // "" when the call is to one of the two functions with arguments its schema accepts; else what is wrong.
  std::string validate(const chat::ToolCall& c) const;

 private:
  nlohmann::ordered_json weather_, time_;
};

struct CallTemplate {
  std::string name, source, bos, eos;
  chat::OutputFormat format;
};

// Every 06_tool_call case of the shared template corpus (none without the fixtures).
std::vector<nlohmann::ordered_json> tool_call_cases();
// The template of such a case, with its bos and eos tokens and the output format derived from it.
CallTemplate call_template(const nlohmann::ordered_json& tool_call_case);
// The template of the 06_tool_call case of `name`; throws where there is none.
CallTemplate call_template(const std::string& name);

// The template's assistant turn calling get_weather with `args`, offered `tools`.
std::string render_call(const CallTemplate& c, const nlohmann::ordered_json& tools, const nlohmann::ordered_json& args);

// Whether some span of `text` from a start at or before `open` (up to 40 bytes before) to some end after `name` is
// a sentence of the grammar that reads back as one call with `args`.
bool has_sentence(const server::OutputGrammar& g, const chat::OutputFormat& f, const std::string& text, size_t open,
                  size_t name, const nlohmann::ordered_json& args);

}  // namespace tessera::test
