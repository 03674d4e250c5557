// GGUF metadata values (every scalar type, strings and nested arrays) and the ordered key/value table.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <unordered_map>
#include <utility>
#include <variant>
#include <vector>

namespace tessera::gguf {

// Numeric values are the GGUF type tags; they equal the index of the alternative in Value::Storage.
enum class ValueType : uint32_t {
  UINT8 = 0,
  INT8 = 1,
  UINT16 = 2,
  INT16 = 3,
  UINT32 = 4,
  INT32 = 5,
  FLOAT32 = 6,
  BOOL = 7,
  STRING = 8,
  ARRAY = 9,
  UINT64 = 10,
  INT64 = 11,
  FLOAT64 = 12,
};

std::string_view value_type_name(ValueType type);

class Value {
 public:
  using Storage = std::variant<uint8_t, int8_t, uint16_t, int16_t, uint32_t, int32_t, float, bool, std::string,
                               std::vector<Value>, uint64_t, int64_t, double>;

  Value() : storage_(uint8_t{0}) {}
  template <typename T>
  requires std::is_constructible_v<Storage, T&&> &&(!std::is_same_v<std::decay_t<T>, Value>)Value(T&& v)
      : storage_(std::forward<T>(v)) {  // NOLINT(google-explicit-constructor)
    infer_array_type();
  }
  Value(const char* s) : storage_(std::string(s)) {}  // NOLINT(google-explicit-constructor)
  // An array value; elem_type is kept so empty arrays round-trip with their element type.
  // Throws Error when an item has another type. (A non-empty array built from a plain
  // std::vector<Value> takes its element type from the first item.)
  static Value array(ValueType elem_type, std::vector<Value> items);

  ValueType type() const { return static_cast<ValueType>(storage_.index()); }
  const Storage& storage() const { return storage_; }

  bool is_integer() const;  // any of the 8 integer types
  bool is_number() const;   // integer or float
  // Checked conversions; `what` names the value in error messages (e.g. the key).
  uint64_t to_u64(std::string_view what) const;  // integer >= 0
  int64_t to_i64(std::string_view what) const;   // integer within int64
  double to_f64(std::string_view what) const;    // any number
  bool to_bool(std::string_view what) const;     // bool
  const std::string& to_string(std::string_view what) const;
  const std::vector<Value>& to_array(std::string_view what) const;
  ValueType array_type() const { return array_type_; }  // element type of an array value

  // Human-readable rendering for `inspect` (arrays are abbreviated after max_items).
  std::string describe(size_t max_items = 4) const;

  bool operator==(const Value& other) const = default;

 private:
  void infer_array_type();

  Storage storage_;
  ValueType array_type_ = ValueType::UINT8;
};

// Lets the string-keyed maps be searched with a string_view without building a std::string.
struct StringHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const noexcept { return std::hash<std::string_view>{}(s); }
};

// Metadata keys in file order, with lookup by name and typed getters whose errors name the key.
class Metadata {
 public:
  // Adds or replaces a key (replacing keeps the original position).
  void set(std::string key, Value value);
  const Value* find(std::string_view key) const;
  bool contains(std::string_view key) const { return find(key) != nullptr; }
  const std::vector<std::pair<std::string, Value>>& entries() const { return entries_; }
  size_t size() const { return entries_.size(); }

  // Required getters: throw Error("metadata key 'K' is missing" / "... has type T, expected ...").
  uint64_t get_u64(std::string_view key) const;
  int64_t get_i64(std::string_view key) const;
  double get_f64(std::string_view key) const;
  bool get_bool(std::string_view key) const;
  const std::string& get_string(std::string_view key) const;
  const std::vector<Value>& get_array(std::string_view key) const;

  // Optional getters: nullopt when absent, Error when present with the wrong type.
  std::optional<uint64_t> opt_u64(std::string_view key) const;
  std::optional<double> opt_f64(std::string_view key) const;
  std::optional<bool> opt_bool(std::string_view key) const;
  std::optional<std::string> opt_string(std::string_view key) const;

  bool operator==(const Metadata& other) const { return entries_ == other.entries_; }

 private:
  std::vector<std::pair<std::string, Value>> entries_;
  std::unordered_map<std::string, size_t, StringHash, std::equal_to<>> index_;
};

}  // namespace tessera::gguf
