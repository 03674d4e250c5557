// Jinja parser, statements: text, {{ }}, if/elif/else, for (unpacking, filter, else), set (value, namespace
// attribute, block), macro, call, filter blocks, break/continue and transformers' generation tag.
#include <fmt/format.h>

#include "jinja/error.h"
#include "jinja/parser.h"

namespace tessera::jinja {

namespace {

StmtPtr make_stmt(StmtKind kind, const Token& at) {
  auto s = std::make_unique<Stmt>();
  s->kind = kind;
  s->line = at.line;
  s->column = at.column;
  return s;
}

}  // namespace

Body Parser::parse_template() {
  Body body = parse_body({});
  if (current().type != TokenType::End) error("unexpected end tag");
  return body;
}

void Parser::expect_block_end() {
  if (current().type != TokenType::BlockEnd) error("expected end of statement block");
  next();
}

// Parses statements until one of end_tags (left unconsumed: the current token is then its name after `{%`).
Body Parser::parse_body(const std::vector<std::string_view>& end_tags) {
  Body body;
  while (true) {
    const Token& t = current();
    if (t.type == TokenType::End) {
      if (!end_tags.empty()) {
        std::string wanted;
        for (auto tag : end_tags) wanted += fmt::format("{}'{}'", wanted.empty() ? "" : " or ", tag);
        error("unexpected end of template, expected " + wanted);
      }
      return body;
    }
    if (t.type == TokenType::Data) {
      auto s = make_stmt(StmtKind::Text, t);
      s->text = next().text;
      body.push_back(std::move(s));
    } else if (t.type == TokenType::VarBegin) {
      auto s = make_stmt(StmtKind::Output, next());
      s->expr = parse_tuple();
      if (current().type != TokenType::VarEnd) error("expected end of print statement");
      next();
      body.push_back(std::move(s));
    } else if (t.type == TokenType::BlockBegin) {
      const Token& name = peek();
      if (name.type == TokenType::Name) {
        for (auto tag : end_tags) {
          if (name.text == tag) {
            next();
            return body;
          }
        }
      }
      next();
      body.push_back(parse_statement());
    } else {
      error("unexpected token");
    }
  }
}

StmtPtr Parser::parse_statement() {
  const Token& t = current();
  if (t.type != TokenType::Name) error("expected a statement name");
  struct Guard {
    int& d;
    ~Guard() { --d; }
  } guard{++depth_};
  if (depth_ > 200) throw JinjaError(ErrorKind::Limit, "blocks nested too deeply", t.line, t.column);
  const std::string& n = t.text;
  if (n == "if") return parse_if();
  if (n == "for") return parse_for();
  if (n == "set") return parse_set();
  if (n == "macro") return parse_macro();
  if (n == "call") return parse_call_block();
  if (n == "filter") return parse_filter_block();
  if (n == "break" || n == "continue") {
    auto s = make_stmt(n == "break" ? StmtKind::Break : StmtKind::Continue, next());
    expect_block_end();
    return s;
  }
  if (n == "generation") {  // transformers' AssistantTracker tag: renders its body unchanged
    auto s = make_stmt(StmtKind::Scope, next());
    expect_block_end();
    s->body = parse_body({"endgeneration"});
    next();
    expect_block_end();
    return s;
  }
  if (n == "include" || n == "import" || n == "from" || n == "extends")
    throw JinjaError(ErrorKind::Security, "'" + n + "' is not available: chat templates cannot read other files",
                     t.line, t.column);
  error("unknown statement '" + n + "'");
}

StmtPtr Parser::parse_if() {
  auto s = make_stmt(StmtKind::If, next());
  s->conditions.push_back(parse_tuple());
  expect_block_end();
  while (true) {
    s->bodies.push_back(parse_body({"elif", "else", "endif"}));
    const std::string tag = next().text;
    if (tag == "elif") {
      s->conditions.push_back(parse_tuple());
      expect_block_end();
    } else if (tag == "else") {
      expect_block_end();
      s->bodies.push_back(parse_body({"endif"}));
      next();
      expect_block_end();
      return s;
    } else {
      expect_block_end();
      return s;
    }
  }
}

void Parser::parse_assign_target(Stmt& s) {
  // name | name.attr | name, name, ...
  s.targets.push_back(expect_name());
  if (skip_op(".")) {
    s.target_attr = expect_name();
    return;
  }
  while (skip_op(",")) {
    if (current().type != TokenType::Name) break;
    s.targets.push_back(expect_name());
  }
}

StmtPtr Parser::parse_for() {
  auto s = make_stmt(StmtKind::For, next());
  const bool parenthesised = skip_op("(");
  parse_assign_target(*s);
  if (parenthesised) expect_op(")");
  if (!s->target_attr.empty()) error("a for loop cannot assign to an attribute");
  if (!skip_name("in")) error("expected 'in'");
  s->expr = parse_tuple(false, false, false);  // no inline `if`: a loop filter may follow the iterable
  if (skip_name("if")) s->filter = parse_expression();
  if (at_name("recursive")) error("recursive loops are not supported");
  expect_block_end();
  s->body = parse_body({"else", "endfor"});
  if (next().text == "else") {
    expect_block_end();
    s->else_body = parse_body({"endfor"});
    next();
  }
  expect_block_end();
  return s;
}

StmtPtr Parser::parse_set() {
  const Token& at = next();
  auto s = make_stmt(StmtKind::Set, at);
  parse_assign_target(*s);
  if (skip_op("=")) {
    s->expr = parse_tuple();
    expect_block_end();
    return s;
  }
  s->kind = StmtKind::SetBlock;
  if (s->targets.size() != 1 || !s->target_attr.empty()) error("a set block assigns one name");
  if (at_op("|")) s->filter = parse_filter(nullptr, false);
  expect_block_end();
  s->body = parse_body({"endset"});
  next();
  expect_block_end();
  return s;
}

void Parser::parse_params(std::vector<MacroParam>& params) {
  expect_op("(");
  while (!at_op(")")) {
    if (!params.empty()) expect_op(",");
    MacroParam p;
    p.name = expect_name();
    if (skip_op("=")) p.default_value = parse_expression();
    params.push_back(std::move(p));
  }
  expect_op(")");
}

StmtPtr Parser::parse_macro() {
  auto s = make_stmt(StmtKind::Macro, next());
  s->name = expect_name();
  parse_params(s->params);
  expect_block_end();
  s->body = parse_body({"endmacro"});
  next();
  expect_block_end();
  return s;
}

StmtPtr Parser::parse_call_block() {
  auto s = make_stmt(StmtKind::CallBlock, next());
  if (at_op("(")) parse_params(s->params);
  s->expr = parse_expression();
  if (s->expr->kind != ExprKind::Call) error("expected a call");
  expect_block_end();
  s->body = parse_body({"endcall"});
  next();
  expect_block_end();
  return s;
}

StmtPtr Parser::parse_filter_block() {
  auto s = make_stmt(StmtKind::FilterBlock, next());
  s->filter = parse_filter(nullptr, true);
  expect_block_end();
  s->body = parse_body({"endfilter"});
  next();
  expect_block_end();
  return s;
}

}  // namespace tessera::jinja
