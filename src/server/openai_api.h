// The OpenAI wire format: request bodies of /v1/chat/completions and /v1/completions parsed and validated into
// plain structs (every problem an ApiError with the HTTP status, type, param and code OpenAI would give), and
// the JSON of responses, stream chunks and errors.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "engine/request.h"
#include "engine/sampler.h"
#include "server/chat_request.h"
#include "server/response_format.h"
#include "tokenizer/chat_template.h"
#include "util/error.h"

namespace tessera::server {

// An error meant for an API client, with what OpenAI's error object carries.
class ApiError : public Error {
 public:
  ApiError(int status, std::string message, std::string type = "invalid_request_error", std::string param = {},
           std::string code = {})
      : Error(message), status_(status), type_(std::move(type)), param_(std::move(param)), code_(std::move(code)) {}
  int status() const { return status_; }
  const std::string& type() const { return type_; }
  const std::string& param() const { return param_; }
  const std::string& code() const { return code_; }

 private:
  int status_;
  std::string type_, param_, code_;
};

// A 400 invalid_request_error naming the parameter.
template <typename... Args>
[[noreturn]] void invalid_param(std::string param, fmt::format_string<Args...> format, Args&&... args) {
  throw ApiError(400, fmt::format(format, std::forward<Args>(args)...), "invalid_request_error", std::move(param));
}

// {"error": {"message", "type", "param", "code"}} (param and code null when empty).
nlohmann::json error_json(std::string_view message, std::string_view type, std::string_view param = {},
                          std::string_view code = {});
nlohmann::json error_json(const ApiError& e);

enum class Endpoint { Chat, Completion };

struct CompletionRequest {
  Endpoint endpoint = Endpoint::Chat;
  std::string model;                                                        // "" when the client sent none
  std::vector<ChatMessage> messages;                                        // chat: each message's role and text alone
  nlohmann::ordered_json chat_messages = nlohmann::ordered_json::array();   // chat: as the Jinja template reads them
  ChatTools tools;                                                          // chat: tools, tool_choice
  nlohmann::ordered_json template_vars = nlohmann::ordered_json::object();  // chat_template_kwargs, reasoning_effort
  std::string prompt;                                                       // completions: text ...
  std::vector<int32_t> prompt_tokens;                                       // ... or token ids (then prompt_is_tokens)
  bool prompt_is_tokens = false;
  bool echo = false;  // completions: the prompt text comes first in the output
  bool stream = false;
  bool include_usage = false;  // stream_options.include_usage
  // Sampling: nullopt means the server's default (its --temp, --top-p, ... flags).
  std::optional<float> temperature, top_p, min_p, repeat_penalty, frequency_penalty, presence_penalty;
  std::optional<int32_t> top_k;
  std::optional<uint64_t> seed;
  std::optional<int32_t> max_tokens;
  std::vector<std::string> stop;
  bool ignore_eos = false;
  int32_t logprobs = -1;  // -1: none; else the number of alternatives per token
  OutputGrammar grammar;  // response_format (or completions' json_schema / grammar), compiled
};

// Limits a server sets on requests (in addition to the model's context).
struct RequestLimits {
  size_t max_messages = 1024;
  size_t max_stop = 4;
  size_t max_stop_length = 256;
  int32_t max_logprobs = 20;
};

// Parses and checks one body; throws ApiError (400 for bad JSON, bad types, bad values and unknown fields).
CompletionRequest parse_completion_request(std::string_view body, Endpoint endpoint, const RequestLimits& limits = {});

// The server's defaults overlaid with the request's values, checked (ApiError naming the parameter). OpenAI's
// frequency and presence penalties count the whole sequence, so using them widens the window to all tokens.
SamplerParams merge_sampler(const CompletionRequest& r, const SamplerParams& defaults);

// "stop" for end of generation and stop strings, "length" for token and context limits.
std::string_view finish_reason_text(FinishReason r);

struct Usage {
  int64_t prompt_tokens = 0;
  int64_t completion_tokens = 0;
};
nlohmann::json usage_json(const Usage& u);

// One generated token's logprobs as pieces of text (the tokenizer turns ids into pieces beforehand).
struct TokenLogprobs {
  std::string token;
  float logprob = 0;
  std::vector<std::pair<std::string, float>> top;
};
// chat: {"content": [{"token", "logprob", "bytes", "top_logprobs": [...]}]}
nlohmann::json chat_logprobs_json(const std::vector<TokenLogprobs>& tokens);
// completions: {"tokens", "token_logprobs", "top_logprobs", "text_offset"}; offset is the text before the first.
nlohmann::json completion_logprobs_json(const std::vector<TokenLogprobs>& tokens, size_t offset);

// What every response and chunk of one request shares.
struct ResponseMeta {
  std::string id;
  int64_t created = 0;  // unix seconds
  std::string model;
};

nlohmann::json chat_response_json(const ResponseMeta& m, std::string_view text, std::string_view finish_reason,
                                  const Usage& usage, const nlohmann::json& logprobs);
nlohmann::json completion_response_json(const ResponseMeta& m, std::string_view text, std::string_view finish_reason,
                                        const Usage& usage, const nlohmann::json& logprobs);
// A chat answer whose message was built elsewhere (content, reasoning_content, tool_calls).
nlohmann::json chat_message_response_json(const ResponseMeta& m, const nlohmann::json& message,
                                          std::string_view finish_reason, const Usage& usage,
                                          const nlohmann::json& logprobs);
// Stream chunks. finish_reason empty: not the last one. role: only on the first chat chunk.
nlohmann::json chat_chunk_json(const ResponseMeta& m, std::string_view role, std::string_view text,
                               std::string_view finish_reason, const nlohmann::json& logprobs);
// A chat chunk carrying `delta` as given ({"reasoning_content"}, {"content"} or {"tool_calls": [..]}).
nlohmann::json chat_delta_chunk_json(const ResponseMeta& m, const nlohmann::json& delta, std::string_view finish_reason,
                                     const nlohmann::json& logprobs);
nlohmann::json completion_chunk_json(const ResponseMeta& m, std::string_view text, std::string_view finish_reason,
                                     const nlohmann::json& logprobs);
// The closing chunk of stream_options.include_usage: no choices, the usage.
nlohmann::json usage_chunk_json(const ResponseMeta& m, Endpoint endpoint, const Usage& usage);

// JSON text for the wire: invalid UTF-8 (a token piece that splits a character) becomes U+FFFD instead of an
// exception.
std::string dump(const nlohmann::json& j);

}  // namespace tessera::server
