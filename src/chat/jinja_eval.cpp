#include "chat/jinja_eval.h"

#include "chat/jinja_builtins.h"
#include "chat/jinja_objects.h"

namespace dflash::jinja {

namespace {

// Python gives up near 200 nested macro calls too (its recursion limit).
constexpr int kMaxMacroDepth = 200;

ScopePtr child(const ScopePtr& parent) {
  auto s = std::make_shared<Scope>();
  s->parent = parent;
  return s;
}

}  // namespace

Interpreter::Interpreter(Value context, RenderHooks hooks)
    : context_(std::move(context)), hooks_(std::move(hooks)), globals_(make_globals()) {
  globals_.emplace_back("strftime_now", Value(std::make_shared<BuiltinFunction>(
                                            "strftime_now", [](Interpreter& in, CallArgs& a) {
                                              Binder b("strftime_now", a, {"format"}, 1);
                                              if (!b[0].is_string()) fail("strftime_now() argument must be str");
                                              if (!in.hooks().strftime_now) fail("strftime_now is not available");
                                              return Value(in.hooks().strftime_now(b[0].str()));
                                            })));
}

std::string Interpreter::render(const Body& body) {
  ActiveBudget active(budget_);
  auto root = std::make_shared<Scope>();
  std::string out;
  struct Release {
    std::vector<std::shared_ptr<Object>>& objs;
    ~Release() {
      for (auto& o : objs) o->release();
      objs.clear();
    }
  } release{tracked_};
  exec(body, root, out);
  root->vars.clear();
  return out;
}

Interpreter::Flow Interpreter::exec(const Body& body, const ScopePtr& scope, std::string& out) {
  for (const auto& s : body) {
    Flow f = exec_stmt(*s, scope, out);
    if (f != Flow::Normal) return f;
  }
  return Flow::Normal;
}

std::string Interpreter::capture(const Body& body, const ScopePtr& scope) {
  std::string out;
  exec(body, scope, out);
  return out;
}

Interpreter::Nested::Nested(Interpreter& in) : in_(in) {
  if (++in_.nesting_ > kMaxRenderDepth) {
    --in_.nesting_;
    fail("chat template exceeded the limit of " + std::to_string(kMaxRenderDepth) +
         " nested evaluations (macro calls, recursive loops, expressions and blocks)");
  }
  in_.budget_.charge(1);
}

void Interpreter::emit(std::string& out, std::string_view text) {
  if (out.size() + text.size() > kMaxOutputBytes)
    fail("chat template exceeded the limit of " + std::to_string(kMaxOutputBytes >> 20) + " MiB of output");
  budget_.charge(text.size() / kBytesPerStep);
  out += text;
}

Interpreter::Flow Interpreter::exec_stmt(const Stmt& s, const ScopePtr& scope, std::string& out) {
  try {
    Nested nested(*this);
    switch (s.kind) {
      case StmtKind::Output: emit(out, s.text); break;
      case StmtKind::Print: emit(out, to_str(eval(*s.expr, scope))); break;
      case StmtKind::If:
        for (const auto& br : s.branches)
          if (truthy(eval(*br.first, scope))) return exec(br.second, scope, out);
        return exec(s.else_body, scope, out);
      case StmtKind::For: run_loop(s, iterate(eval(*s.expr, scope)), scope, 1, out); break;
      case StmtKind::Set: assign(s.target, eval(*s.expr, scope), scope); break;
      case StmtKind::SetBlock: {
        Value v(capture(s.body, child(scope)));
        if (s.filter) v = apply_filter_chain(s.filter.get(), std::move(v), scope);
        assign(s.target, std::move(v), scope);
        break;
      }
      case StmtKind::Macro: {
        auto m = std::make_shared<Macro>(&s, scope, s.name);
        track(m);
        scope->set(s.name, Value(std::shared_ptr<Object>(m)));
        break;
      }
      case StmtKind::CallBlock: exec_call_block(s, scope, out); break;
      case StmtKind::FilterBlock: {
        Value v(capture(s.body, child(scope)));
        emit(out, to_str(apply_filter_chain(s.filter.get(), std::move(v), scope)));
        break;
      }
      case StmtKind::With: {
        auto inner = child(scope);
        for (size_t i = 0; i < s.targets.size(); ++i) assign(s.targets[i], eval(*s.values[i], scope), inner);
        return exec(s.body, inner, out);
      }
      case StmtKind::Break: return Flow::Break;
      case StmtKind::Continue: return Flow::Continue;
      case StmtKind::Scope: exec(s.body, child(scope), out); break;
    }
  } catch (RenderError& e) {
    if (!e.line) e.line = s.line;
    throw;
  }
  return Flow::Normal;
}

void Interpreter::run_loop(const Stmt& s, ValueList items, const ScopePtr& scope, int depth, std::string& out) {
  if (s.cond) {
    ValueList kept;
    for (auto& item : items) {
      auto tmp = child(scope);
      assign(s.target, item, tmp);
      if (truthy(eval(*s.cond, tmp))) kept.push_back(std::move(item));
    }
    items = std::move(kept);
  }
  if (items.empty()) {
    exec(s.else_body, child(scope), out);
    return;
  }
  auto shared = std::make_shared<const ValueList>(std::move(items));
  auto loop = std::make_shared<LoopContext>(shared, depth, &s, scope);
  track(loop);
  Value loop_value{std::shared_ptr<Object>(loop)};
  for (size_t i = 0; i < shared->size(); ++i) {
    budget_.charge(kStepsPerIteration);
    loop->set_index(static_cast<int64_t>(i));
    auto it = child(scope);
    assign(s.target, (*shared)[i], it);
    it->set("loop", loop_value);
    if (exec(s.body, it, out) == Flow::Break) break;
  }
}

void Interpreter::exec_call_block(const Stmt& s, const ScopePtr& scope, std::string& out) {
  const Expr& call_expr = *s.expr;
  Value callee = eval(*call_expr.a, scope);
  CallArgs args = eval_args(call_expr.args, scope);
  auto caller = std::make_shared<Macro>(&s, scope, "caller");
  track(caller);
  args.kw.emplace_back("caller", Value(std::shared_ptr<Object>(caller)));
  emit(out, to_str(call(callee, args)));
}

Value Interpreter::invoke_macro(const Stmt& def, const ScopePtr& closure, CallArgs& args) {
  const std::string& name = def.kind == StmtKind::Macro ? def.name : std::string("caller");
  size_t n = def.params.size();
  std::vector<std::optional<Value>> bound(n);
  size_t given = std::min(args.pos.size(), n);
  for (size_t i = 0; i < given; ++i) bound[i] = args.pos[i];
  auto kwargs = args.kw;
  auto pop_kw = [&](const std::string& key) -> std::optional<Value> {
    for (auto it = kwargs.begin(); it != kwargs.end(); ++it) {
      if (it->first == key) {
        Value v = std::move(it->second);
        kwargs.erase(it);
        return v;
      }
    }
    return std::nullopt;
  };
  bool explicit_caller = false;
  for (const auto& p : def.params) explicit_caller = explicit_caller || p == "caller";
  bool found_caller = explicit_caller;
  if (given != n) {
    found_caller = false;
    for (size_t i = given; i < n; ++i) {
      bound[i] = pop_kw(def.params[i]);
      if (def.params[i] == "caller") found_caller = true;
    }
  }
  Value caller_value;
  bool bind_caller = def.uses_caller && !found_caller;
  if (bind_caller) {
    auto c = pop_kw("caller");
    caller_value = c && !c->is_none() ? *c : Value::undefined("No caller defined");
  }
  if (!def.catch_kwargs && !kwargs.empty()) {
    if (kwargs.front().first == "caller")
      fail("macro '" + name + "' was invoked with two values for the special caller argument. This is most likely a bug.");
    fail("macro '" + name + "' takes no keyword argument '" + kwargs.front().first + "'");
  }
  if (!def.catch_varargs && args.pos.size() > n)
    fail("macro '" + name + "' takes not more than " + std::to_string(n) + " argument(s)");

  if (depth_ >= kMaxMacroDepth) fail("maximum recursion depth exceeded while calling macro '" + name + "'");
  struct DepthGuard {
    int& d;
    ~DepthGuard() { --d; }
  } guard{++depth_};

  auto scope = child(closure);
  size_t first_default = n - def.defaults.size();
  for (size_t i = 0; i < n; ++i) {
    Value v;
    if (bound[i])
      v = std::move(*bound[i]);
    else if (i >= first_default)
      v = eval(*def.defaults[i - first_default], scope);
    else
      v = Value::undefined("parameter '" + def.params[i] + "' was not provided");
    scope->set(def.params[i], std::move(v));
  }
  if (def.catch_varargs) {
    ValueList extra;
    for (size_t i = n; i < args.pos.size(); ++i) extra.push_back(args.pos[i]);
    scope->set("varargs", Value::make_tuple(std::move(extra)));
  }
  if (def.catch_kwargs) {
    Value d = Value::make_dict();
    for (auto& kv : kwargs) d.dict().set(Value(kv.first), kv.second);
    scope->set("kwargs", d);
  }
  if (bind_caller) scope->set("caller", caller_value);
  std::string out;
  exec(def.body, scope, out);
  return Value(std::move(out));
}

Value Interpreter::apply_filter_chain(const Expr* chain, Value v, const ScopePtr& scope) {
  if (chain->a) v = apply_filter_chain(chain->a.get(), std::move(v), scope);
  CallArgs args = eval_args(chain->args, scope);
  return filter(chain->name, std::move(v), args);
}

void Interpreter::assign(const Target& t, Value v, const ScopePtr& scope) {
  switch (t.kind) {
    case Target::Kind::Name: scope->set(t.name, std::move(v)); return;
    case Target::Kind::NsAttr: {
      Value ns = lookup(t.name, scope);
      if (!ns.is_object() || !ns.object().is_namespace())
        fail("cannot assign attribute on non-namespace object");
      ns.object().setattr(t.attr, std::move(v));
      return;
    }
    case Target::Kind::Tuple: {
      ValueList items = iterate(v);
      size_t n = t.items.size();
      if (items.size() < n)
        fail("not enough values to unpack (expected " + std::to_string(n) + ", got " +
             std::to_string(items.size()) + ")");
      if (items.size() > n) fail("too many values to unpack (expected " + std::to_string(n) + ")");
      for (size_t i = 0; i < n; ++i) assign(t.items[i], std::move(items[i]), scope);
      return;
    }
  }
}

Value Interpreter::lookup(const std::string& name, const ScopePtr& scope) {
  for (Scope* s = scope.get(); s; s = s->parent.get())
    if (Value* v = s->find_local(name)) return *v;
  if (context_.is_dict())
    if (const Value* v = context_.dict().find(std::string_view(name))) return *v;
  for (const auto& g : globals_)
    if (g.first == name) return g.second;
  return Value::undefined("'" + name + "' is undefined");
}

CallArgs Interpreter::eval_args(const CallArgsExpr& a, const ScopePtr& scope) {
  CallArgs out;
  for (const auto& e : a.pos) out.pos.push_back(eval(*e, scope));
  if (a.star)
    for (auto& v : iterate(eval(*a.star, scope))) out.pos.push_back(std::move(v));
  for (const auto& kv : a.kw) out.kw.emplace_back(kv.first, eval(*kv.second, scope));
  if (a.starstar) {
    Value d = eval(*a.starstar, scope);
    if (!d.is_dict()) fail("argument after ** must be a mapping, not " + type_name(d));
    for (const auto& kv : d.dict().items) {
      if (!kv.first.is_string()) fail("keywords must be strings");
      out.kw.emplace_back(kv.first.str(), kv.second);
    }
  }
  return out;
}

Value Interpreter::call(const Value& callee, CallArgs& args) {
  if (callee.is_undefined()) fail_undefined(callee);
  if (callee.is_object() && callee.object().is_callable()) return callee.object().call(*this, args);
  fail("'" + type_name(callee) + "' object is not callable");
}

Value Interpreter::filter(const std::string& name, Value v, CallArgs& args) {
  FilterFn fn = find_filter(name);
  if (!fn) fail("No filter named '" + name + "'.");
  return fn(*this, std::move(v), args);
}

bool Interpreter::test(const std::string& name, const Value& v, CallArgs& args) {
  TestFn fn = find_test(name);
  if (!fn) fail("No test named '" + name + "'.");
  return fn(*this, v, args);
}

Value Interpreter::eval(const Expr& e, const ScopePtr& scope) {
  Nested nested(*this);
  Value v = eval_node(e, scope);
  // Strings are copied by value, so every node that yields one has done work in its length.
  if (v.is_string()) {
    check_size(v.str().size());
    budget_.charge(v.str().size() / kBytesPerStep);
  }
  return v;
}

Value Interpreter::eval_node(const Expr& e, const ScopePtr& scope) {
  switch (e.kind) {
    case ExprKind::Const: return e.value;
    case ExprKind::Name: return lookup(e.name, scope);
    case ExprKind::List:
    case ExprKind::Tuple: {
      ValueList items;
      items.reserve(e.items.size());
      for (const auto& x : e.items) items.push_back(eval(*x, scope));
      return Value::make_list(std::move(items), e.kind == ExprKind::Tuple ? ListKind::Tuple : ListKind::List);
    }
    case ExprKind::Dict: {
      Value d = Value::make_dict();
      for (size_t i = 0; i + 1 < e.items.size(); i += 2) {
        Value k = eval(*e.items[i], scope);
        d.dict().set(std::move(k), eval(*e.items[i + 1], scope));
      }
      return d;
    }
    case ExprKind::Getattr: return getattr(eval(*e.a, scope), e.name);
    case ExprKind::Getitem: {
      Value obj = eval(*e.a, scope);
      if (e.b->kind == ExprKind::Slice) return eval_slice(obj, *e.b, scope);
      return getitem(obj, eval(*e.b, scope));
    }
    case ExprKind::Slice: fail("a slice is only valid inside []");
    case ExprKind::Call: {
      Value callee = eval(*e.a, scope);
      CallArgs args = eval_args(e.args, scope);
      return call(callee, args);
    }
    case ExprKind::Filter: {
      Value v = e.a ? eval(*e.a, scope) : Value();
      CallArgs args = eval_args(e.args, scope);
      return filter(e.name, std::move(v), args);
    }
    case ExprKind::Test: {
      Value v = eval(*e.a, scope);
      CallArgs args = eval_args(e.args, scope);
      return Value(test(e.name, v, args));
    }
    case ExprKind::Not: return Value(!truthy(eval(*e.a, scope)));
    case ExprKind::Neg:
    case ExprKind::Pos: {
      Value v = eval(*e.a, scope);
      if (v.is_undefined()) fail_undefined(v);
      bool neg = e.kind == ExprKind::Neg;
      if (v.is_integral()) {
        if (neg && v.as_int() == INT64_MIN) fail("integer overflow");
        return Value(neg ? -v.as_int() : v.as_int());
      }
      if (v.is_float()) return Value(neg ? -v.as_double() : v.as_double());
      fail(std::string("bad operand type for unary ") + (neg ? "-" : "+") + ": '" + type_name(v) + "'");
    }
    case ExprKind::And: {
      Value a = eval(*e.a, scope);
      return truthy(a) ? eval(*e.b, scope) : a;
    }
    case ExprKind::Or: {
      Value a = eval(*e.a, scope);
      return truthy(a) ? a : eval(*e.b, scope);
    }
    case ExprKind::Binary: {
      Value a = eval(*e.a, scope);
      Value b = eval(*e.b, scope);
      return binary_op(e.op, a, b);
    }
    case ExprKind::Concat: {
      std::string s;
      for (const auto& x : e.items) append_checked(s, to_str(eval(*x, scope)));
      return Value(std::move(s));
    }
    case ExprKind::Compare: return eval_compare(e, scope);
    case ExprKind::CondExpr:
      if (truthy(eval(*e.a, scope))) return eval(*e.b, scope);
      if (e.c) return eval(*e.c, scope);
      return Value::undefined("the inline if-expression on line " + std::to_string(e.line) +
                              " evaluated to false and no else section was defined.");
  }
  fail("unknown expression");
}

}  // namespace dflash::jinja
