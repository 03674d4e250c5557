// Values to JSON: Python json.dumps layout (for the tojson filter) and nlohmann::json; UTF-8 helpers.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "jinja/error.h"
#include "jinja/value.h"

namespace tessera::jinja {

std::u32string utf8_decode(std::string_view s) {
  std::u32string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    const auto c = static_cast<unsigned char>(s[i]);
    int len = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
    if (len == 0 || i + len > s.size()) {
      out += c;
      ++i;
      continue;
    }
    char32_t cp = len == 1 ? c : len == 2 ? (c & 0x1f) : len == 3 ? (c & 0x0f) : (c & 0x07);
    bool ok = true;
    for (int k = 1; k < len; ++k) {
      const auto cc = static_cast<unsigned char>(s[i + k]);
      if ((cc & 0xc0) != 0x80) ok = false;
      cp = (cp << 6) | (cc & 0x3f);
    }
    if (!ok) {
      out += c;
      ++i;
      continue;
    }
    out += cp;
    i += len;
  }
  return out;
}

void append_utf8(std::string& out, char32_t c) {
  if (c < 0x80) {
    out += static_cast<char>(c);
  } else if (c < 0x800) {
    out += static_cast<char>(0xc0 | (c >> 6));
    out += static_cast<char>(0x80 | (c & 0x3f));
  } else if (c < 0x10000) {
    out += static_cast<char>(0xe0 | (c >> 12));
    out += static_cast<char>(0x80 | ((c >> 6) & 0x3f));
    out += static_cast<char>(0x80 | (c & 0x3f));
  } else {
    out += static_cast<char>(0xf0 | (c >> 18));
    out += static_cast<char>(0x80 | ((c >> 12) & 0x3f));
    out += static_cast<char>(0x80 | ((c >> 6) & 0x3f));
    out += static_cast<char>(0x80 | (c & 0x3f));
  }
}

std::string utf8_encode(std::u32string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char32_t c : s) append_utf8(out, c);
  return out;
}

namespace {

void json_string(std::string& out, const std::string& s, bool ensure_ascii) {
  out += '"';
  for (char32_t c : utf8_decode(s)) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      case '\b':
        out += "\\b";
        break;
      case '\f':
        out += "\\f";
        break;
      default:
        if (c < 0x20 || (ensure_ascii && c >= 0x7f)) {
          if (c >= 0x10000) {
            const char32_t v = c - 0x10000;
            out += fmt::format("\\u{:04x}\\u{:04x}", static_cast<unsigned>(0xd800 + (v >> 10)),
                               static_cast<unsigned>(0xdc00 + (v & 0x3ff)));
          } else {
            out += fmt::format("\\u{:04x}", static_cast<unsigned>(c));
          }
        } else {
          append_utf8(out, c);
        }
    }
  }
  out += '"';
}

struct JsonWriter {
  bool ensure_ascii;
  int indent;
  std::string item_sep;
  std::string key_sep;
  bool sort_keys;
  std::string out;

  void newline(int level) {
    out += '\n';
    out.append(static_cast<size_t>(indent) * static_cast<size_t>(level), ' ');
  }

  void write(const Value& v, int level) {
    if (level > 512) throw JinjaError(ErrorKind::Limit, "tojson: nesting deeper than 512");
    switch (v.kind()) {
      case Kind::None:
        out += "null";
        return;
      case Kind::Bool:
        out += v.as_bool() ? "true" : "false";
        return;
      case Kind::Int:
        out += std::to_string(v.as_int());
        return;
      case Kind::Float: {
        const double f = v.as_double();
        out += std::isnan(f) ? "NaN" : std::isinf(f) ? (f > 0 ? "Infinity" : "-Infinity") : float_repr(f);
        return;
      }
      case Kind::String:
        json_string(out, v.str(), ensure_ascii);
        return;
      case Kind::List:
      case Kind::Tuple: {
        const auto& items = v.items();
        if (items.empty()) {
          out += "[]";
          return;
        }
        out += '[';
        for (size_t i = 0; i < items.size(); ++i) {
          if (i) out += item_sep;
          if (indent >= 0) newline(level + 1);
          write(items[i], level + 1);
        }
        if (indent >= 0) newline(level);
        out += ']';
        return;
      }
      case Kind::Dict: {
        std::vector<const std::pair<std::string, Value>*> entries;
        for (const auto& e : v.dict().items) entries.push_back(&e);
        if (sort_keys)
          std::stable_sort(entries.begin(), entries.end(), [](auto* a, auto* b) { return a->first < b->first; });
        if (entries.empty()) {
          out += "{}";
          return;
        }
        out += '{';
        for (size_t i = 0; i < entries.size(); ++i) {
          if (i) out += item_sep;
          if (indent >= 0) newline(level + 1);
          const Value key = key_value(entries[i]->first);
          // json.dumps writes non-string keys as their JSON text in quotes (1 -> "1", None -> "null").
          json_string(out,
                      key.is_string()      ? key.str()
                      : key.is_none()      ? "null"
                      : key.is(Kind::Bool) ? (key.as_bool() ? "true" : "false")
                                           : key.repr(),
                      ensure_ascii);
          out += key_sep;
          write(entries[i]->second, level + 1);
        }
        if (indent >= 0) newline(level);
        out += '}';
        return;
      }
      default:
        type_error("Object of type " + (v.is_undefined() ? std::string("Undefined") : v.type_name()) +
                   " is not JSON serializable");
    }
  }
};

}  // namespace

std::string to_json(const Value& v, bool ensure_ascii, int indent, const std::string& item_sep,
                    const std::string& key_sep, bool sort_keys) {
  JsonWriter w{ensure_ascii, indent, item_sep, key_sep, sort_keys, {}};
  w.write(v, 0);
  return std::move(w.out);
}

nlohmann::ordered_json value_to_json(const Value& v) {
  switch (v.kind()) {
    case Kind::Bool:
      return v.as_bool();
    case Kind::Int:
      return v.as_int();
    case Kind::Float:
      return v.as_double();
    case Kind::String:
      return v.str();
    case Kind::List:
    case Kind::Tuple:
    case Kind::Generator: {
      nlohmann::ordered_json a = nlohmann::ordered_json::array();
      for (const auto& e : v.items()) a.push_back(value_to_json(e));
      return a;
    }
    case Kind::Dict:
    case Kind::Namespace: {
      nlohmann::ordered_json o = nlohmann::ordered_json::object();
      for (const auto& [k, e] : v.dict().items) o[key_value(k).to_str()] = value_to_json(e);
      return o;
    }
    default:
      return nullptr;
  }
}

}  // namespace tessera::jinja
