// The XML-style bodies some families put inside <tool_call>..</tool_call> instead of JSON: Qwen3-Coder and Qwen3.5
// (<function=NAME><parameter=KEY>\nVALUE\n</parameter></function>) and GLM 4.5/4.6 (NAME\n<arg_key>KEY</arg_key>
// <arg_value>VALUE</arg_value>). Values are text; one that reads as a JSON number, boolean, null, array or object is
// taken as that (the output carries no types), unless the offered schema says the parameter is text.
#include <nlohmann/json.hpp>
#include <set>

#include "chat/tool_blocks.h"

namespace tessera::chat {

namespace {

constexpr size_t npos = std::string_view::npos;
constexpr std::string_view kClose = "</tool_call>";

bool is_name_char(char c) {
  return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == '-' || c == '.';
}

// Qwen's template puts the value on lines of its own (strip: one line break each side is markup); GLM's does not.
nlohmann::ordered_json value_of(std::string_view raw, bool strip, bool text) {
  if (strip && raw.starts_with('\n')) raw.remove_prefix(1);
  if (strip && raw.ends_with('\n')) raw.remove_suffix(1);
  if (text) return std::string(raw);
  if (strip && (raw == "True" || raw == "False")) return raw == "True";  // Qwen's template writes Python's bools
  auto v = nlohmann::ordered_json::parse(raw, nullptr, false);
  if (!v.is_discarded() && !v.is_string()) return v;
  return std::string(raw);
}

struct Markup {
  std::string_view key_open, key_close, value_open, value_close;
  bool strip;
};

// `open` KEY `mid` VALUE `close` pairs of the call body; false when the body is something else.
bool read_pairs(std::string_view body, const Markup& m, const std::set<std::string>* text_keys,
                nlohmann::ordered_json& args) {
  size_t i = skip_ws(body, 0);
  while (i < body.size()) {
    if (!body.substr(i).starts_with(m.key_open)) return false;
    i += m.key_open.size();
    const size_t key_end = body.find(m.key_close, i);
    if (key_end == npos) return false;
    const std::string key(body.substr(i, key_end - i));
    i = key_end + m.key_close.size();
    if (!m.value_open.empty()) {
      i = skip_ws(body, i);
      if (!body.substr(i).starts_with(m.value_open)) return false;
      i += m.value_open.size();
    }
    const size_t value_end = body.find(m.value_close, i);
    if (value_end == npos || key.empty()) return false;
    args[key] = value_of(body.substr(i, value_end - i), m.strip, text_keys && text_keys->contains(key));
    i = skip_ws(body, value_end + m.value_close.size());
  }
  return true;
}

}  // namespace

CallBlock read_xml_call(std::string_view text, size_t i, bool final, const TextArguments* text_args) {
  CallBlock b;
  const size_t close = text.find(kClose, i);
  const std::string_view rest = text.substr(i);
  constexpr std::string_view fn = "<function=";
  const bool qwen = rest.starts_with(fn);
  if (!qwen) {
    if (fn.starts_with(rest)) return b.status = final ? Scan::Invalid : Scan::Incomplete, b;
    // GLM: the name first, alone on its line.
    size_t j = i;
    while (j < text.size() && is_name_char(text[j])) ++j;
    if (j == i) return b;
    if (j < text.size() && text[j] != '\n' && text[j] != '<') return b;
  }
  if (close == npos) return b.status = final ? Scan::Invalid : Scan::Incomplete, b;
  std::string_view body = text.substr(i, close - i);
  const auto text_keys = [&](const std::string& name) -> const std::set<std::string>* {
    if (!text_args) return nullptr;
    const auto it = text_args->find(name);
    return it == text_args->end() ? nullptr : &it->second;
  };
  ToolCall call;
  nlohmann::ordered_json args = nlohmann::ordered_json::object();
  if (qwen) {
    body.remove_prefix(fn.size());
    const size_t gt = body.find('>');
    if (gt == npos) return b;
    call.name = std::string(body.substr(0, gt));
    body.remove_prefix(gt + 1);
    size_t end = body.rfind("</function>");
    if (end == npos) return b;
    for (size_t k = end + 11; k < body.size(); ++k) {
      if (body[k] != ' ' && body[k] != '\n' && body[k] != '\t' && body[k] != '\r') return b;
    }
    if (!read_pairs(body.substr(0, end), {"<parameter=", ">", "", "</parameter>", true}, text_keys(call.name), args))
      return b;
  } else {
    size_t j = 0;
    while (j < body.size() && is_name_char(body[j])) ++j;
    call.name = std::string(body.substr(0, j));
    if (!read_pairs(body.substr(j), {"<arg_key>", "</arg_key>", "<arg_value>", "</arg_value>", false},
                    text_keys(call.name), args))
      return b;
  }
  for (char c : call.name) {
    if (!is_name_char(c)) return b;
  }
  if (call.name.empty()) return b;
  call.arguments = args.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
  b.calls.push_back(std::move(call));
  return b.status = Scan::Complete, b.end = close + kClose.size(), b;
}

}  // namespace tessera::chat
