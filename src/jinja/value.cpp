// Jinja values: construction, Python truthiness, str()/repr(), equality and ordering.
#include "jinja/value.h"

#include <fmt/format.h>

#include <cmath>

#include "jinja/error.h"

namespace tessera::jinja {

const Value* Dict::find(std::string_view key) const {
  for (const auto& [k, v] : items)
    if (k == key) return &v;
  return nullptr;
}

void Dict::set(const std::string& key, Value value) {
  for (auto& [k, v] : items) {
    if (k == key) {
      v = std::move(value);
      return;
    }
  }
  items.emplace_back(key, std::move(value));
}

const Value* CallArgs::get(std::string_view name, size_t index) const {
  for (const auto& [k, v] : keyword)
    if (k == name) return &v;
  return index < positional.size() ? &positional[index] : nullptr;
}

Value Value::undefined(std::string hint) {
  Value v;
  v.s_ = std::move(hint);
  return v;
}
Value Value::none() {
  Value v;
  v.kind_ = Kind::None;
  return v;
}
Value Value::boolean(bool b) {
  Value v;
  v.kind_ = Kind::Bool;
  v.b_ = b;
  v.i_ = b ? 1 : 0;
  return v;
}
Value Value::integer(int64_t i) {
  Value v;
  v.kind_ = Kind::Int;
  v.i_ = i;
  return v;
}
Value Value::number(double f) {
  Value v;
  v.kind_ = Kind::Float;
  v.f_ = f;
  return v;
}
Value Value::string(std::string s, bool markup) {
  Value v;
  v.kind_ = Kind::String;
  v.s_ = std::move(s);
  v.markup_ = markup;
  return v;
}
Value Value::list(ValueList items, Kind kind) {
  Value v;
  v.kind_ = kind;
  v.list_ = std::make_shared<const ValueList>(std::move(items));
  return v;
}
Value Value::object(Dict d) {
  Value v;
  v.kind_ = Kind::Dict;
  v.dict_ = std::make_shared<Dict>(std::move(d));
  return v;
}
Value Value::ns(Dict d) {
  Value v = object(std::move(d));
  v.kind_ = Kind::Namespace;
  return v;
}
Value Value::function(std::string name, std::function<Value(CallArgs&)> call) {
  Value v;
  v.kind_ = Kind::Callable;
  v.fn_ = std::make_shared<const Callable>(Callable{std::move(name), std::move(call)});
  return v;
}

Value Value::from_json(const nlohmann::ordered_json& j) {
  switch (j.type()) {
    case nlohmann::ordered_json::value_t::null:
      return none();
    case nlohmann::ordered_json::value_t::boolean:
      return boolean(j.get<bool>());
    case nlohmann::ordered_json::value_t::number_integer:
      return integer(j.get<int64_t>());
    case nlohmann::ordered_json::value_t::number_unsigned:
      return integer(static_cast<int64_t>(j.get<uint64_t>()));
    case nlohmann::ordered_json::value_t::number_float:
      return number(j.get<double>());
    case nlohmann::ordered_json::value_t::string:
      return string(j.get<std::string>());
    case nlohmann::ordered_json::value_t::array: {
      ValueList items;
      items.reserve(j.size());
      for (const auto& e : j) items.push_back(from_json(e));
      return list(std::move(items));
    }
    case nlohmann::ordered_json::value_t::object: {
      Dict d;
      d.items.reserve(j.size());
      for (const auto& [k, e] : j.items()) d.items.emplace_back(k, from_json(e));
      return object(std::move(d));
    }
    default:
      return none();
  }
}

std::string dict_key(const Value& key) {
  if (key.is_string()) return key.str();
  if (key.is_number() || key.is_none()) {
    // Python hashes 1, 1.0 and True alike: store integral numbers as ints.
    if (key.is(Kind::Float) && key.as_double() != static_cast<double>(key.as_int()))
      return fmt::format("\x02{}", key.repr());
    if (key.is_none()) return "\x02None";
    return fmt::format("\x02{}", key.as_int());
  }
  type_error("unhashable dict key of type '" + key.type_name() + "'");
}

Value key_value(const std::string& stored) {
  if (stored.empty() || stored[0] != '\x02') return Value::string(stored);
  const std::string text = stored.substr(1);
  if (text == "None") return Value::none();
  if (text.find_first_of(".en") != std::string::npos) return Value::number(std::strtod(text.c_str(), nullptr));
  return Value::integer(std::strtoll(text.c_str(), nullptr, 10));
}

int64_t Value::as_int() const { return kind_ == Kind::Float ? static_cast<int64_t>(f_) : i_; }
double Value::as_double() const { return kind_ == Kind::Float ? f_ : static_cast<double>(i_); }

bool Value::truthy() const {
  switch (kind_) {
    case Kind::Undefined:
    case Kind::None:
      return false;
    case Kind::Bool:
      return b_;
    case Kind::Int:
      return i_ != 0;
    case Kind::Float:
      return f_ != 0;
    case Kind::String:
      return !s_.empty();
    case Kind::List:
    case Kind::Tuple:
      return !list_->empty();
    case Kind::Dict:
      return !dict_->items.empty();
    default:
      return true;
  }
}

std::string float_repr(double f) {
  if (std::isnan(f)) return "nan";
  if (std::isinf(f)) return f > 0 ? "inf" : "-inf";
  // fmt's shortest round-trip form matches Python's repr (exponent below 1e-4 and from 1e16 on) except that
  // Python keeps ".0" on integral values.
  std::string s = fmt::format("{}", f);
  if (s.find_first_of(".e") == std::string::npos) s += ".0";
  return s;
}

namespace {

// Python's str.isprintable() for the code points that realistically appear: controls, separators and format
// characters are not printable.
bool printable(char32_t c) {
  if (c < 0x20 || (c >= 0x7f && c <= 0xa0) || c == 0xad) return false;
  if (c == 0x1680 || (c >= 0x2000 && c <= 0x200f) || (c >= 0x2028 && c <= 0x202f)) return false;
  if ((c >= 0x205f && c <= 0x2064) || (c >= 0x2066 && c <= 0x206f) || c == 0x3000 || c == 0xfeff) return false;
  if ((c >= 0xd800 && c <= 0xdfff) || (c >= 0xe000 && c <= 0xf8ff) || c == 0xfff9 || c == 0xfffa || c == 0xfffb)
    return false;
  if (c >= 0xe0000 && c <= 0xe007f) return false;
  return true;
}

std::string string_repr(const std::string& s) {
  const bool has_single = s.find('\'') != std::string::npos;
  const bool has_double = s.find('"') != std::string::npos;
  const char quote = has_single && !has_double ? '"' : '\'';
  std::string out(1, quote);
  for (char32_t c : utf8_decode(s)) {
    if (c == static_cast<char32_t>(quote) || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (!printable(c)) {
      if (c < 0x100)
        out += fmt::format("\\x{:02x}", static_cast<unsigned>(c));
      else if (c < 0x10000)
        out += fmt::format("\\u{:04x}", static_cast<unsigned>(c));
      else
        out += fmt::format("\\U{:08x}", static_cast<unsigned>(c));
    } else {
      append_utf8(out, c);
    }
  }
  out += quote;
  return out;
}

}  // namespace

std::string Value::to_str() const {
  switch (kind_) {
    case Kind::Undefined:
      return "";
    case Kind::String:
      return s_;
    default:
      return repr();
  }
}

std::string Value::repr() const {
  switch (kind_) {
    case Kind::Undefined:
      return "Undefined";
    case Kind::None:
      return "None";
    case Kind::Bool:
      return b_ ? "True" : "False";
    case Kind::Int:
      return std::to_string(i_);
    case Kind::Float:
      return float_repr(f_);
    case Kind::String:
      return markup_ ? "Markup(" + string_repr(s_) + ")" : string_repr(s_);
    case Kind::List:
    case Kind::Tuple: {
      std::string out = kind_ == Kind::List ? "[" : "(";
      for (size_t i = 0; i < list_->size(); ++i) {
        if (i) out += ", ";
        out += (*list_)[i].repr();
      }
      if (kind_ == Kind::Tuple && list_->size() == 1) out += ",";
      out += kind_ == Kind::List ? "]" : ")";
      return out;
    }
    case Kind::Dict:
    case Kind::Namespace: {
      std::string out = kind_ == Kind::Dict ? "{" : "<Namespace {";
      bool first = true;
      for (const auto& [k, v] : dict_->items) {
        if (!first) out += ", ";
        first = false;
        out += key_value(k).repr() + ": " + v.repr();
      }
      out += kind_ == Kind::Dict ? "}" : "}>";
      return out;
    }
    case Kind::Callable:
      return "<function " + fn_->name + ">";
    case Kind::Generator:
      return "<generator object>";
  }
  return "";
}

std::string Value::type_name() const {
  switch (kind_) {
    case Kind::Undefined:
      return "Undefined";
    case Kind::None:
      return "NoneType";
    case Kind::Bool:
      return "bool";
    case Kind::Int:
      return "int";
    case Kind::Float:
      return "float";
    case Kind::String:
      return markup_ ? "Markup" : "str";
    case Kind::List:
      return "list";
    case Kind::Tuple:
      return "tuple";
    case Kind::Dict:
      return "dict";
    case Kind::Namespace:
      return "Namespace";
    case Kind::Callable:
      return "function";
    case Kind::Generator:
      return "generator";
  }
  return "object";
}

bool values_equal(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    if (a.is(Kind::Float) || b.is(Kind::Float)) return a.as_double() == b.as_double();
    return a.as_int() == b.as_int();
  }
  if (a.kind() != b.kind()) {
    if (a.is_sequence() && b.is_sequence()) return false;
    return false;
  }
  switch (a.kind()) {
    case Kind::Undefined:
    case Kind::None:
      return true;
    case Kind::String:
      return a.str() == b.str();
    case Kind::List:
    case Kind::Tuple: {
      if (a.items().size() != b.items().size()) return false;
      for (size_t i = 0; i < a.items().size(); ++i)
        if (!values_equal(a.items()[i], b.items()[i])) return false;
      return true;
    }
    case Kind::Dict: {
      if (a.dict().items.size() != b.dict().items.size()) return false;
      for (const auto& [k, v] : a.dict().items) {
        const Value* o = b.dict().find(k);
        if (!o || !values_equal(v, *o)) return false;
      }
      return true;
    }
    default:
      return &a == &b;
  }
}

bool value_less(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    if (a.is(Kind::Float) || b.is(Kind::Float)) return a.as_double() < b.as_double();
    return a.as_int() < b.as_int();
  }
  if (a.is_string() && b.is_string()) return a.str() < b.str();  // UTF-8 byte order is code point order
  if (a.kind() == b.kind() && a.is_sequence()) {
    const auto& x = a.items();
    const auto& y = b.items();
    for (size_t i = 0; i < x.size() && i < y.size(); ++i) {
      if (values_equal(x[i], y[i])) continue;
      return value_less(x[i], y[i]);
    }
    return x.size() < y.size();
  }
  type_error("'<' not supported between instances of '" + a.type_name() + "' and '" + b.type_name() + "'");
}

std::string html_escape(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&#34;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

}  // namespace tessera::jinja
