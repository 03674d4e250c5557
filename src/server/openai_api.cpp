// OpenAI request validation and response JSON. Field handling follows OpenAI's API: null means absent, known
// fields are type- and range-checked, unknown fields are refused (as OpenAI does), fields Tessera cannot honour
// (n > 1, logit_bias, the deprecated functions) are refused rather than silently ignored.
#include "server/openai_api.h"

#include <cmath>
#include <limits>
#include <set>

namespace tessera::server {

using nlohmann::json;

json error_json(std::string_view message, std::string_view type, std::string_view param, std::string_view code) {
  json e = {{"message", message}, {"type", type}, {"param", nullptr}, {"code", nullptr}};
  if (!param.empty()) e["param"] = param;
  if (!code.empty()) e["code"] = code;
  return {{"error", e}};
}

json error_json(const ApiError& e) { return error_json(e.what(), e.type(), e.param(), e.code()); }

std::string dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

namespace {

std::string_view type_name(const json& v) {
  switch (v.type()) {
    case json::value_t::null:
      return "null";
    case json::value_t::boolean:
      return "a boolean";
    case json::value_t::string:
      return "a string";
    case json::value_t::array:
      return "an array";
    case json::value_t::object:
      return "an object";
    case json::value_t::number_float:
      return "a decimal";
    default:
      return "an integer";
  }
}

[[noreturn]] void wrong_type(const std::string& param, std::string_view expected, const json& got) {
  invalid_param(param, "Invalid type for '{}': expected {}, but got {} instead.", param, expected, type_name(got));
}

double get_number(const json& v, const std::string& param, double lo, double hi) {
  if (!v.is_number()) wrong_type(param, "a number", v);
  const double x = v.get<double>();
  if (!std::isfinite(x) || x < lo || x > hi) {
    invalid_param(param, "Invalid value for '{}': {} is not in [{}, {}].", param, x, lo, hi);
  }
  return x;
}

int64_t get_integer(const json& v, const std::string& param, int64_t lo, int64_t hi) {
  if (!v.is_number_integer()) wrong_type(param, "an integer", v);
  if (v.is_number_unsigned() && v.get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
    invalid_param(param, "Invalid value for '{}': {} is not in [{}, {}].", param, v.get<uint64_t>(), lo, hi);
  }
  const auto x = v.get<int64_t>();
  if (x < lo || x > hi) invalid_param(param, "Invalid value for '{}': {} is not in [{}, {}].", param, x, lo, hi);
  return x;
}

bool get_bool(const json& v, const std::string& param) {
  if (!v.is_boolean()) wrong_type(param, "a boolean", v);
  return v.get<bool>();
}

const std::string& get_string(const json& v, const std::string& param) {
  if (!v.is_string()) wrong_type(param, "a string", v);
  return v.get_ref<const std::string&>();
}

void parse_messages(const nlohmann::ordered_json& v, const RequestLimits& limits, CompletionRequest& r) {
  if (!v.is_array()) invalid_param("messages", "Invalid type for 'messages': expected an array.");
  if (v.empty())
    invalid_param("messages", "Invalid 'messages': empty array. Expected an array with at least 1 message.");
  if (v.size() > limits.max_messages) {
    invalid_param("messages", "Too many messages: {} (the limit is {}).", v.size(), limits.max_messages);
  }
  for (size_t i = 0; i < v.size(); ++i) {
    ChatMessage plain;
    r.chat_messages.push_back(template_message(v[i], fmt::format("messages[{}]", i), plain));
    r.messages.push_back(std::move(plain));
  }
}

std::vector<std::string> parse_stop(const json& v, const RequestLimits& limits) {
  std::vector<std::string> out;
  if (v.is_string()) {
    out.push_back(v.get<std::string>());
  } else if (v.is_array()) {
    for (size_t i = 0; i < v.size(); ++i) out.push_back(get_string(v[i], fmt::format("stop[{}]", i)));
  } else {
    wrong_type("stop", "a string or an array of strings", v);
  }
  if (out.size() > limits.max_stop) {
    invalid_param("stop", "Invalid 'stop': at most {} stop sequences are allowed, got {}.", limits.max_stop,
                  out.size());
  }
  for (const auto& s : out) {
    if (s.size() > limits.max_stop_length) {
      invalid_param("stop", "Invalid 'stop': a stop sequence is longer than {} bytes.", limits.max_stop_length);
    }
  }
  std::erase_if(out, [](const std::string& s) { return s.empty(); });
  return out;
}

// Fields OpenAI defines that change nothing here (or only name the caller); accepted with any value.
const std::set<std::string, std::less<>> kIgnored = {
    "user", "store", "metadata", "service_tier", "prompt_cache_key", "safety_identifier"};

}  // namespace

CompletionRequest parse_completion_request(std::string_view body, Endpoint endpoint, const RequestLimits& limits) {
  json j = json::parse(body, nullptr, false);
  if (j.is_discarded()) {
    throw ApiError(400,
                   "We could not parse the JSON body of your request. (HINT: This likely means you aren't using your "
                   "HTTP library correctly. The OpenAI API expects a JSON payload, but what was sent was not valid "
                   "JSON.)",
                   "invalid_request_error", {}, "invalid_json");
  }
  if (!j.is_object()) wrong_type("body", "an object", j);
  CompletionRequest r;
  r.endpoint = endpoint;
  const bool chat = endpoint == Endpoint::Chat;
  bool have_input = false;
  bool want_logprobs = false;
  std::optional<int64_t> top_logprobs;
  // Chat bodies are read a second time keeping key order: schemas, tool arguments and template variables reach the
  // template (and grammars) in the order the client wrote them, as Python's dicts keep it.
  std::optional<nlohmann::ordered_json> ordered;
  if (chat) ordered = nlohmann::ordered_json::parse(body);
  for (const auto& [key, v] : j.items()) {
    if (v.is_null() && key != "messages" && key != "prompt") continue;  // null: the default
    if (key == "model") {
      r.model = get_string(v, key);
    } else if (chat && key == "messages") {
      parse_messages((*ordered)[key], limits, r);
      have_input = true;
    } else if (!chat && key == "prompt") {
      have_input = true;
      if (v.is_string()) {
        r.prompt = v.get<std::string>();
      } else if (v.is_array() && v.size() == 1 && v[0].is_string()) {
        r.prompt = v[0].get<std::string>();
      } else if (v.is_array() && !v.empty() && v[0].is_number_integer()) {
        r.prompt_is_tokens = true;
        for (size_t i = 0; i < v.size(); ++i) {
          r.prompt_tokens.push_back(static_cast<int32_t>(
              get_integer(v[i], fmt::format("prompt[{}]", i), 0, std::numeric_limits<int32_t>::max())));
        }
      } else if (v.is_array() && v.size() > 1) {
        invalid_param("prompt", "Only one prompt per request is supported; got {}.", v.size());
      } else {
        wrong_type("prompt", "a string, an array of one string or an array of token ids", v);
      }
    } else if (key == "stream") {
      r.stream = get_bool(v, key);
    } else if (key == "stream_options") {
      if (!v.is_object()) wrong_type(key, "an object", v);
      for (const auto& [k, x] : v.items()) {
        if (k == "include_usage") {
          r.include_usage = x.is_null() ? false : get_bool(x, "stream_options.include_usage");
        } else if (k != "include_obfuscation") {
          invalid_param("stream_options." + k, "Unrecognized request argument supplied: stream_options.{}", k);
        }
      }
    } else if (key == "temperature") {
      r.temperature = static_cast<float>(get_number(v, key, 0.0, 2.0));
    } else if (key == "top_p") {
      r.top_p = static_cast<float>(get_number(v, key, 0.0, 1.0));
    } else if (key == "min_p") {
      r.min_p = static_cast<float>(get_number(v, key, 0.0, 1.0));
    } else if (key == "top_k") {
      r.top_k = static_cast<int32_t>(get_integer(v, key, -1, std::numeric_limits<int32_t>::max()));
    } else if (key == "repeat_penalty") {
      r.repeat_penalty = static_cast<float>(get_number(v, key, 1e-3, 100.0));
    } else if (key == "frequency_penalty") {
      r.frequency_penalty = static_cast<float>(get_number(v, key, -2.0, 2.0));
    } else if (key == "presence_penalty") {
      r.presence_penalty = static_cast<float>(get_number(v, key, -2.0, 2.0));
    } else if (key == "seed") {
      r.seed = static_cast<uint64_t>(get_integer(v, key, 0, std::numeric_limits<int64_t>::max()));
    } else if (key == "max_tokens" || key == "max_completion_tokens") {
      r.max_tokens = static_cast<int32_t>(get_integer(v, key, 0, std::numeric_limits<int32_t>::max()));
    } else if (key == "stop") {
      r.stop = parse_stop(v, limits);
    } else if (key == "n" || (!chat && key == "best_of")) {
      if (get_integer(v, key, 1, 128) != 1) invalid_param(key, "Only {}=1 is supported.", key);
    } else if (key == "ignore_eos") {
      r.ignore_eos = get_bool(v, key);
    } else if (chat && key == "logprobs") {
      want_logprobs = get_bool(v, key);
    } else if (chat && key == "top_logprobs") {
      top_logprobs = get_integer(v, key, 0, limits.max_logprobs);
    } else if (!chat && key == "logprobs") {
      r.logprobs = static_cast<int32_t>(get_integer(v, key, 0, limits.max_logprobs));
    } else if (!chat && key == "echo") {
      r.echo = get_bool(v, key);
    } else if (!chat && key == "suffix") {
      if (!get_string(v, key).empty()) invalid_param(key, "'suffix' (fill in the middle) is not supported.");
    } else if (key == "logit_bias") {
      if (!v.is_object()) wrong_type(key, "an object", v);
      if (!v.empty()) invalid_param(key, "'logit_bias' is not supported.");
    } else if (chat && key == "tools") {
      parse_tools((*ordered)[key], r.tools);
    } else if (chat && key == "tool_choice") {
      parse_tool_choice((*ordered)[key], r.tools);
    } else if (chat && key == "parallel_tool_calls") {
      r.tools.parallel = get_bool(v, key);
    } else if (chat && key == "functions") {
      // The deprecated form of tools: clients have moved to `tools`, which says the same.
      if (!v.is_array()) wrong_type(key, "an array", v);
      if (!v.empty()) invalid_param(key, "'functions' is deprecated and not supported; use 'tools'.");
    } else if (chat && key == "function_call") {
      if (!(v.is_string() && (v == "none" || v == "auto"))) {
        invalid_param(key, "'function_call' is deprecated and not supported; use 'tool_choice'.");
      }
    } else if (chat && key == "chat_template_kwargs") {
      parse_template_kwargs((*ordered)[key], r.template_vars);
    } else if (chat && key == "reasoning_effort") {
      parse_reasoning_effort((*ordered)[key], r.template_vars);
    } else if (key == "response_format" || (!chat && (key == "json_schema" || key == "grammar"))) {
      // Parsed again keeping key order: a schema's properties are generated in the order it declares them.
      if (!ordered) ordered = nlohmann::ordered_json::parse(body);
      const auto& field = (*ordered)[key];
      OutputGrammar g = key == "response_format" ? parse_response_format(field)
                        : key == "json_schema"   ? parse_json_schema_field(field)
                                                 : parse_grammar_field(field);
      if (!g.text.empty() && !r.grammar.text.empty()) {
        invalid_param(key, "Only one of 'response_format', 'json_schema' and 'grammar' may constrain the output.");
      }
      if (!g.text.empty()) r.grammar = std::move(g);
    } else if (kIgnored.contains(key)) {
      continue;
    } else {
      invalid_param(key, "Unrecognized request argument supplied: {}", key);
    }
  }
  if (!have_input) {
    const std::string missing = chat ? "messages" : "prompt";
    invalid_param(missing, "Missing required parameter: '{}'.", missing);
  }
  if (chat) {
    check_tools(r.tools);
    if (r.tools.forced() && !r.grammar.text.empty()) {
      invalid_param("tool_choice", "A required or named 'tool_choice' cannot be combined with 'response_format'.");
    }
    if (top_logprobs && !want_logprobs) {
      invalid_param("top_logprobs", "Invalid value for 'top_logprobs': 'logprobs' must be true to use it.");
    }
    if (want_logprobs) r.logprobs = static_cast<int32_t>(top_logprobs.value_or(0));
  }
  if (r.echo && r.logprobs >= 0) invalid_param("echo", "'echo' together with 'logprobs' is not supported.");
  if (r.include_usage && !r.stream) {
    invalid_param("stream_options", "The 'stream_options' parameter is only allowed when 'stream' is enabled.");
  }
  return r;
}

SamplerParams merge_sampler(const CompletionRequest& r, const SamplerParams& defaults) {
  SamplerParams p = defaults;
  if (r.temperature) p.temperature = *r.temperature;
  if (r.top_p) {
    // OpenAI allows top_p = 0: only the most likely token survives, which top_k = 1 says exactly.
    if (*r.top_p > 0) {
      p.top_p = *r.top_p;
    } else {
      p.top_p = 1.0f;
      p.top_k = 1;
    }
  }
  if (r.min_p) p.min_p = *r.min_p;
  if (r.top_k) p.top_k = *r.top_k;
  if (r.repeat_penalty) p.repeat_penalty = *r.repeat_penalty;
  if (r.frequency_penalty) p.frequency_penalty = *r.frequency_penalty;
  if (r.presence_penalty) p.presence_penalty = *r.presence_penalty;
  if ((r.frequency_penalty && *r.frequency_penalty != 0) || (r.presence_penalty && *r.presence_penalty != 0)) {
    p.repeat_last_n = -1;
  }
  if (r.seed) p.seed = *r.seed;
  try {
    p.validate();
  } catch (const Error& e) {
    const std::string msg = e.what();
    throw ApiError(400, msg, "invalid_request_error", msg.substr(0, msg.find(' ')));
  }
  return p;
}

std::string_view finish_reason_text(FinishReason r) {
  switch (r) {
    case FinishReason::EndOfGeneration:
    case FinishReason::StopString:
      return "stop";
    case FinishReason::Length:
    case FinishReason::ContextFull:
      return "length";
    case FinishReason::Cancelled:
      return "cancelled";
    case FinishReason::Error:
      return "error";
  }
  return "stop";
}

json usage_json(const Usage& u) {
  return {{"prompt_tokens", u.prompt_tokens},
          {"completion_tokens", u.completion_tokens},
          {"total_tokens", u.prompt_tokens + u.completion_tokens}};
}

namespace {

json bytes_of(const std::string& s) {
  json b = json::array();
  for (unsigned char c : s) b.push_back(static_cast<int>(c));
  return b;
}

// -inf has no JSON spelling; OpenAI reports -9999.0 for tokens with no probability.
double finite_logprob(float lp) { return std::isfinite(lp) ? static_cast<double>(lp) : -9999.0; }

json finish_or_null(std::string_view finish_reason) {
  return finish_reason.empty() ? json(nullptr) : json(finish_reason);
}

}  // namespace

json chat_logprobs_json(const std::vector<TokenLogprobs>& tokens) {
  json content = json::array();
  for (const auto& t : tokens) {
    json top = json::array();
    for (const auto& [piece, lp] : t.top) {
      top.push_back({{"token", piece}, {"logprob", finite_logprob(lp)}, {"bytes", bytes_of(piece)}});
    }
    content.push_back({{"token", t.token},
                       {"logprob", finite_logprob(t.logprob)},
                       {"bytes", bytes_of(t.token)},
                       {"top_logprobs", top}});
  }
  return {{"content", content}, {"refusal", nullptr}};
}

json completion_logprobs_json(const std::vector<TokenLogprobs>& tokens, size_t offset) {
  json toks = json::array(), lps = json::array(), tops = json::array(), offsets = json::array();
  for (const auto& t : tokens) {
    toks.push_back(t.token);
    lps.push_back(finite_logprob(t.logprob));
    json top = json::object();
    for (const auto& [piece, lp] : t.top) top[piece] = finite_logprob(lp);
    tops.push_back(top);
    offsets.push_back(offset);
    offset += t.token.size();
  }
  return {{"tokens", toks}, {"token_logprobs", lps}, {"top_logprobs", tops}, {"text_offset", offsets}};
}

json chat_response_json(const ResponseMeta& m, std::string_view text, std::string_view finish_reason,
                        const Usage& usage, const json& logprobs) {
  return chat_message_response_json(m, json{{"role", "assistant"}, {"content", text}, {"refusal", nullptr}},
                                    finish_reason, usage, logprobs);
}

json chat_message_response_json(const ResponseMeta& m, const json& message, std::string_view finish_reason,
                                const Usage& usage, const json& logprobs) {
  json choice = {{"index", 0}, {"message", message}, {"logprobs", logprobs}, {"finish_reason", finish_reason}};
  return {{"id", m.id},
          {"object", "chat.completion"},
          {"created", m.created},
          {"model", m.model},
          {"system_fingerprint", "tessera"},
          {"choices", json::array({choice})},
          {"usage", usage_json(usage)}};
}

json completion_response_json(const ResponseMeta& m, std::string_view text, std::string_view finish_reason,
                              const Usage& usage, const json& logprobs) {
  json choice = {{"index", 0}, {"text", text}, {"logprobs", logprobs}, {"finish_reason", finish_reason}};
  return {{"id", m.id},
          {"object", "text_completion"},
          {"created", m.created},
          {"model", m.model},
          {"system_fingerprint", "tessera"},
          {"choices", json::array({choice})},
          {"usage", usage_json(usage)}};
}

json chat_chunk_json(const ResponseMeta& m, std::string_view role, std::string_view text,
                     std::string_view finish_reason, const json& logprobs) {
  json delta = json::object();
  if (!role.empty()) delta["role"] = role;
  if (!text.empty() || !role.empty()) delta["content"] = text;
  return chat_delta_chunk_json(m, delta, finish_reason, logprobs);
}

json chat_delta_chunk_json(const ResponseMeta& m, const json& delta, std::string_view finish_reason,
                           const json& logprobs) {
  json choice = {
      {"index", 0}, {"delta", delta}, {"logprobs", logprobs}, {"finish_reason", finish_or_null(finish_reason)}};
  return {{"id", m.id},       {"object", "chat.completion.chunk"}, {"created", m.created},
          {"model", m.model}, {"system_fingerprint", "tessera"},   {"choices", json::array({choice})}};
}

json completion_chunk_json(const ResponseMeta& m, std::string_view text, std::string_view finish_reason,
                           const json& logprobs) {
  json choice = {
      {"index", 0}, {"text", text}, {"logprobs", logprobs}, {"finish_reason", finish_or_null(finish_reason)}};
  return {{"id", m.id},       {"object", "text_completion"},     {"created", m.created},
          {"model", m.model}, {"system_fingerprint", "tessera"}, {"choices", json::array({choice})}};
}

json usage_chunk_json(const ResponseMeta& m, Endpoint endpoint, const Usage& usage) {
  return {{"id", m.id},
          {"object", endpoint == Endpoint::Chat ? "chat.completion.chunk" : "text_completion"},
          {"created", m.created},
          {"model", m.model},
          {"system_fingerprint", "tessera"},
          {"choices", json::array()},
          {"usage", usage_json(usage)}};
}

}  // namespace tessera::server
