// Jinja2's built-in tests (`x is defined`, `x is string`, `x is divisibleby 3`, ...) with Python's type rules.
#include "jinja/error.h"
#include "jinja/renderer.h"

namespace tessera::jinja {

namespace {

const Value& operand(const CallArgs& args, const std::string& test) {
  if (args.positional.empty()) type_error("test '" + test + "' needs an argument");
  return args.positional[0];
}

}  // namespace

bool Renderer::apply_test(const std::string& name, const Value& v, CallArgs& args) {
  if (name == "defined") return !v.is_undefined();
  if (name == "undefined") return v.is_undefined();
  if (name == "none") return v.is_none();
  if (name == "string") return v.is_string();
  if (name == "number") return v.is_number();
  if (name == "integer") return v.is(Kind::Int);
  if (name == "float") return v.is(Kind::Float);
  if (name == "boolean") return v.is(Kind::Bool);
  if (name == "true") return v.is(Kind::Bool) && v.as_bool();
  if (name == "false") return v.is(Kind::Bool) && !v.as_bool();
  if (name == "mapping") return v.is(Kind::Dict);
  if (name == "iterable")
    return v.is_undefined() || v.is_string() || v.is_sequence() || v.is(Kind::Dict) || v.is(Kind::Generator);
  if (name == "sequence") return v.is_undefined() || v.is_string() || v.is_sequence() || v.is(Kind::Dict);
  if (name == "callable") return v.is(Kind::Callable);
  if (name == "escaped") return v.is_markup();
  if (name == "odd" || name == "even") {
    if (!v.is_number()) type_error("test '" + name + "' needs a number");
    const int64_t r = v.as_int() % 2;
    return name == "odd" ? r != 0 : r == 0;
  }
  if (name == "divisibleby") {
    const Value& d = operand(args, name);
    if (d.as_int() == 0) throw JinjaError(ErrorKind::Type, "integer division or modulo by zero");
    return v.as_int() % d.as_int() == 0;
  }
  if (name == "eq" || name == "equalto" || name == "==") return values_equal(v, operand(args, name));
  if (name == "ne" || name == "!=") return !values_equal(v, operand(args, name));
  if (name == "lt" || name == "lessthan" || name == "<") return value_less(v, operand(args, name));
  if (name == "gt" || name == "greaterthan" || name == ">") return value_less(operand(args, name), v);
  if (name == "le" || name == "<=") return !value_less(operand(args, name), v);
  if (name == "ge" || name == ">=") return !value_less(v, operand(args, name));
  if (name == "in") return contains(operand(args, name), v);
  if (name == "sameas") {
    const Value& o = operand(args, name);
    if (v.kind() != o.kind()) return false;
    if (v.is_none() || v.is(Kind::Bool) || v.is_undefined()) return values_equal(v, o);
    return false;
  }
  if (name == "lower" || name == "upper") {
    if (!v.is_string()) return false;
    bool cased = false;
    for (char c : v.str()) {
      if (name == "lower" && c >= 'A' && c <= 'Z') return false;
      if (name == "upper" && c >= 'a' && c <= 'z') return false;
      cased = cased || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
    }
    return cased;
  }
  throw JinjaError(ErrorKind::Type, "No test named '" + name + "'.");
}

}  // namespace tessera::jinja
