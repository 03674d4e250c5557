// The Jinja tree-walking renderer: scopes, statements (renderer.cpp) and expressions (eval.cpp), with the
// sandbox bounds counted as it goes.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "jinja/ast.h"
#include "jinja/template.h"
#include "jinja/value.h"

namespace tessera::jinja {

// One variable scope; lookups walk to the parent (for bodies, macros and call blocks open a new one).
struct Frame {
  Dict vars;
  std::shared_ptr<Frame> parent;
  explicit Frame(std::shared_ptr<Frame> p = nullptr) : parent(std::move(p)) {}
  const Value* lookup(std::string_view name) const;
};
using FramePtr = std::shared_ptr<Frame>;

enum class Flow { Normal, Break, Continue };

class Renderer {
 public:
  explicit Renderer(const RenderOptions& options);
  ~Renderer();
  Renderer(const Renderer&) = delete;
  Renderer& operator=(const Renderer&) = delete;
  // Namespaces are mutable and may come to hold themselves (ns.self = ns): the renderer empties them all at the
  // end so that such reference cycles are freed.
  void track_namespace(const Value& ns) { namespaces_.push_back(ns); }
  std::string render(const Body& body, const nlohmann::ordered_json& context);

  Value eval(const Expr& e, const FramePtr& scope);
  Value call(const Value& fn, CallArgs& args);
  Value apply_filter(const std::string& name, const Value& v, CallArgs& args);  // filters.cpp
  bool apply_test(const std::string& name, const Value& v, CallArgs& args);     // tests.cpp
  const DateTime& now() const { return now_; }
  void count_iteration();
  const RenderLimits& limits() const { return options_.limits; }

 private:
  Flow exec(const Body& body, const FramePtr& scope);
  Flow exec_stmt(const Stmt& s, const FramePtr& scope);
  Flow exec_for(const Stmt& s, const FramePtr& scope);
  void exec_set(const Stmt& s, const FramePtr& scope);
  std::string capture(const Body& body, const FramePtr& scope);
  Value make_macro(const Stmt& s, const FramePtr& scope);
  Value make_caller(const Stmt& s, const FramePtr& scope);
  void write(std::string_view text);

  // eval.cpp
  Value eval_binary(const Expr& e, const FramePtr& scope);
  Value eval_call(const Expr& e, const FramePtr& scope);
  CallArgs eval_args(const Expr& e, const FramePtr& scope);

  RenderOptions options_;
  DateTime now_;
  std::string* out_ = nullptr;
  int64_t iterations_ = 0;
  int call_depth_ = 0;
  std::vector<Value> namespaces_;
};

// Python semantics shared by the renderer, filters and methods (eval.cpp / methods.cpp).
Value get_attr(const Value& obj, const std::string& name);
Value get_item(const Value& obj, const Value& key);
Value slice(const Value& obj, const Value& start, const Value& stop, const Value& step);
// Python's "text % args" (%s, %d / %i, %r, %%): the % operator and the format filter.
Value percent_format(const std::string& format, const ValueList& args);
ValueList iterate(const Value& v);
bool contains(const Value& container, const Value& needle);
size_t length(const Value& v);
Value make_globals_value(const std::string& name, Renderer& r);  // range, namespace, dict, raise_exception, ...
std::string strip_chars(const std::string& s, const Value* chars, bool left, bool right);

}  // namespace tessera::jinja
