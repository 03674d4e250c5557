// Gemma 4 writes call arguments in its own notation (the chat template's format_argument macro): bare keys,
// strings between <|"|> markers, JSON-like numbers, booleans, lists and objects. This turns it into JSON.
#include <nlohmann/json.hpp>

#include "chat/tool_blocks.h"

namespace tessera::chat {

std::optional<std::string> gemma_arguments_to_json(std::string_view text) {
  constexpr std::string_view quote = "<|\"|>";
  std::string out;
  std::vector<char> stack;
  bool want_key = false;
  size_t i = 0;
  auto is_word = [](char c) {
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == '-' ||
           c == '+' || c == '.';
  };
  while (i < text.size()) {
    const char c = text[i];
    if (c == ' ' || c == '\n' || c == '\t' || c == '\r') {
      ++i;
    } else if (text.substr(i).starts_with(quote)) {
      const size_t close = text.find(quote, i + quote.size());
      if (close == std::string_view::npos) return std::nullopt;
      out += nlohmann::json(std::string(text.substr(i + quote.size(), close - i - quote.size())))
                 .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
      i = close + quote.size();
      if (want_key) {
        if (i >= text.size() || text[i] != ':') return std::nullopt;
        out += ':';
        ++i;
        want_key = false;
      }
    } else if (want_key) {
      if (c == '}') {  // an empty object
        want_key = false;
        continue;
      }
      const size_t colon = text.find(':', i);
      if (colon == std::string_view::npos || colon == i) return std::nullopt;
      out += nlohmann::json(std::string(text.substr(i, colon - i)))
                 .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) +
             ":";
      i = colon + 1;
      want_key = false;
    } else if (c == '{' || c == '[') {
      if (stack.size() >= 256) return std::nullopt;
      stack.push_back(c);
      out += c;
      want_key = c == '{';
      ++i;
    } else if (c == '}' || c == ']') {
      if (stack.empty() || stack.back() != (c == '}' ? '{' : '[')) return std::nullopt;
      stack.pop_back();
      out += c;
      ++i;
    } else if (c == ',') {
      out += c;
      want_key = !stack.empty() && stack.back() == '{';
      ++i;
    } else if (is_word(c)) {
      while (i < text.size() && is_word(text[i])) out += text[i++];
    } else {
      return std::nullopt;
    }
  }
  const auto parsed = nlohmann::json::parse(out, nullptr, false);
  if (!parsed.is_object()) return std::nullopt;
  return parsed.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace tessera::chat
