// The Jinja renderer, statements: output, if, for (loop variable, filter, else, break/continue), set, macros,
// call and filter blocks, with the sandbox bounds on loop iterations, call depth and output size.
#include "jinja/renderer.h"

#include <fmt/format.h>

#include "jinja/error.h"

namespace tessera::jinja {

const Value* Frame::lookup(std::string_view name) const {
  for (const Frame* f = this; f; f = f->parent.get()) {
    if (const Value* v = f->vars.find(name)) return v;
  }
  return nullptr;
}

Renderer::Renderer(const RenderOptions& options) : options_(options), now_(options.now ? *options.now : local_now()) {}

std::string Renderer::render(const Body& body, const nlohmann::ordered_json& context) {
  auto globals = std::make_shared<Frame>();
  for (const char* name : {"range", "namespace", "dict", "raise_exception", "strftime_now", "joiner"})
    globals->vars.set(name, make_globals_value(name, *this));
  if (context.is_object()) {
    for (const auto& [k, v] : context.items()) globals->vars.set(k, Value::from_json(v));
  }
  auto root = std::make_shared<Frame>(globals);
  std::string out;
  out_ = &out;
  exec(body, root);
  return out;
}

Renderer::~Renderer() {
  for (auto& ns : namespaces_) ns.mutable_namespace().items.clear();
}

void Renderer::write(std::string_view text) {
  if (out_->size() + text.size() > options_.limits.max_output_bytes)
    throw JinjaError(ErrorKind::Limit,
                     fmt::format("the output would exceed {} bytes", options_.limits.max_output_bytes));
  out_->append(text);
}

void Renderer::count_iteration() {
  if (++iterations_ > options_.limits.max_loop_iterations)
    throw JinjaError(ErrorKind::Limit,
                     fmt::format("more than {} loop iterations", options_.limits.max_loop_iterations));
}

Flow Renderer::exec(const Body& body, const FramePtr& scope) {
  for (const auto& s : body) {
    const Flow f = exec_stmt(*s, scope);
    if (f != Flow::Normal) return f;
  }
  return Flow::Normal;
}

std::string Renderer::capture(const Body& body, const FramePtr& scope) {
  std::string buffer;
  std::string* saved = out_;
  out_ = &buffer;
  try {
    exec(body, scope);
  } catch (...) {
    out_ = saved;
    throw;
  }
  out_ = saved;
  return buffer;
}

Flow Renderer::exec_stmt(const Stmt& s, const FramePtr& scope) {
  try {
    switch (s.kind) {
      case StmtKind::Text:
        write(s.text);
        return Flow::Normal;
      case StmtKind::Output:
        write(eval(*s.expr, scope).to_str());
        return Flow::Normal;
      case StmtKind::If:
        for (size_t i = 0; i < s.bodies.size(); ++i) {
          if (i >= s.conditions.size() || eval(*s.conditions[i], scope).truthy()) return exec(s.bodies[i], scope);
        }
        return Flow::Normal;
      case StmtKind::For:
        return exec_for(s, scope);
      case StmtKind::Set:
        exec_set(s, scope);
        return Flow::Normal;
      case StmtKind::SetBlock: {
        Value v = Value::string(capture(s.body, scope));
        if (s.filter) {
          auto holder = std::make_shared<Frame>(scope);
          holder->vars.set("\x01body", v);
          // The filter chain's innermost subject is null: it reads the captured text from this frame.
          v = eval(*s.filter, holder);
        }
        scope->vars.set(s.targets[0], std::move(v));
        return Flow::Normal;
      }
      case StmtKind::Macro:
        scope->vars.set(s.name, make_macro(s, scope));
        return Flow::Normal;
      case StmtKind::CallBlock: {
        CallArgs args = eval_args(*s.expr, scope);
        args.keyword.emplace_back("caller", make_caller(s, scope));
        write(call(eval(*s.expr->a, scope), args).to_str());
        return Flow::Normal;
      }
      case StmtKind::FilterBlock: {
        auto holder = std::make_shared<Frame>(scope);
        holder->vars.set("\x01body", Value::string(capture(s.body, scope)));
        write(eval(*s.filter, holder).to_str());
        return Flow::Normal;
      }
      case StmtKind::Break:
        return Flow::Break;
      case StmtKind::Continue:
        return Flow::Continue;
      case StmtKind::Scope:
        return exec(s.body, scope);
    }
  } catch (const JinjaError& e) {
    if (e.line() > 0) throw;
    throw e.located(s.line, s.column);
  }
  return Flow::Normal;
}

namespace {

void unpack(Frame& frame, const std::vector<std::string>& targets, const Value& v) {
  if (targets.size() == 1) {
    frame.vars.set(targets[0], v);
    return;
  }
  const ValueList items = iterate(v);
  if (items.size() != targets.size())
    type_error(fmt::format("cannot unpack {} values into {} names", items.size(), targets.size()));
  for (size_t i = 0; i < targets.size(); ++i) frame.vars.set(targets[i], items[i]);
}

}  // namespace

Flow Renderer::exec_for(const Stmt& s, const FramePtr& scope) {
  const Value iterable = eval(*s.expr, scope);
  ValueList items = iterate(iterable);
  if (s.filter) {
    ValueList kept;
    for (auto& item : items) {
      count_iteration();
      auto f = std::make_shared<Frame>(scope);
      unpack(*f, s.targets, item);
      if (eval(*s.filter, f).truthy()) kept.push_back(std::move(item));
    }
    items = std::move(kept);
  }
  const auto n = static_cast<int64_t>(items.size());
  for (int64_t i = 0; i < n; ++i) {
    count_iteration();
    auto f = std::make_shared<Frame>(scope);
    unpack(*f, s.targets, items[static_cast<size_t>(i)]);
    Dict loop;
    loop.items.reserve(12);
    loop.set("index", Value::integer(i + 1));
    loop.set("index0", Value::integer(i));
    loop.set("revindex", Value::integer(n - i));
    loop.set("revindex0", Value::integer(n - i - 1));
    loop.set("first", Value::boolean(i == 0));
    loop.set("last", Value::boolean(i == n - 1));
    loop.set("length", Value::integer(n));
    loop.set("depth", Value::integer(1));
    loop.set("depth0", Value::integer(0));
    loop.set("previtem", i > 0 ? items[static_cast<size_t>(i - 1)] : Value::undefined("there is no previous item"));
    loop.set("nextitem", i + 1 < n ? items[static_cast<size_t>(i + 1)] : Value::undefined("there is no next item"));
    loop.set("cycle", Value::function("loop.cycle", [i](CallArgs& a) {
               if (a.positional.empty()) type_error("no items for cycling given");
               return a.positional[static_cast<size_t>(i) % a.positional.size()];
             }));
    f->vars.set("loop", Value::object(std::move(loop)));
    const Flow flow = exec(s.body, f);
    if (flow == Flow::Break) break;
  }
  if (n == 0 && !s.else_body.empty()) return exec(s.else_body, scope);
  return Flow::Normal;
}

void Renderer::exec_set(const Stmt& s, const FramePtr& scope) {
  Value v = eval(*s.expr, scope);
  if (!s.target_attr.empty()) {
    const Value* target = scope->lookup(s.targets[0]);
    if (!target || !target->is(Kind::Namespace))
      throw JinjaError(ErrorKind::Type, "cannot assign attribute on non-namespace object");
    target->mutable_namespace().set(s.target_attr, std::move(v));
    return;
  }
  unpack(*scope, s.targets, v);
}

Value Renderer::make_macro(const Stmt& s, const FramePtr& scope) {
  const Stmt* macro = &s;
  std::weak_ptr<Frame> weak = scope;  // the macro lives in this frame: a strong pointer would be a cycle
  return Value::function(s.name, [this, macro, weak](CallArgs& args) {
    FramePtr def = weak.lock();
    if (!def) throw JinjaError(ErrorKind::Type, "macro '" + macro->name + "' called after its scope ended");
    if (++call_depth_ > options_.limits.max_call_depth) {
      --call_depth_;
      throw JinjaError(ErrorKind::Limit, fmt::format("macro calls nested deeper than {} ('{}')",
                                                     options_.limits.max_call_depth, macro->name));
    }
    struct Depth {
      int& d;
      ~Depth() { --d; }
    } depth{call_depth_};
    auto f = std::make_shared<Frame>(def);
    size_t next_positional = 0;
    ValueList varargs;
    for (const auto& p : macro->params) {
      const Value* given = nullptr;
      for (const auto& [k, v] : args.keyword)
        if (k == p.name) given = &v;
      if (!given && next_positional < args.positional.size()) given = &args.positional[next_positional++];
      if (given)
        f->vars.set(p.name, *given);
      else if (p.default_value)
        f->vars.set(p.name, eval(*p.default_value, f));
      else
        f->vars.set(p.name, Value::undefined("parameter '" + p.name + "' was not provided"));
    }
    while (next_positional < args.positional.size()) varargs.push_back(args.positional[next_positional++]);
    Dict kwargs;
    for (const auto& [k, v] : args.keyword) {
      bool is_param = k == "caller";
      for (const auto& p : macro->params) is_param = is_param || p.name == k;
      if (!is_param) kwargs.set(k, v);
      if (k == "caller") f->vars.set("caller", v);
    }
    f->vars.set("varargs", Value::list(std::move(varargs), Kind::Tuple));
    f->vars.set("kwargs", Value::object(std::move(kwargs)));
    return Value::string(capture(macro->body, f));
  });
}

Value Renderer::make_caller(const Stmt& s, const FramePtr& scope) {
  const Stmt* block = &s;
  FramePtr site = scope;  // the call site outlives the macro call that runs caller()
  return Value::function("caller", [this, block, site](CallArgs& args) {
    if (++call_depth_ > options_.limits.max_call_depth) {
      --call_depth_;
      throw JinjaError(ErrorKind::Limit,
                       fmt::format("macro calls nested deeper than {}", options_.limits.max_call_depth));
    }
    struct Depth {
      int& d;
      ~Depth() { --d; }
    } depth{call_depth_};
    auto f = std::make_shared<Frame>(site);
    for (size_t i = 0; i < block->params.size(); ++i) {
      const Value* given = args.get(block->params[i].name, i);
      if (given)
        f->vars.set(block->params[i].name, *given);
      else if (block->params[i].default_value)
        f->vars.set(block->params[i].name, eval(*block->params[i].default_value, f));
      else
        f->vars.set(block->params[i].name, Value::undefined());
    }
    return Value::string(capture(block->body, f));
  });
}

}  // namespace tessera::jinja
