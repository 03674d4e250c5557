// Jinja parser, expressions: Jinja2's precedence (condexpr > or > and > not > compare > + - > ~ > * / // % > **
// > unary > postfix/filters), literals, calls, subscripts, filters and tests.
#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>

#include "jinja/error.h"
#include "jinja/parser.h"

namespace tessera::jinja {

namespace {

constexpr int kMaxDepth = 200;

struct DepthGuard {
  int& depth;
  DepthGuard(int& d, int line) : depth(d) {
    if (++depth > kMaxDepth) throw JinjaError(ErrorKind::Limit, "expressions or blocks nested too deeply", line);
  }
  ~DepthGuard() { --depth; }
};

}  // namespace

const Token& Parser::peek(size_t ahead) const { return tokens_[std::min(pos_ + ahead, tokens_.size() - 1)]; }
const Token& Parser::next() {
  const Token& t = tokens_[pos_];
  if (pos_ + 1 < tokens_.size()) ++pos_;
  return t;
}
bool Parser::at_op(std::string_view op) const { return current().type == TokenType::Operator && current().text == op; }
bool Parser::at_name(std::string_view name) const {
  return current().type == TokenType::Name && current().text == name;
}
bool Parser::skip_op(std::string_view op) {
  if (!at_op(op)) return false;
  next();
  return true;
}
bool Parser::skip_name(std::string_view name) {
  if (!at_name(name)) return false;
  next();
  return true;
}
void Parser::expect_op(std::string_view op) {
  if (!skip_op(op)) error(fmt::format("expected '{}'", op));
}
std::string Parser::expect_name() {
  if (current().type != TokenType::Name) error("expected a name");
  return next().text;
}
void Parser::error(const std::string& message) const {
  const Token& t = current();
  std::string got;
  switch (t.type) {
    case TokenType::End:
      got = "end of template";
      break;
    case TokenType::BlockEnd:
      got = "end of statement block";
      break;
    case TokenType::VarEnd:
      got = "end of print statement";
      break;
    case TokenType::Data:
      got = "template text";
      break;
    default:
      got = fmt::format("'{}'", t.text);
  }
  throw JinjaError(ErrorKind::Syntax, fmt::format("{}, got {}", message, got), t.line, t.column);
}
ExprPtr Parser::make(ExprKind kind, const Token& at) const {
  auto e = std::make_unique<Expr>();
  e->kind = kind;
  e->line = at.line;
  e->column = at.column;
  return e;
}

ExprPtr Parser::parse_expression(bool with_condexpr) {
  DepthGuard guard(depth_, current().line);
  if (!with_condexpr) return parse_or();
  ExprPtr e = parse_or();
  while (at_name("if")) {
    auto cond = make(ExprKind::Cond, next());
    cond->a = parse_or();
    cond->b = std::move(e);
    if (skip_name("else")) cond->c = parse_expression();
    e = std::move(cond);
  }
  return e;
}

template <typename Operand>
ExprPtr Parser::parse_left(ExprKind kind, std::initializer_list<std::string_view> ops, Operand operand) {
  // and/or are name tokens and need no operator name; the rest are operator tokens, kept as the node's name.
  const TokenType type = kind == ExprKind::Binary ? TokenType::Operator : TokenType::Name;
  ExprPtr e = operand();
  while (current().type == type && std::find(ops.begin(), ops.end(), current().text) != ops.end()) {
    const Token& at = next();
    auto n = make(kind, at);
    if (kind == ExprKind::Binary) n->name = at.text;
    n->a = std::move(e);
    n->b = operand();
    e = std::move(n);
  }
  return e;
}

ExprPtr Parser::parse_or() {
  return parse_left(ExprKind::Or, {"or"}, [this] { return parse_and(); });
}

ExprPtr Parser::parse_and() {
  return parse_left(ExprKind::And, {"and"}, [this] { return parse_not(); });
}

ExprPtr Parser::parse_not() {
  if (at_name("not")) {
    DepthGuard guard(depth_, current().line);
    auto n = make(ExprKind::Not, next());
    n->a = parse_not();
    return n;
  }
  return parse_compare();
}

ExprPtr Parser::parse_compare() {
  ExprPtr e = parse_math1();
  while (true) {
    std::string op;
    const Token& at = current();
    if (current().type == TokenType::Operator &&
        (at_op("==") || at_op("!=") || at_op("<") || at_op(">") || at_op("<=") || at_op(">="))) {
      op = next().text;
    } else if (at_name("in")) {
      next();
      op = "in";
    } else if (at_name("not") && peek().type == TokenType::Name && peek().text == "in") {
      next();
      next();
      op = "not in";
    } else {
      return e;
    }
    auto n = make(ExprKind::Binary, at);
    n->name = op;
    n->a = std::move(e);
    n->b = parse_math1();
    e = std::move(n);
  }
}

ExprPtr Parser::parse_math1() {
  return parse_left(ExprKind::Binary, {"+", "-"}, [this] { return parse_concat(); });
}

ExprPtr Parser::parse_concat() {
  return parse_left(ExprKind::Binary, {"~"}, [this] { return parse_math2(); });
}

ExprPtr Parser::parse_math2() {
  return parse_left(ExprKind::Binary, {"*", "/", "//", "%"}, [this] { return parse_pow(); });
}

ExprPtr Parser::parse_pow() {
  return parse_left(ExprKind::Binary, {"**"}, [this] { return parse_unary(); });
}

ExprPtr Parser::parse_unary(bool with_filter) {
  DepthGuard guard(depth_, current().line);
  ExprPtr e;
  if (at_op("-") || at_op("+")) {
    const ExprKind kind = at_op("-") ? ExprKind::Neg : ExprKind::Pos;
    e = make(kind, next());
    e->a = parse_unary(false);
  } else {
    e = parse_primary();
  }
  e = parse_postfix(std::move(e));
  if (with_filter) e = parse_filter_expr(std::move(e));
  return e;
}

ExprPtr Parser::parse_primary() {
  const Token& t = current();
  switch (t.type) {
    case TokenType::Name: {
      next();
      auto e = make(ExprKind::Const, t);
      if (t.text == "true" || t.text == "True") {
        e->value = Value::boolean(true);
      } else if (t.text == "false" || t.text == "False") {
        e->value = Value::boolean(false);
      } else if (t.text == "none" || t.text == "None") {
        e->value = Value::none();
      } else {
        e->kind = ExprKind::Name;
        e->name = t.text;
      }
      return e;
    }
    case TokenType::String: {
      auto e = make(ExprKind::Const, t);
      std::string s = next().text;
      while (current().type == TokenType::String) s += next().text;  // adjacent literals concatenate
      e->value = Value::string(std::move(s));
      return e;
    }
    case TokenType::Integer: {
      auto e = make(ExprKind::Const, t);
      e->value = Value::integer(std::strtoll(next().text.c_str(), nullptr, 10));
      return e;
    }
    case TokenType::Float: {
      auto e = make(ExprKind::Const, t);
      e->value = Value::number(std::strtod(next().text.c_str(), nullptr));
      return e;
    }
    case TokenType::Operator:
      if (t.text == "(") {
        next();
        ExprPtr e = parse_tuple(false, true);
        expect_op(")");
        return e;
      }
      if (t.text == "[") return parse_list();
      if (t.text == "{") return parse_dict();
      break;
    default:
      break;
  }
  error("expected an expression");
}

// A comma-separated expression list; one element without a trailing comma is the element itself. `simplified`
// restricts elements to primaries (for-loop targets); `allow_empty` allows "()".
ExprPtr Parser::parse_tuple(bool simplified, bool allow_empty, bool with_condexpr) {
  const Token& start = current();
  auto tuple = make(ExprKind::TupleLit, start);
  bool trailing_comma = false;
  while (true) {
    if (!tuple->args.empty()) {
      if (!skip_op(",")) break;
      trailing_comma = true;
    }
    if (at_op(")") || at_op("]") || at_op("}") || current().type == TokenType::BlockEnd ||
        current().type == TokenType::VarEnd || at_name("in") || at_op("=")) {
      break;
    }
    tuple->args.push_back(simplified ? parse_primary() : parse_expression(with_condexpr));
    trailing_comma = false;
  }
  if (tuple->args.empty() && !allow_empty) error("expected an expression");
  if (tuple->args.size() == 1 && !trailing_comma) return std::move(tuple->args[0]);
  return tuple;
}

ExprPtr Parser::parse_list() {
  auto e = make(ExprKind::ListLit, next());
  while (!at_op("]")) {
    if (!e->args.empty()) {
      expect_op(",");
      if (at_op("]")) break;
    }
    e->args.push_back(parse_expression());
  }
  expect_op("]");
  return e;
}

ExprPtr Parser::parse_dict() {
  auto e = make(ExprKind::DictLit, next());
  while (!at_op("}")) {
    if (!e->items.empty()) {
      expect_op(",");
      if (at_op("}")) break;
    }
    ExprPtr key = parse_expression();
    expect_op(":");
    e->items.emplace_back(std::move(key), parse_expression());
  }
  expect_op("}");
  return e;
}

ExprPtr Parser::parse_call(ExprPtr callee) {
  auto call = make(ExprKind::Call, current());
  call->a = std::move(callee);
  parse_call_args(*call);
  return call;
}

ExprPtr Parser::parse_postfix(ExprPtr node) {
  while (true) {
    if (at_op(".") || at_op("[")) {
      node = parse_subscript(std::move(node));
    } else if (at_op("(")) {
      node = parse_call(std::move(node));
    } else {
      return node;
    }
  }
}

ExprPtr Parser::parse_filter_expr(ExprPtr node) {
  while (true) {
    if (at_op("|")) {
      node = parse_filter(std::move(node), false);
    } else if (at_name("is")) {
      node = parse_test(std::move(node));
    } else if (at_op("(")) {
      node = parse_call(std::move(node));
    } else {
      return node;
    }
  }
}

ExprPtr Parser::parse_subscript(ExprPtr node) {
  const Token& t = next();
  if (t.text == ".") {
    const Token& attr = current();
    if (attr.type == TokenType::Name) {
      auto e = make(ExprKind::Attr, t);
      e->a = std::move(node);
      e->name = next().text;
      return e;
    }
    if (attr.type == TokenType::Integer) {
      auto e = make(ExprKind::Item, t);
      e->a = std::move(node);
      e->b = make(ExprKind::Const, attr);
      e->b->value = Value::integer(std::strtoll(next().text.c_str(), nullptr, 10));
      return e;
    }
    error("expected a name after '.'");
  }
  // '[': an index, or a slice with up to three parts.
  ExprPtr parts[3];
  bool is_slice = false;
  int part = 0;
  while (!at_op("]")) {
    if (at_op(":")) {
      next();
      is_slice = true;
      if (++part > 2) error("too many ':' in a slice");
      continue;
    }
    if (parts[part]) error("expected ']'");
    parts[part] = parse_expression();
  }
  expect_op("]");
  auto e = make(is_slice ? ExprKind::Slice : ExprKind::Item, t);
  e->a = std::move(node);
  if (!is_slice && !parts[0]) error("expected an index");
  e->b = std::move(parts[0]);
  e->c = std::move(parts[1]);
  if (is_slice) e->args.push_back(std::move(parts[2]));
  return e;
}

void Parser::parse_call_args(Expr& call) {
  expect_op("(");
  bool first = true;
  while (!at_op(")")) {
    if (!first) {
      expect_op(",");
      if (at_op(")")) break;
    }
    first = false;
    if (skip_op("*")) {
      call.star_args = parse_expression();
    } else if (skip_op("**")) {
      call.star_kwargs = parse_expression();
    } else if (current().type == TokenType::Name && peek().type == TokenType::Operator && peek().text == "=") {
      std::string key = next().text;
      next();
      call.kwargs.emplace_back(std::move(key), parse_expression());
    } else {
      if (!call.kwargs.empty()) error("positional argument after keyword argument");
      call.args.push_back(parse_expression());
    }
  }
  expect_op(")");
}

ExprPtr Parser::parse_filter(ExprPtr node, bool start_inline) {
  if (!start_inline) expect_op("|");
  while (true) {
    const Token& at = current();
    auto f = make(ExprKind::Filter, at);
    f->name = expect_name();
    while (skip_op(".")) f->name = fmt::format("{}.{}", f->name, expect_name());
    f->a = std::move(node);
    if (at_op("(")) parse_call_args(*f);
    node = std::move(f);
    if (!skip_op("|")) return node;
  }
}

ExprPtr Parser::parse_test(ExprPtr node) {
  auto t = make(ExprKind::Test, next());  // 'is'
  t->negated = skip_name("not");
  t->name = expect_name();
  while (skip_op(".")) t->name = fmt::format("{}.{}", t->name, expect_name());
  t->a = std::move(node);
  const Token& c = current();
  if (at_op("(")) {
    parse_call_args(*t);
  } else if ((c.type == TokenType::Name && c.text != "else" && c.text != "or" && c.text != "and" && c.text != "if" &&
              c.text != "is" && c.text != "in" && c.text != "not") ||
             c.type == TokenType::String || c.type == TokenType::Integer || c.type == TokenType::Float || at_op("[") ||
             at_op("{")) {
    ExprPtr arg = parse_primary();
    t->args.push_back(parse_postfix(std::move(arg)));
  }
  return t;
}

}  // namespace tessera::jinja
