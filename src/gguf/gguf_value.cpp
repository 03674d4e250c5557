// GGUF metadata values: checked conversions, readable rendering, and the ordered key/value table.
#include "gguf/gguf_value.h"

#include <fmt/format.h>

#include <array>
#include <limits>

#include "util/error.h"

namespace tessera::gguf {
namespace {

constexpr std::array<std::string_view, 13> kTypeNames = {
    "uint8", "int8",   "uint16", "int16",  "uint32", "int32",   "float32",
    "bool",  "string", "array",  "uint64", "int64",  "float64",
};

// "uint32", or "array of string" for arrays, so a type mismatch says what was actually found.
std::string full_type_name(const Value& v) {
  if (v.type() != ValueType::ARRAY) return std::string(value_type_name(v.type()));
  return fmt::format("array of {}", value_type_name(v.array_type()));
}

[[noreturn]] void wrong_type(std::string_view what, const Value& v, std::string_view expected) {
  fail("{} has type {}, expected {}", what, full_type_name(v), expected);
}

// Strings in rendered values are quoted with C-style escapes so control bytes cannot mangle a terminal.
void append_quoted(std::string& out, std::string_view s, size_t max_bytes) {
  size_t n = s.size();
  bool cut = false;
  if (n > max_bytes) {
    n = max_bytes;
    // Back off to the start of a UTF-8 sequence so the cut does not split a character.
    while (n > 0 && (static_cast<unsigned char>(s[n]) & 0xC0) == 0x80) --n;
    cut = true;
  }
  out += '"';
  for (size_t i = 0; i < n; ++i) {
    auto c = static_cast<unsigned char>(s[i]);
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
      default:
        if (c < 0x20 || c == 0x7F) {
          out += fmt::format("\\x{:02x}", c);
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  out += '"';
  if (cut) out += fmt::format("... ({} bytes)", s.size());
}

void append_value(std::string& out, const Value& v, size_t max_items) {
  constexpr size_t kMaxStringBytes = 120;
  std::visit(
      [&](const auto& x) {
        using T = std::decay_t<decltype(x)>;
        if constexpr (std::is_same_v<T, std::string>) {
          append_quoted(out, x, kMaxStringBytes);
        } else if constexpr (std::is_same_v<T, std::vector<Value>>) {
          out += fmt::format("[{} x {}] [", value_type_name(v.array_type()), x.size());
          for (size_t i = 0; i < x.size() && i < max_items; ++i) {
            if (i > 0) out += ", ";
            append_value(out, x[i], max_items);
          }
          if (x.size() > max_items) out += ", ...";
          out += ']';
        } else if constexpr (std::is_same_v<T, bool>) {
          out += x ? "true" : "false";
        } else if constexpr (std::is_same_v<T, uint8_t> || std::is_same_v<T, int8_t>) {
          out += fmt::format("{}", static_cast<int>(x));  // not as a character
        } else {
          out += fmt::format("{}", x);
        }
      },
      v.storage());
}

}  // namespace

std::string_view value_type_name(ValueType type) {
  auto i = static_cast<size_t>(type);
  return i < kTypeNames.size() ? kTypeNames[i] : std::string_view("unknown");
}

void Value::infer_array_type() {
  if (const auto* items = std::get_if<std::vector<Value>>(&storage_); items != nullptr && !items->empty()) {
    array_type_ = items->front().type();
  }
}

Value Value::array(ValueType elem_type, std::vector<Value> items) {
  if (static_cast<size_t>(elem_type) >= kTypeNames.size()) {
    fail("array element type {} is not a GGUF value type", static_cast<uint32_t>(elem_type));
  }
  for (size_t i = 0; i < items.size(); ++i) {
    if (items[i].type() != elem_type) {
      fail("array element {} has type {}, but the array holds {}", i, full_type_name(items[i]),
           value_type_name(elem_type));
    }
  }
  Value v(std::move(items));
  v.array_type_ = elem_type;
  return v;
}

bool Value::is_integer() const {
  switch (type()) {
    case ValueType::UINT8:
    case ValueType::INT8:
    case ValueType::UINT16:
    case ValueType::INT16:
    case ValueType::UINT32:
    case ValueType::INT32:
    case ValueType::UINT64:
    case ValueType::INT64:
      return true;
    default:
      return false;
  }
}

bool Value::is_number() const { return is_integer() || type() == ValueType::FLOAT32 || type() == ValueType::FLOAT64; }

uint64_t Value::to_u64(std::string_view what) const {
  return std::visit(
      [&](const auto& x) -> uint64_t {
        using T = std::decay_t<decltype(x)>;
        if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
          if constexpr (std::is_signed_v<T>) {
            if (x < 0) fail("{} has the negative value {}, expected an unsigned integer", what, x);
          }
          return static_cast<uint64_t>(x);
        } else {
          wrong_type(what, *this, "an unsigned integer");
        }
      },
      storage_);
}

int64_t Value::to_i64(std::string_view what) const {
  return std::visit(
      [&](const auto& x) -> int64_t {
        using T = std::decay_t<decltype(x)>;
        if constexpr (std::is_same_v<T, uint64_t>) {
          if (x > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
            fail("{} has the value {}, which does not fit a signed 64-bit integer", what, x);
          }
          return static_cast<int64_t>(x);
        } else if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
          return static_cast<int64_t>(x);
        } else {
          wrong_type(what, *this, "an integer");
        }
      },
      storage_);
}

double Value::to_f64(std::string_view what) const {
  return std::visit(
      [&](const auto& x) -> double {
        using T = std::decay_t<decltype(x)>;
        if constexpr (std::is_arithmetic_v<T> && !std::is_same_v<T, bool>) {
          return static_cast<double>(x);
        } else {
          wrong_type(what, *this, "a number");
        }
      },
      storage_);
}

bool Value::to_bool(std::string_view what) const {
  if (const auto* b = std::get_if<bool>(&storage_)) return *b;
  wrong_type(what, *this, "a bool");
}

const std::string& Value::to_string(std::string_view what) const {
  if (const auto* s = std::get_if<std::string>(&storage_)) return *s;
  wrong_type(what, *this, "a string");
}

const std::vector<Value>& Value::to_array(std::string_view what) const {
  if (const auto* a = std::get_if<std::vector<Value>>(&storage_)) return *a;
  wrong_type(what, *this, "an array");
}

std::string Value::describe(size_t max_items) const {
  std::string out;
  append_value(out, *this, max_items);
  return out;
}

// ---- Metadata ----

namespace {

std::string key_what(std::string_view key) { return fmt::format("metadata key '{}'", key); }

}  // namespace

void Metadata::set(std::string key, Value value) {
  if (auto it = index_.find(key); it != index_.end()) {
    entries_[it->second].second = std::move(value);
    return;
  }
  index_.emplace(key, entries_.size());
  entries_.emplace_back(std::move(key), std::move(value));
}

const Value* Metadata::find(std::string_view key) const {
  auto it = index_.find(key);
  return it == index_.end() ? nullptr : &entries_[it->second].second;
}

namespace {

const Value& require(const Metadata& m, std::string_view key) {
  const Value* v = m.find(key);
  if (v == nullptr) fail("metadata key '{}' is missing", key);
  return *v;
}

}  // namespace

uint64_t Metadata::get_u64(std::string_view key) const { return require(*this, key).to_u64(key_what(key)); }
int64_t Metadata::get_i64(std::string_view key) const { return require(*this, key).to_i64(key_what(key)); }
double Metadata::get_f64(std::string_view key) const { return require(*this, key).to_f64(key_what(key)); }
bool Metadata::get_bool(std::string_view key) const { return require(*this, key).to_bool(key_what(key)); }
const std::string& Metadata::get_string(std::string_view key) const {
  return require(*this, key).to_string(key_what(key));
}
const std::vector<Value>& Metadata::get_array(std::string_view key) const {
  return require(*this, key).to_array(key_what(key));
}

std::optional<uint64_t> Metadata::opt_u64(std::string_view key) const {
  const Value* v = find(key);
  if (v == nullptr) return std::nullopt;
  return v->to_u64(key_what(key));
}

std::optional<double> Metadata::opt_f64(std::string_view key) const {
  const Value* v = find(key);
  if (v == nullptr) return std::nullopt;
  return v->to_f64(key_what(key));
}

std::optional<bool> Metadata::opt_bool(std::string_view key) const {
  const Value* v = find(key);
  if (v == nullptr) return std::nullopt;
  return v->to_bool(key_what(key));
}

std::optional<std::string> Metadata::opt_string(std::string_view key) const {
  const Value* v = find(key);
  if (v == nullptr) return std::nullopt;
  return v->to_string(key_what(key));
}

}  // namespace tessera::gguf
