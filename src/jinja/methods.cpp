// Python semantics of attribute and item access, slicing, iteration, `in` and len(), and the str/dict/list
// methods templates call (strip, split, startswith, items, get, ...); mutating methods are refused as in
// Jinja2's ImmutableSandboxedEnvironment.
#include <fmt/format.h>

#include <algorithm>

#include "jinja/error.h"
#include "jinja/renderer.h"

namespace tessera::jinja {

namespace {

bool is_ws(char32_t c) {
  return c == ' ' || (c >= 0x09 && c <= 0x0d) || c == 0x1c || c == 0x1d || c == 0x1e || c == 0x1f || c == 0x85 ||
         c == 0xa0 || c == 0x1680 || (c >= 0x2000 && c <= 0x200a) || c == 0x2028 || c == 0x2029 || c == 0x202f ||
         c == 0x205f || c == 0x3000;
}

const Value& arg(const CallArgs& a, size_t i, std::string_view name, const std::string& method) {
  const Value* v = a.get(name, i);
  if (!v) type_error(method + "() missing required argument '" + std::string(name) + "'");
  return *v;
}

std::string need_str(const Value& v, const std::string& method) {
  if (!v.is_string()) type_error(method + "() argument must be str, not " + v.type_name());
  return v.str();
}

Value split(const std::string& s, const Value* sep, const Value* maxsplit_v) {
  int64_t maxsplit = maxsplit_v && !maxsplit_v->is_none() ? maxsplit_v->as_int() : -1;
  ValueList out;
  if (!sep || sep->is_none()) {
    const std::u32string u = utf8_decode(s);
    size_t i = 0;
    while (i < u.size()) {
      while (i < u.size() && is_ws(u[i])) ++i;
      if (i >= u.size()) break;
      if (maxsplit >= 0 && static_cast<int64_t>(out.size()) == maxsplit) {
        size_t e = u.size();
        while (e > i && is_ws(u[e - 1])) --e;
        out.push_back(Value::string(utf8_encode(u.substr(i, e - i))));
        return Value::list(std::move(out));
      }
      size_t j = i;
      while (j < u.size() && !is_ws(u[j])) ++j;
      out.push_back(Value::string(utf8_encode(u.substr(i, j - i))));
      i = j;
    }
    return Value::list(std::move(out));
  }
  const std::string sp = need_str(*sep, "split");
  if (sp.empty()) throw JinjaError(ErrorKind::Type, "empty separator");
  size_t start = 0;
  while (true) {
    if (maxsplit >= 0 && static_cast<int64_t>(out.size()) == maxsplit) break;
    const size_t p = s.find(sp, start);
    if (p == std::string::npos) break;
    out.push_back(Value::string(s.substr(start, p - start)));
    start = p + sp.size();
  }
  out.push_back(Value::string(s.substr(start)));
  return Value::list(std::move(out));
}

bool affix(const std::string& s, const Value& what, bool prefix) {
  auto one = [&](const Value& v) {
    const std::string a = need_str(v, prefix ? "startswith" : "endswith");
    return prefix ? s.starts_with(a) : s.ends_with(a);
  };
  if (what.is(Kind::Tuple)) {
    return std::any_of(what.items().begin(), what.items().end(), one);
  }
  return one(what);
}

std::string replace_all(const std::string& s, const std::string& from, const std::string& to, int64_t count) {
  if (from.empty()) {
    // Python inserts `to` between every character (and at both ends).
    std::string out;
    const std::u32string u = utf8_decode(s);
    int64_t done = 0;
    for (char32_t c : u) {
      if (count < 0 || done < count) {
        out += to;
        ++done;
      }
      append_utf8(out, c);
    }
    if (count < 0 || done < count) out += to;
    return out;
  }
  std::string out;
  size_t start = 0;
  int64_t done = 0;
  while (count < 0 || done < count) {
    const size_t p = s.find(from, start);
    if (p == std::string::npos) break;
    out.append(s, start, p - start);
    out += to;
    start = p + from.size();
    ++done;
  }
  out.append(s, start);
  return out;
}

std::string case_map(const std::string& s, int mode) {  // 0 lower, 1 upper, 2 title, 3 capitalize
  std::string out = s;
  bool word_start = true;
  for (size_t i = 0; i < out.size(); ++i) {
    char& c = out[i];
    const bool alpha = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
    if (mode == 0 || (mode == 3 && i > 0) || (mode == 2 && !word_start)) {
      if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
    } else if (mode == 1 || (mode == 3 && i == 0) || (mode == 2 && word_start)) {
      if (c >= 'a' && c <= 'z') c = static_cast<char>(c - 'a' + 'A');
    }
    word_start = !alpha && !(c >= '0' && c <= '9') && !(static_cast<unsigned char>(c) >= 0x80);
  }
  return out;
}

Value string_method(const Value& obj, const std::string& name) {
  const std::string s = obj.str();
  auto fn = [&](std::function<Value(CallArgs&)> f) { return Value::function("str." + name, std::move(f)); };
  if (name == "strip" || name == "lstrip" || name == "rstrip") {
    const bool l = name != "rstrip", r = name != "lstrip";
    return fn([s, l, r](CallArgs& a) { return Value::string(strip_chars(s, a.get("chars", 0), l, r)); });
  }
  if (name == "split") return fn([s](CallArgs& a) { return split(s, a.get("sep", 0), a.get("maxsplit", 1)); });
  if (name == "rsplit")
    return fn([s](CallArgs& a) {
      const Value* m = a.get("maxsplit", 1);
      if (m && !m->is_none() && m->as_int() >= 0) {
        // rsplit with a limit: split fully, then rejoin the leading parts.
        const Value* sep = a.get("sep", 0);
        if (!sep || sep->is_none()) type_error("rsplit() with maxsplit needs a separator here");
        const ValueList parts = split(s, sep, nullptr).items();
        const size_t keep = static_cast<size_t>(m->as_int());
        if (parts.size() <= keep + 1) return Value::list(parts);
        std::string head;
        const size_t nhead = parts.size() - keep;
        for (size_t i = 0; i < nhead; ++i) head += (i ? sep->str() : "") + parts[i].str();
        ValueList out{Value::string(head)};
        out.insert(out.end(), parts.begin() + static_cast<std::ptrdiff_t>(nhead), parts.end());
        return Value::list(std::move(out));
      }
      return split(s, a.get("sep", 0), nullptr);
    });
  if (name == "startswith" || name == "endswith") {
    const bool prefix = name == "startswith";
    return fn([s, prefix, name](CallArgs& a) { return Value::boolean(affix(s, arg(a, 0, "prefix", name), prefix)); });
  }
  if (name == "replace")
    return fn([s](CallArgs& a) {
      const Value* count = a.get("count", 2);
      return Value::string(replace_all(s, need_str(arg(a, 0, "old", "replace"), "replace"),
                                       need_str(arg(a, 1, "new", "replace"), "replace"), count ? count->as_int() : -1));
    });
  if (name == "upper" || name == "lower" || name == "title" || name == "capitalize") {
    const int mode = name == "lower" ? 0 : name == "upper" ? 1 : name == "title" ? 2 : 3;
    return fn([s, mode](CallArgs&) { return Value::string(case_map(s, mode)); });
  }
  if (name == "find" || name == "rfind" || name == "index" || name == "count") {
    return fn([s, name](CallArgs& a) {
      const std::string sub = need_str(arg(a, 0, "sub", name), name);
      if (name == "count") {
        if (sub.empty()) return Value::integer(static_cast<int64_t>(utf8_decode(s).size()) + 1);
        int64_t n = 0;
        for (size_t p = s.find(sub); p != std::string::npos; p = s.find(sub, p + sub.size())) ++n;
        return Value::integer(n);
      }
      const size_t p = name == "rfind" ? s.rfind(sub) : s.find(sub);
      if (p == std::string::npos) {
        if (name == "index") throw JinjaError(ErrorKind::Type, "substring not found");
        return Value::integer(-1);
      }
      return Value::integer(static_cast<int64_t>(utf8_decode(s.substr(0, p)).size()));
    });
  }
  if (name == "join")
    return fn([s](CallArgs& a) {
      std::string out;
      bool first = true;
      for (const auto& v : iterate(arg(a, 0, "iterable", "join"))) {
        if (!first) out += s;
        first = false;
        out += need_str(v, "join");
      }
      return Value::string(std::move(out));
    });
  if (name == "splitlines")
    return fn([s](CallArgs&) {
      ValueList out;
      size_t start = 0;
      for (size_t i = 0; i < s.size(); ++i) {
        if (s[i] == '\n' || s[i] == '\r') {
          out.push_back(Value::string(s.substr(start, i - start)));
          if (s[i] == '\r' && i + 1 < s.size() && s[i + 1] == '\n') ++i;
          start = i + 1;
        }
      }
      if (start < s.size()) out.push_back(Value::string(s.substr(start)));
      return Value::list(std::move(out));
    });
  if (name == "isdigit" || name == "isalpha" || name == "isspace" || name == "isalnum" || name == "islower" ||
      name == "isupper") {
    return fn([s, name](CallArgs&) {
      if (s.empty()) return Value::boolean(false);
      bool ok = true, cased = false;
      for (char c : s) {
        const auto u = static_cast<unsigned char>(c);
        if (name == "isdigit") ok = ok && std::isdigit(u);
        if (name == "isalpha") ok = ok && std::isalpha(u);
        if (name == "isalnum") ok = ok && std::isalnum(u);
        if (name == "isspace") ok = ok && std::isspace(u);
        if (name == "islower") ok = ok && !std::isupper(u), cased = cased || std::islower(u);
        if (name == "isupper") ok = ok && !std::islower(u), cased = cased || std::isupper(u);
      }
      if (name == "islower" || name == "isupper") ok = ok && cased;
      return Value::boolean(ok);
    });
  }
  if (name == "format")
    return fn([s](CallArgs& a) {
      // str.format with {} / {0} / {name} fields and no format specs.
      std::string out;
      size_t auto_index = 0;
      for (size_t i = 0; i < s.size(); ++i) {
        if (s[i] == '{' && i + 1 < s.size() && s[i + 1] == '{') {
          out += '{';
          ++i;
        } else if (s[i] == '}' && i + 1 < s.size() && s[i + 1] == '}') {
          out += '}';
          ++i;
        } else if (s[i] == '{') {
          const size_t e = s.find('}', i);
          if (e == std::string::npos) throw JinjaError(ErrorKind::Type, "Single '{' encountered in format string");
          const std::string field = s.substr(i + 1, e - i - 1);
          const Value* v = nullptr;
          if (field.empty())
            v = auto_index < a.positional.size() ? &a.positional[auto_index++] : nullptr;
          else if (std::isdigit(static_cast<unsigned char>(field[0])))
            v = a.get("\x01", static_cast<size_t>(std::stoul(field)));
          else
            v = a.get(field, static_cast<size_t>(-1));
          if (!v) throw JinjaError(ErrorKind::Type, "format field '" + field + "' has no argument");
          out += v->to_str();
          i = e;
        } else {
          out += s[i];
        }
      }
      return Value::string(std::move(out));
    });
  return Value::undefined("'str object' has no attribute '" + name + "'");
}

Value dict_method(const Value& obj, const std::string& name) {
  auto fn = [&](std::function<Value(CallArgs&)> f) { return Value::function("dict." + name, std::move(f)); };
  if (name == "items")
    return fn([obj](CallArgs&) {
      ValueList out;
      for (const auto& [k, v] : obj.dict().items) out.push_back(Value::list({key_value(k), v}, Kind::Tuple));
      return Value::list(std::move(out));
    });
  if (name == "keys")
    return fn([obj](CallArgs&) {
      ValueList out;
      for (const auto& kv : obj.dict().items) out.push_back(key_value(kv.first));
      return Value::list(std::move(out));
    });
  if (name == "values")
    return fn([obj](CallArgs&) {
      ValueList out;
      for (const auto& kv : obj.dict().items) out.push_back(kv.second);
      return Value::list(std::move(out));
    });
  if (name == "get")
    return fn([obj](CallArgs& a) {
      const Value& key = arg(a, 0, "key", "get");
      const Value* def = a.get("default", 1);
      const Value* v = key.is_string() || key.is_number() || key.is_none() ? obj.dict().find(dict_key(key)) : nullptr;
      return v ? *v : def ? *def : Value::none();
    });
  return Value();
}

bool mutating(const std::string& name) {
  static const char* const kNames[] = {"append", "pop",     "update",     "clear",   "extend", "insert", "remove",
                                       "sort",   "reverse", "setdefault", "popitem", "add",    "discard"};
  return std::any_of(std::begin(kNames), std::end(kNames), [&](const char* n) { return name == n; });
}

// Jinja2's sandbox answers an unsafe attribute with an Undefined that fails when used.
Value unsafe(const Value& obj, const std::string& name) {
  return Value::undefined(
      fmt::format("{}access to attribute '{}' of '{}' object is unsafe.", kUnsafeMarker, name, obj.type_name()));
}

}  // namespace

std::string strip_chars(const std::string& s, const Value* chars, bool left, bool right) {
  const std::u32string u = utf8_decode(s);
  std::u32string set;
  const bool ws = !chars || chars->is_none();
  if (!ws) set = utf8_decode(need_str(*chars, "strip"));
  auto strip = [&](char32_t c) { return ws ? is_ws(c) : set.find(c) != std::u32string::npos; };
  size_t b = 0, e = u.size();
  if (left)
    while (b < e && strip(u[b])) ++b;
  if (right)
    while (e > b && strip(u[e - 1])) --e;
  if (b == 0 && e == u.size()) return s;
  return utf8_encode(u.substr(b, e - b));
}

Value get_attr(const Value& obj, const std::string& name) {
  switch (obj.kind()) {
    case Kind::Undefined:
      undefined_error(obj.str().empty() ? "value is undefined" : obj.str());
    case Kind::String:
      return string_method(obj, name);
    case Kind::Dict: {
      Value m = dict_method(obj, name);
      if (!m.is_undefined()) return m;
      if (mutating(name)) return unsafe(obj, name);
      const Value* v = obj.dict().find(name);
      return v ? *v : Value::undefined("'dict object' has no attribute '" + name + "'");
    }
    case Kind::Namespace: {
      const Value* v = obj.dict().find(name);
      return v ? *v : Value::undefined("'Namespace object' has no attribute '" + name + "'");
    }
    case Kind::List:
    case Kind::Tuple:
      if (mutating(name)) return unsafe(obj, name);
      if (name == "index" || name == "count")
        return Value::function(obj.type_name() + "." + name, [obj, name](CallArgs& a) {
          const Value& x = arg(a, 0, "value", name);
          int64_t n = 0;
          for (size_t i = 0; i < obj.items().size(); ++i) {
            if (!values_equal(obj.items()[i], x)) continue;
            if (name == "index") return Value::integer(static_cast<int64_t>(i));
            ++n;
          }
          if (name == "index") throw JinjaError(ErrorKind::Type, "value is not in list");
          return Value::integer(n);
        });
      break;
    default:
      break;
  }
  const std::string shown = obj.is_none() ? "None" : "'" + obj.type_name() + " object'";
  return Value::undefined(shown + " has no attribute '" + name + "'");
}

Value get_item(const Value& obj, const Value& key) {
  if (obj.is_undefined()) undefined_error(obj.str().empty() ? "value is undefined" : obj.str());
  if (obj.is_mapping()) {
    if (key.is_number() || key.is_none()) {
      if (const Value* v = obj.dict().find(dict_key(key))) return *v;
    }
    if (key.is_string()) {
      if (const Value* v = obj.dict().find(key.str())) return *v;
      if (obj.is(Kind::Dict)) {
        Value m = dict_method(obj, key.str());
        if (!m.is_undefined()) return m;
      }
    }
    return Value::undefined("'dict object' has no attribute '" + key.to_str() + "'");
  }
  if ((obj.is_sequence() || obj.is_string()) && (key.is(Kind::Int) || key.is(Kind::Bool))) {
    int64_t i = key.as_int();
    if (obj.is_string()) {
      const std::u32string u = utf8_decode(obj.str());
      const auto n = static_cast<int64_t>(u.size());
      if (i < 0) i += n;
      if (i < 0 || i >= n) return Value::undefined("string index out of range");
      return Value::string(utf8_encode(u.substr(static_cast<size_t>(i), 1)));
    }
    const auto n = static_cast<int64_t>(obj.items().size());
    if (i < 0) i += n;
    if (i < 0 || i >= n) return Value::undefined(obj.type_name() + " index out of range");
    return obj.items()[static_cast<size_t>(i)];
  }
  if (key.is_string()) return get_attr(obj, key.str());
  return Value::undefined("'" + obj.type_name() + " object' has no attribute '" + key.to_str() + "'");
}

Value slice(const Value& obj, const Value& start, const Value& stop, const Value& step_v) {
  if (obj.is_undefined()) undefined_error(obj.str().empty() ? "value is undefined" : obj.str());
  auto index = [](const Value& v) -> std::optional<int64_t> {
    if (v.is_none()) return std::nullopt;
    if (!v.is(Kind::Int) && !v.is(Kind::Bool)) type_error("slice indices must be integers or None");
    return v.as_int();
  };
  const int64_t step = index(step_v).value_or(1);
  if (step == 0) throw JinjaError(ErrorKind::Type, "slice step cannot be zero");
  std::u32string u;
  int64_t n = 0;
  if (obj.is_string()) {
    u = utf8_decode(obj.str());
    n = static_cast<int64_t>(u.size());
  } else if (obj.is_sequence()) {
    n = static_cast<int64_t>(obj.items().size());
  } else {
    type_error("'" + obj.type_name() + "' object is not subscriptable");
  }
  auto clamp = [&](std::optional<int64_t> v, int64_t def) {
    if (!v) return def;
    int64_t x = *v;
    if (x < 0) x += n;
    if (step > 0) return std::clamp<int64_t>(x, 0, n);
    return std::clamp<int64_t>(x, -1, n - 1);
  };
  const int64_t b = clamp(index(start), step > 0 ? 0 : n - 1);
  const int64_t e = clamp(index(stop), step > 0 ? n : -1);
  std::vector<int64_t> picks;
  for (int64_t i = b; step > 0 ? i < e : i > e; i += step) picks.push_back(i);
  if (obj.is_string()) {
    std::u32string out;
    for (int64_t i : picks) out += u[static_cast<size_t>(i)];
    return Value::string(utf8_encode(out));
  }
  ValueList out;
  for (int64_t i : picks) out.push_back(obj.items()[static_cast<size_t>(i)]);
  return Value::list(std::move(out), obj.kind());
}

ValueList iterate(const Value& v) {
  switch (v.kind()) {
    case Kind::Undefined:
      return {};
    case Kind::List:
    case Kind::Tuple:
    case Kind::Generator:
      return v.items();
    case Kind::Dict: {
      ValueList keys;
      for (const auto& kv : v.dict().items) keys.push_back(key_value(kv.first));
      return keys;
    }
    case Kind::String: {
      ValueList chars;
      for (char32_t c : utf8_decode(v.str())) {
        std::string s;
        append_utf8(s, c);
        chars.push_back(Value::string(std::move(s)));
      }
      return chars;
    }
    default:
      type_error("'" + v.type_name() + "' object is not iterable");
  }
}

bool contains(const Value& container, const Value& needle) {
  switch (container.kind()) {
    case Kind::Undefined:
      return false;
    case Kind::String:
      if (!needle.is_string()) type_error("'in <string>' requires string as left operand, not " + needle.type_name());
      return container.str().find(needle.str()) != std::string::npos;
    case Kind::Dict:
    case Kind::Namespace:
      return (needle.is_string() || needle.is_number() || needle.is_none()) &&
             container.dict().find(dict_key(needle)) != nullptr;
    case Kind::List:
    case Kind::Tuple:
    case Kind::Generator:
      return std::any_of(container.items().begin(), container.items().end(),
                         [&](const Value& x) { return values_equal(x, needle); });
    default:
      type_error("argument of type '" + container.type_name() + "' is not iterable");
  }
}

size_t length(const Value& v) {
  switch (v.kind()) {
    case Kind::Undefined:
      return 0;
    case Kind::String:
      return utf8_decode(v.str()).size();
    case Kind::List:
    case Kind::Tuple:
      return v.items().size();
    case Kind::Dict:
    case Kind::Namespace:
      return v.dict().items.size();
    default:
      type_error("object of type '" + v.type_name() + "' has no len()");
  }
}

}  // namespace tessera::jinja
