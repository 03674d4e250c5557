// The Jinja renderer, expressions: names, literals, attribute/item access and slicing, calls, filters and tests,
// and the operators with Python's semantics (including MarkupSafe's escaping of `Markup + str`).
#include <fmt/format.h>

#include <cmath>

#include "jinja/error.h"
#include "jinja/renderer.h"

namespace tessera::jinja {

namespace {

[[noreturn]] void undefined_use(const Value& v) {
  undefined_error(v.str().empty() ? std::string("value is undefined") : v.str());
}

std::string undefined_name(const std::string& name) { return "'" + name + "' is undefined"; }

int64_t floor_div(int64_t a, int64_t b) {
  int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}

Value arithmetic(const std::string& op, const Value& a, const Value& b) {
  if (a.is_undefined()) undefined_use(a);
  if (b.is_undefined()) undefined_use(b);
  const bool nums = a.is_number() && b.is_number();
  const bool floats = a.is(Kind::Float) || b.is(Kind::Float);
  if (op == "+") {
    if (nums) return floats ? Value::number(a.as_double() + b.as_double()) : Value::integer(a.as_int() + b.as_int());
    if (a.is_string() && b.is_string()) {
      if (a.is_markup() && !b.is_markup()) return Value::string(a.str() + html_escape(b.str()), true);
      if (!a.is_markup() && b.is_markup()) return Value::string(html_escape(a.str()) + b.str(), true);
      return Value::string(a.str() + b.str(), a.is_markup());
    }
    if (a.kind() == b.kind() && a.is_sequence()) {
      ValueList out = a.items();
      out.insert(out.end(), b.items().begin(), b.items().end());
      return Value::list(std::move(out), a.kind());
    }
    if (a.is_string()) type_error("can only concatenate str (not \"" + b.type_name() + "\") to str");
    if (a.is_sequence())
      type_error("can only concatenate " + a.type_name() + " (not \"" + b.type_name() + "\") to " + a.type_name());
    type_error("unsupported operand type(s) for +: '" + a.type_name() + "' and '" + b.type_name() + "'");
  }
  if (op == "*") {
    if (nums) return floats ? Value::number(a.as_double() * b.as_double()) : Value::integer(a.as_int() * b.as_int());
    const Value* seq = a.is_string() || a.is_sequence() ? &a : &b;
    const Value* count = seq == &a ? &b : &a;
    if ((seq->is_string() || seq->is_sequence()) && (count->is(Kind::Int) || count->is(Kind::Bool))) {
      const int64_t n = std::max<int64_t>(0, count->as_int());
      const size_t unit = seq->is_string() ? seq->str().size() : seq->items().size();
      if (static_cast<double>(unit) * static_cast<double>(n) > 64.0 * 1024 * 1024)
        throw JinjaError(ErrorKind::Limit, "repetition result too large");
      if (seq->is_string()) {
        std::string out;
        for (int64_t i = 0; i < n; ++i) out += seq->str();
        return Value::string(std::move(out));
      }
      ValueList out;
      for (int64_t i = 0; i < n; ++i) out.insert(out.end(), seq->items().begin(), seq->items().end());
      return Value::list(std::move(out), seq->kind());
    }
  }
  if (op == "%" && a.is_string()) {
    return percent_format(a.str(), b.is(Kind::Tuple) ? b.items() : ValueList{b});
  }
  if (!nums)
    type_error("unsupported operand type(s) for " + op + ": '" + a.type_name() + "' and '" + b.type_name() + "'");
  if (op == "-") return floats ? Value::number(a.as_double() - b.as_double()) : Value::integer(a.as_int() - b.as_int());
  if (op == "/") {
    if (b.as_double() == 0) throw JinjaError(ErrorKind::Type, "division by zero");
    return Value::number(a.as_double() / b.as_double());
  }
  if (op == "//" || op == "%") {
    if (b.as_double() == 0) throw JinjaError(ErrorKind::Type, "integer division or modulo by zero");
    if (floats) {
      const double q = std::floor(a.as_double() / b.as_double());
      return op == "//" ? Value::number(q) : Value::number(a.as_double() - q * b.as_double());
    }
    const int64_t q = floor_div(a.as_int(), b.as_int());
    return op == "//" ? Value::integer(q) : Value::integer(a.as_int() - q * b.as_int());
  }
  if (op == "**") {
    if (!floats && b.as_int() >= 0) {
      int64_t r = 1;
      for (int64_t i = 0; i < b.as_int() && i < 64; ++i) r *= a.as_int();
      return Value::integer(r);
    }
    return Value::number(std::pow(a.as_double(), b.as_double()));
  }
  type_error("unknown operator " + op);
}

}  // namespace

// Python's "text % args" with %s, %d / %i, %r and %%: enough for templates that build strings this way.
Value percent_format(const std::string& f, const ValueList& args) {
  std::string out;
  size_t next = 0;
  for (size_t i = 0; i < f.size(); ++i) {
    if (f[i] != '%' || i + 1 >= f.size()) {
      out += f[i];
      continue;
    }
    const char c = f[++i];
    if (c == '%') {
      out += '%';
      continue;
    }
    if (next >= args.size()) type_error("not enough arguments for format string");
    const Value& v = args[next++];
    if (c == 'd' || c == 'i')
      out += std::to_string(v.as_int());
    else if (c == 'r')
      out += v.repr();
    else
      out += v.to_str();
  }
  return Value::string(std::move(out));
}

Value Renderer::eval(const Expr& e, const FramePtr& scope) {
  try {
    switch (e.kind) {
      case ExprKind::Const:
        return e.value;
      case ExprKind::Name: {
        const Value* v = scope->lookup(e.name);
        return v ? *v : Value::undefined(undefined_name(e.name));
      }
      case ExprKind::ListLit:
      case ExprKind::TupleLit: {
        ValueList items;
        items.reserve(e.args.size());
        for (const auto& a : e.args) items.push_back(eval(*a, scope));
        return Value::list(std::move(items), e.kind == ExprKind::ListLit ? Kind::List : Kind::Tuple);
      }
      case ExprKind::DictLit: {
        Dict d;
        for (const auto& [k, v] : e.items) {
          const Value key = eval(*k, scope);
          d.set(dict_key(key), eval(*v, scope));
        }
        return Value::object(std::move(d));
      }
      case ExprKind::Attr:
        return get_attr(eval(*e.a, scope), e.name);
      case ExprKind::Item:
        return get_item(eval(*e.a, scope), eval(*e.b, scope));
      case ExprKind::Slice: {
        const Value obj = eval(*e.a, scope);
        return slice(obj, e.b ? eval(*e.b, scope) : Value::none(), e.c ? eval(*e.c, scope) : Value::none(),
                     e.args[0] ? eval(*e.args[0], scope) : Value::none());
      }
      case ExprKind::Call:
        return eval_call(e, scope);
      case ExprKind::Filter: {
        Value subject;
        if (e.a) {
          subject = eval(*e.a, scope);
        } else if (const Value* body = scope->lookup("\x01body")) {
          subject = *body;
        }
        CallArgs args = eval_args(e, scope);
        return apply_filter(e.name, subject, args);
      }
      case ExprKind::Test: {
        const Value subject = eval(*e.a, scope);
        CallArgs args = eval_args(e, scope);
        const bool r = apply_test(e.name, subject, args);
        return Value::boolean(e.negated ? !r : r);
      }
      case ExprKind::Neg:
      case ExprKind::Pos: {
        const Value v = eval(*e.a, scope);
        if (v.is_undefined()) undefined_use(v);
        if (!v.is_number()) type_error("bad operand type for unary -: '" + v.type_name() + "'");
        if (e.kind == ExprKind::Pos) return v.is(Kind::Float) ? v : Value::integer(v.as_int());
        return v.is(Kind::Float) ? Value::number(-v.as_double()) : Value::integer(-v.as_int());
      }
      case ExprKind::Not:
        return Value::boolean(!eval(*e.a, scope).truthy());
      case ExprKind::And: {
        Value a = eval(*e.a, scope);
        return a.truthy() ? eval(*e.b, scope) : a;
      }
      case ExprKind::Or: {
        Value a = eval(*e.a, scope);
        return a.truthy() ? a : eval(*e.b, scope);
      }
      case ExprKind::Cond:
        if (eval(*e.a, scope).truthy()) return eval(*e.b, scope);
        return e.c ? eval(*e.c, scope) : Value::undefined("the inline if had no else");
      case ExprKind::Binary:
        return eval_binary(e, scope);
    }
  } catch (const JinjaError& err) {
    if (err.line() > 0) throw;
    throw err.located(e.line, e.column);
  }
  return Value();
}

Value Renderer::eval_binary(const Expr& e, const FramePtr& scope) {
  const std::string& op = e.name;
  const Value a = eval(*e.a, scope);
  const Value b = eval(*e.b, scope);
  if (op == "~") return Value::string(a.to_str() + b.to_str());
  if (op == "==") return Value::boolean(values_equal(a, b));
  if (op == "!=") return Value::boolean(!values_equal(a, b));
  if (op == "<" || op == ">" || op == "<=" || op == ">=") {
    if (a.is_undefined()) undefined_use(a);
    if (b.is_undefined()) undefined_use(b);
    if (op == "<") return Value::boolean(value_less(a, b));
    if (op == ">") return Value::boolean(value_less(b, a));
    if (op == "<=") return Value::boolean(!value_less(b, a));
    return Value::boolean(!value_less(a, b));
  }
  if (op == "in") return Value::boolean(contains(b, a));
  if (op == "not in") return Value::boolean(!contains(b, a));
  return arithmetic(op, a, b);
}

CallArgs Renderer::eval_args(const Expr& e, const FramePtr& scope) {
  CallArgs args;
  args.positional.reserve(e.args.size());
  for (const auto& a : e.args) args.positional.push_back(eval(*a, scope));
  if (e.star_args) {
    for (auto& v : iterate(eval(*e.star_args, scope))) args.positional.push_back(std::move(v));
  }
  for (const auto& [k, v] : e.kwargs) args.keyword.emplace_back(k, eval(*v, scope));
  if (e.star_kwargs) {
    const Value kw = eval(*e.star_kwargs, scope);
    if (!kw.is_mapping()) type_error("argument after ** must be a mapping");
    for (const auto& [k, v] : kw.dict().items) args.keyword.emplace_back(k, v);
  }
  return args;
}

Value Renderer::eval_call(const Expr& e, const FramePtr& scope) {
  const Value fn = eval(*e.a, scope);
  CallArgs args = eval_args(e, scope);
  return call(fn, args);
}

Value Renderer::call(const Value& fn, CallArgs& args) {
  if (fn.is_undefined()) undefined_use(fn);
  if (!fn.is(Kind::Callable)) type_error("'" + fn.type_name() + "' object is not callable");
  return fn.callable().call(args);
}

}  // namespace tessera::jinja
