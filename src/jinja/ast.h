// Jinja syntax tree: expressions and statements, each with the template line and column it came from.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "jinja/value.h"

namespace tessera::jinja {

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

enum class ExprKind {
  Const,     // value
  Name,      // name
  ListLit,   // args
  TupleLit,  // args
  DictLit,   // kwargs-like pairs in items
  Attr,      // a.name
  Item,      // a[b]
  Slice,     // a[b:c:d]; absent parts are null
  Call,      // a(args, kwargs)
  Filter,    // a | name(args, kwargs); a is null inside {% filter %}
  Test,      // a is [not] name(args)
  Neg,       // -a
  Pos,       // +a
  Not,       // not a
  And,       // a and b
  Or,        // a or b
  Binary,    // a op b: + - * / // % ** ~ == != < > <= >= in, "not in"
  Cond,      // b if a else c
};

struct Expr {
  ExprKind kind;
  int line = 0;
  int column = 0;
  Value value;
  std::string name;      // Name, Attr, Filter/Test name, Binary operator
  bool negated = false;  // Test: `is not`
  ExprPtr a, b, c;
  std::vector<ExprPtr> args;
  std::vector<std::pair<std::string, ExprPtr>> kwargs;  // Call/Filter/Test keyword arguments
  std::vector<std::pair<ExprPtr, ExprPtr>> items;       // DictLit
  ExprPtr star_args, star_kwargs;                       // f(*a, **k)
};

struct Stmt;
using StmtPtr = std::unique_ptr<Stmt>;
using Body = std::vector<StmtPtr>;

enum class StmtKind { Text, Output, If, For, Set, SetBlock, Macro, CallBlock, FilterBlock, Break, Continue, Scope };

struct MacroParam {
  std::string name;
  ExprPtr default_value;  // null when required
};

struct Stmt {
  StmtKind kind;
  int line = 0;
  int column = 0;
  std::string text;  // Text; Set/SetBlock/Macro/For: unused
  ExprPtr expr;      // Output value, For iterable, Set value, CallBlock call, FilterBlock filter chain
  // If: conditions[i] guards bodies[i]; a trailing body without a condition is the else.
  std::vector<ExprPtr> conditions;
  std::vector<Body> bodies;
  // For/Set: the assigned names (several for tuple unpacking); Set on a namespace: target_ns.target_attr.
  std::vector<std::string> targets;
  std::string target_attr;
  ExprPtr filter;  // For: `if` filter; SetBlock: optional filter chain
  Body body;
  Body else_body;  // For: runs when nothing was iterated
  // Macro / CallBlock: the name (Macro) and parameters.
  std::string name;
  std::vector<MacroParam> params;
};

}  // namespace tessera::jinja
