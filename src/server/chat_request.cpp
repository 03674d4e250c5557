// Tools, tool_choice, template messages and template variables of a chat request (chat_request.h).
#include "server/chat_request.h"

#include <set>

#include "server/openai_api.h"

namespace tessera::server {

using Json = nlohmann::ordered_json;

namespace {

const Json& field(const Json& obj, const char* key) {
  static const Json null_value;
  const auto it = obj.find(key);
  return it == obj.end() ? null_value : *it;
}

const std::string& string_field(const Json& obj, const char* key, const std::string& param, bool required) {
  static const std::string empty;
  const Json& v = field(obj, key);
  if (v.is_null()) {
    if (required) invalid_param(param + "." + key, "Missing required parameter: '{}.{}'.", param, key);
    return empty;
  }
  if (!v.is_string()) invalid_param(param + "." + key, "Invalid type for '{}.{}': expected a string.", param, key);
  return v.get_ref<const std::string&>();
}

void only_keys(const Json& obj, const std::string& param, std::initializer_list<std::string_view> keys) {
  for (const auto& [key, value] : obj.items()) {
    bool known = false;
    for (auto k : keys) known = known || k == key;
    if (!known) invalid_param(param + "." + key, "Unrecognized parameter: '{}.{}'.", param, key);
  }
}

// OpenAI's rule for function names: letters, digits, '_' and '-', at most 64.
void check_function_name(const std::string& name, const std::string& param) {
  bool ok = !name.empty() && name.size() <= 64;
  for (char c : name) ok = ok && (std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-');
  if (!ok) {
    invalid_param(param, "Invalid '{}': '{}' must be 1 to 64 letters, digits, underscores or dashes.", param, name);
  }
}

std::string content_text(const Json& v, const std::string& param) {
  if (v.is_string()) return v.get<std::string>();
  if (!v.is_array()) {
    invalid_param(param, "Invalid type for '{}': expected a string or an array of content parts.", param);
  }
  std::string out;
  for (size_t i = 0; i < v.size(); ++i) {
    const auto p = fmt::format("{}[{}]", param, i);
    const Json& part = v[i];
    if (!part.is_object()) invalid_param(p, "Invalid type for '{}': expected an object.", p);
    const std::string& type = string_field(part, "type", p, true);
    if (type != "text") {
      invalid_param(p + ".type", "Content parts of type '{}' are not supported: this model reads text only.", type);
    }
    out += string_field(part, "text", p, true);
  }
  return out;
}

Json template_tool_calls(const Json& v, const std::string& param) {
  if (!v.is_array()) invalid_param(param, "Invalid type for '{}': expected an array.", param);
  Json out = Json::array();
  for (size_t i = 0; i < v.size(); ++i) {
    const auto p = fmt::format("{}[{}]", param, i);
    const Json& call = v[i];
    if (!call.is_object()) invalid_param(p, "Invalid type for '{}': expected an object.", p);
    only_keys(call, p, {"id", "type", "function"});
    const std::string& id = string_field(call, "id", p, true);
    const std::string& type = string_field(call, "type", p, false);
    if (!type.empty() && type != "function") {
      invalid_param(p + ".type", "Invalid value for '{}.type': '{}'. Supported: 'function'.", p, type);
    }
    const Json& fn = field(call, "function");
    if (!fn.is_object()) invalid_param(p + ".function", "Missing required parameter: '{}.function'.", p);
    only_keys(fn, p + ".function", {"name", "arguments"});
    const std::string& name = string_field(fn, "name", p + ".function", true);
    const Json& args = field(fn, "arguments");
    Json parsed;
    if (args.is_string()) {
      parsed = Json::parse(args.get<std::string>(), nullptr, false);
      if (!parsed.is_object()) {
        invalid_param(p + ".function.arguments", "Invalid '{}.function.arguments': not a JSON object.", p);
      }
    } else if (args.is_object()) {
      parsed = args;
    } else {
      invalid_param(p + ".function.arguments", "Missing required parameter: '{}.function.arguments'.", p);
    }
    out.push_back({{"id", id}, {"type", "function"}, {"function", {{"name", name}, {"arguments", parsed}}}});
  }
  return out;
}

}  // namespace

void parse_tools(const Json& v, ChatTools& out) {
  if (!v.is_array()) invalid_param("tools", "Invalid type for 'tools': expected an array.");
  std::set<std::string, std::less<>> names;
  for (size_t i = 0; i < v.size(); ++i) {
    const auto p = fmt::format("tools[{}]", i);
    const Json& tool = v[i];
    if (!tool.is_object()) invalid_param(p, "Invalid type for '{}': expected an object.", p);
    only_keys(tool, p, {"type", "function"});
    const std::string& type = string_field(tool, "type", p, true);
    if (type != "function") {
      invalid_param(p + ".type", "Invalid value for '{}.type': '{}'. Supported: 'function'.", p, type);
    }
    const Json& fn = field(tool, "function");
    if (!fn.is_object()) invalid_param(p + ".function", "Missing required parameter: '{}.function'.", p);
    only_keys(fn, p + ".function", {"name", "description", "parameters", "strict"});
    FunctionTool f;
    f.name = string_field(fn, "name", p + ".function", true);
    check_function_name(f.name, p + ".function.name");
    if (!names.insert(f.name).second) {
      invalid_param(p + ".function.name", "Invalid '{}.function.name': '{}' is declared twice.", p, f.name);
    }
    string_field(fn, "description", p + ".function", false);
    const Json& params = field(fn, "parameters");
    if (!params.is_null() && !params.is_object()) {
      invalid_param(p + ".function.parameters", "Invalid type for '{}.function.parameters': expected an object.", p);
    }
    const Json& strict = field(fn, "strict");
    if (!strict.is_null() && !strict.is_boolean()) {
      invalid_param(p + ".function.strict", "Invalid type for '{}.function.strict': expected a boolean.", p);
    }
    f.parameters = params.is_null() ? Json::object() : params;
    out.functions.push_back(std::move(f));
  }
  out.tools = v;
}

void parse_tool_choice(const Json& v, ChatTools& out) {
  if (v.is_string()) {
    const auto& s = v.get_ref<const std::string&>();
    if (s == "auto") {
      out.choice = ToolChoice::Auto;
    } else if (s == "none") {
      out.choice = ToolChoice::None;
    } else if (s == "required") {
      out.choice = ToolChoice::Required;
    } else {
      invalid_param("tool_choice",
                    "Invalid value for 'tool_choice': '{}'. Supported: 'none', 'auto', 'required' or "
                    "a named function.",
                    s);
    }
    return;
  }
  if (!v.is_object()) {
    invalid_param("tool_choice", "Invalid type for 'tool_choice': expected a string or an object.");
  }
  only_keys(v, "tool_choice", {"type", "function"});
  if (string_field(v, "type", "tool_choice", true) != "function") {
    invalid_param("tool_choice.type", "Invalid value for 'tool_choice.type': only 'function' is supported.");
  }
  const Json& fn = field(v, "function");
  if (!fn.is_object()) invalid_param("tool_choice.function", "Missing required parameter: 'tool_choice.function'.");
  only_keys(fn, "tool_choice.function", {"name"});
  out.named = string_field(fn, "name", "tool_choice.function", true);
  out.choice = ToolChoice::Named;
}

void check_tools(const ChatTools& t) {
  if (t.forced() && t.functions.empty()) {
    invalid_param("tool_choice", "Invalid value for 'tool_choice': it requires 'tools' to be given.");
  }
  if (t.choice == ToolChoice::Named) {
    bool found = false;
    for (const auto& f : t.functions) found = found || f.name == t.named;
    if (!found) {
      invalid_param("tool_choice", "Invalid value for 'tool_choice': no function named '{}' in 'tools'.", t.named);
    }
  }
}

Json template_message(const Json& m, const std::string& p, ChatMessage& plain) {
  if (!m.is_object()) invalid_param(p, "Invalid type for '{}': expected an object.", p);
  std::string role = string_field(m, "role", p, true);
  if (role == "developer") role = "system";  // OpenAI's newer name for the system role
  if (role != "system" && role != "user" && role != "assistant" && role != "tool") {
    invalid_param(p + ".role",
                  "Invalid value for '{}.role': '{}'. Supported roles: system, developer, user, assistant, tool.", p,
                  role);
  }
  const bool assistant = role == "assistant";
  for (const auto& [key, value] : m.items()) {
    if (key == "role" || key == "content" || key == "name") continue;
    if (assistant && (key == "tool_calls" || key == "reasoning_content")) continue;
    if (role == "tool" && key == "tool_call_id") continue;
    if ((key == "function_call" || key == "refusal" || key == "tool_calls") && (value.is_null() || value.empty())) {
      continue;
    }
    invalid_param(p + "." + key, "Unsupported parameter: '{}.{}'.", p, key);
  }
  Json out = {{"role", role}};
  const Json& content = field(m, "content");
  const Json& calls = field(m, "tool_calls");
  if (!calls.is_null() && !calls.is_array()) {
    invalid_param(p + ".tool_calls", "Invalid type for '{}.tool_calls': expected an array.", p);
  }
  const bool has_calls = assistant && !calls.is_null() && !calls.empty();
  if (content.is_null()) {
    if (!assistant) invalid_param(p + ".content", "Missing required parameter: '{}.content'.", p);
    out["content"] = "";  // as the corpus passes a tool-calling turn's content: templates test it as a string
  } else {
    plain.content = content_text(content, p + ".content");
    out["content"] = plain.content;
  }
  plain.role = role;
  if (const auto& name = string_field(m, "name", p, false); !name.empty()) out["name"] = name;
  if (assistant) {
    if (const auto& r = string_field(m, "reasoning_content", p, false); !r.empty()) out["reasoning_content"] = r;
    if (has_calls) out["tool_calls"] = template_tool_calls(calls, p + ".tool_calls");
  }
  if (role == "tool") out["tool_call_id"] = string_field(m, "tool_call_id", p, true);
  return out;
}

void parse_template_kwargs(const Json& v, Json& vars) {
  if (!v.is_object())
    invalid_param("chat_template_kwargs", "Invalid type for 'chat_template_kwargs': expected an object.");
  static const std::set<std::string, std::less<>> reserved = {"messages", "tools", "add_generation_prompt"};
  for (const auto& [key, value] : v.items()) {
    if (reserved.contains(key)) {
      invalid_param("chat_template_kwargs." + key, "'chat_template_kwargs.{}' is set by the server.", key);
    }
    vars[key] = value;
  }
}

void parse_reasoning_effort(const Json& v, Json& vars) {
  static const std::set<std::string, std::less<>> levels = {"none", "minimal", "low", "medium", "high", "xhigh"};
  if (!v.is_string() || !levels.contains(v.get<std::string>())) {
    invalid_param("reasoning_effort",
                  "Invalid value for 'reasoning_effort': expected one of 'none', 'minimal', 'low', 'medium', 'high', "
                  "'xhigh'.");
  }
  vars["reasoning_effort"] = v;
}

}  // namespace tessera::server
