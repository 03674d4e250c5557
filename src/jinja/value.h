// Jinja values with Python semantics: None/bool/int/float/str (plain or Markup), list/tuple, insertion-ordered dict,
// namespace, callables and generators (what filters like map/select return), plus Jinja's Undefined.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace tessera::jinja {

class Value;
using ValueList = std::vector<Value>;

// Insertion-ordered string-keyed map, as Python's dict (keys are strings in every chat template context).
struct Dict {
  std::vector<std::pair<std::string, Value>> items;
  const Value* find(std::string_view key) const;
  void set(const std::string& key, Value value);
};

// Python dicts may have int/float/bool/None keys ({0: 1, 512: 128}): such a key is stored as "\x02" + its
// repr, and these two convert between a key Value and its stored form.
std::string dict_key(const Value& key);
Value key_value(const std::string& stored);

struct CallArgs {
  ValueList positional;
  std::vector<std::pair<std::string, Value>> keyword;
  // The keyword argument `name`, else positional[index], else nullptr.
  const Value* get(std::string_view name, size_t index) const;
};

struct Callable {
  std::string name;
  std::function<Value(CallArgs&)> call;
};

enum class Kind { Undefined, None, Bool, Int, Float, String, List, Tuple, Dict, Namespace, Callable, Generator };

class Value {
 public:
  Value() = default;  // Undefined
  static Value undefined(std::string hint = {});
  static Value none();
  static Value boolean(bool b);
  static Value integer(int64_t i);
  static Value number(double f);
  static Value string(std::string s, bool markup = false);
  static Value list(ValueList items, Kind kind = Kind::List);  // List, Tuple or Generator
  static Value object(Dict d = {});                            // a Python dict
  static Value ns(Dict d = {});
  static Value function(std::string name, std::function<Value(CallArgs&)> call);
  static Value from_json(const nlohmann::ordered_json& j);  // keeps object key order

  Kind kind() const { return kind_; }
  bool is(Kind k) const { return kind_ == k; }
  bool is_undefined() const { return kind_ == Kind::Undefined; }
  bool is_none() const { return kind_ == Kind::None; }
  bool is_string() const { return kind_ == Kind::String; }
  bool is_number() const { return kind_ == Kind::Int || kind_ == Kind::Float || kind_ == Kind::Bool; }
  bool is_sequence() const { return kind_ == Kind::List || kind_ == Kind::Tuple; }
  bool is_mapping() const { return kind_ == Kind::Dict || kind_ == Kind::Namespace; }
  bool is_markup() const { return kind_ == Kind::String && markup_; }

  bool as_bool() const { return b_; }
  int64_t as_int() const;  // bool/int/float
  double as_double() const;
  const std::string& str() const { return s_; }  // String; the hint for Undefined
  const ValueList& items() const { return *list_; }
  const Dict& dict() const { return *dict_; }
  Dict& mutable_namespace() const { return *dict_; }
  const Callable& callable() const { return *fn_; }

  bool truthy() const;
  std::string to_str() const;     // Python str()
  std::string repr() const;       // Python repr()
  std::string type_name() const;  // Python's type name, for error messages ("NoneType", "dict", ...)

 private:
  Kind kind_ = Kind::Undefined;
  bool b_ = false;
  bool markup_ = false;
  int64_t i_ = 0;
  double f_ = 0;
  std::string s_;
  std::shared_ptr<const ValueList> list_;
  std::shared_ptr<Dict> dict_;
  std::shared_ptr<const Callable> fn_;
};

bool values_equal(const Value& a, const Value& b);
// Python's a < b; TypeError for unorderable kinds.
bool value_less(const Value& a, const Value& b);
// Python float repr: shortest round-trip text, "1.0", "1e+16".
std::string float_repr(double f);
// Python's json.dumps(v, ensure_ascii, indent, separators, sort_keys); indent < 0 means None.
std::string to_json(const Value& v, bool ensure_ascii, int indent, const std::string& item_sep,
                    const std::string& key_sep, bool sort_keys);
nlohmann::ordered_json value_to_json(const Value& v);
// Unicode code points of UTF-8 text (invalid bytes are taken as Latin-1), and back.
std::u32string utf8_decode(std::string_view s);
std::string utf8_encode(std::u32string_view s);
void append_utf8(std::string& out, char32_t c);
// MarkupSafe's escape(): & < > " ' as HTML entities.
std::string html_escape(std::string_view s);

}  // namespace tessera::jinja
