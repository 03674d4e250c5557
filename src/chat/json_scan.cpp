// The scanner of json_scan.h: one pass, an explicit bracket stack (bounded, so deep input cannot exhaust it).
#include "chat/json_scan.h"

#include <nlohmann/json.hpp>
#include <vector>

namespace tessera::chat {

namespace {

constexpr size_t kMaxDepth = 256;

bool is_ws(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

bool is_scalar_char(char c) {
  return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '-' || c == '+' || c == '.';
}

}  // namespace

size_t skip_ws(std::string_view text, size_t pos) {
  while (pos < text.size() && is_ws(text[pos])) ++pos;
  return pos;
}

ScanResult scan_json_string(std::string_view text, size_t pos, std::string* decoded) {
  if (pos >= text.size()) return {Scan::Incomplete, pos};
  if (text[pos] != '"') return {Scan::Invalid, pos};
  for (size_t i = pos + 1; i < text.size(); ++i) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (c == '\\') {
      ++i;  // the escaped byte; \uXXXX digits are ordinary bytes here
      continue;
    }
    if (c < 0x20) return {Scan::Invalid, i};
    if (c == '"') {
      if (decoded) {
        const auto v = nlohmann::json::parse(text.substr(pos, i + 1 - pos), nullptr, false);
        if (!v.is_string()) return {Scan::Invalid, i};
        *decoded = v.get<std::string>();
      }
      return {Scan::Complete, i + 1};
    }
  }
  return {Scan::Incomplete, text.size()};
}

ScanResult scan_json_value(std::string_view text, size_t pos) {
  if (pos >= text.size()) return {Scan::Incomplete, pos};
  const char first = text[pos];
  if (first == '"') return scan_json_string(text, pos);
  if (first != '{' && first != '[') {
    if (!is_scalar_char(first)) return {Scan::Invalid, pos};
    size_t i = pos;
    while (i < text.size() && is_scalar_char(text[i])) ++i;
    return {i == text.size() ? Scan::Incomplete : Scan::Complete, i};
  }
  std::vector<char> stack;
  for (size_t i = pos; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '"') {
      const auto s = scan_json_string(text, i);
      if (s.status != Scan::Complete) return s;
      i = s.end - 1;
    } else if (c == '{' || c == '[') {
      if (stack.size() >= kMaxDepth) return {Scan::Invalid, i};
      stack.push_back(c == '{' ? '}' : ']');
    } else if (c == '}' || c == ']') {
      if (stack.empty() || stack.back() != c) return {Scan::Invalid, i};
      stack.pop_back();
      if (stack.empty()) return {Scan::Complete, i + 1};
    } else if (!is_ws(c) && c != ',' && c != ':' && !is_scalar_char(c)) {
      return {Scan::Invalid, i};
    }
  }
  return {Scan::Incomplete, text.size()};
}

size_t partial_marker_suffix(std::string_view text, std::string_view marker) {
  const size_t longest = std::min(text.size(), marker.size() - 1);
  for (size_t n = longest; n > 0; --n) {
    if (text.substr(text.size() - n) == marker.substr(0, n)) return n;
  }
  return 0;
}

}  // namespace tessera::chat
