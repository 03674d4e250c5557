// Jinja parser: tokens to a statement tree (statements in parser_stmt.cpp, expressions in parser_expr.cpp).
#pragma once

#include <initializer_list>
#include <string>
#include <string_view>
#include <vector>

#include "jinja/ast.h"
#include "jinja/lexer.h"

namespace tessera::jinja {

class Parser {
 public:
  explicit Parser(std::vector<Token> tokens) : tokens_(std::move(tokens)) {}
  Body parse_template();

  // Expressions (parser_expr.cpp).
  ExprPtr parse_expression(bool with_condexpr = true);
  ExprPtr parse_tuple(bool simplified = false, bool allow_empty = false, bool with_condexpr = true);

 private:
  // Statements (parser_stmt.cpp).
  Body parse_body(const std::vector<std::string_view>& end_tags);
  StmtPtr parse_statement();
  StmtPtr parse_if();
  StmtPtr parse_for();
  StmtPtr parse_set();
  StmtPtr parse_macro();
  StmtPtr parse_call_block();
  StmtPtr parse_filter_block();
  void parse_params(std::vector<MacroParam>& params);
  void parse_assign_target(Stmt& s);

  ExprPtr parse_or();
  ExprPtr parse_and();
  ExprPtr parse_not();
  ExprPtr parse_compare();
  ExprPtr parse_math1();
  ExprPtr parse_concat();
  ExprPtr parse_math2();
  ExprPtr parse_pow();
  // One left-associative level: operands from `operand` joined by any of `ops` (operators; names for and/or).
  template <typename Operand>
  ExprPtr parse_left(ExprKind kind, std::initializer_list<std::string_view> ops, Operand operand);
  ExprPtr parse_unary(bool with_filter = true);
  ExprPtr parse_primary();
  ExprPtr parse_call(ExprPtr callee);  // callee(args...), at its "("
  ExprPtr parse_postfix(ExprPtr node);
  ExprPtr parse_filter_expr(ExprPtr node);
  ExprPtr parse_subscript(ExprPtr node);
  ExprPtr parse_filter(ExprPtr node, bool start_inline);
  ExprPtr parse_test(ExprPtr node);
  void parse_call_args(Expr& call);
  ExprPtr parse_list();
  ExprPtr parse_dict();

  const Token& current() const { return tokens_[pos_]; }
  const Token& peek(size_t ahead = 1) const;
  const Token& next();
  bool at_op(std::string_view op) const;
  bool at_name(std::string_view name) const;
  bool skip_op(std::string_view op);
  bool skip_name(std::string_view name);
  void expect_op(std::string_view op);
  std::string expect_name();
  void expect_block_end();
  [[noreturn]] void error(const std::string& message) const;
  ExprPtr make(ExprKind kind, const Token& at) const;

  std::vector<Token> tokens_;
  size_t pos_ = 0;
  int depth_ = 0;  // nesting of expressions and blocks, bounded so a hostile template cannot exhaust the stack
};

}  // namespace tessera::jinja
