#include "chat/jinja_eval.h"

#include <cmath>

#include "chat/jinja_builtins.h"
#include "chat/jinja_objects.h"
#include "chat/jinja_strings.h"
#include "chat/jinja_unicode.h"

namespace dflash::jinja {

namespace {

// Python gives up near 200 nested macro calls too (its recursion limit).
constexpr int kMaxMacroDepth = 200;

ScopePtr child(const ScopePtr& parent) {
  auto s = std::make_shared<Scope>();
  s->parent = parent;
  return s;
}

bool is_integer_like(const Value& v) { return v.is_int() || v.is_bool(); }

[[noreturn]] void unsupported(const char* op, const Value& a, const Value& b) {
  fail(std::string("unsupported operand type(s) for ") + op + ": '" + type_name(a) + "' and '" +
       type_name(b) + "'");
}

int64_t add_checked(int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_add_overflow(a, b, &r)) fail("integer overflow");
  return r;
}
int64_t sub_checked(int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_sub_overflow(a, b, &r)) fail("integer overflow");
  return r;
}
int64_t mul_checked(int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_mul_overflow(a, b, &r)) fail("integer overflow");
  return r;
}

Value concat_lists(const Value& a, const Value& b) {
  if (a.list().kind != b.list().kind || !a.is_sequence_list())
    fail("can only concatenate " + type_name(a) + " (not \"" + type_name(b) + "\") to " + type_name(a));
  ValueList items = a.list().items;
  items.insert(items.end(), b.list().items.begin(), b.list().items.end());
  return Value::make_list(std::move(items), a.list().kind);
}

Value repeat(const Value& seq, int64_t n) {
  if (seq.is_string()) return Value(py_repeat(seq.str(), n));
  ValueList items;
  for (int64_t i = 0; i < n; ++i)
    items.insert(items.end(), seq.list().items.begin(), seq.list().items.end());
  return Value::make_list(std::move(items), seq.list().kind);
}

bool contains(const Value& container, const Value& item) {
  switch (container.type()) {
    case Type::Undefined: return false;
    case Type::String:
      if (!item.is_string())
        fail("'in <string>' requires string as left operand, not " + type_name(item));
      return container.str().find(item.str()) != std::string::npos;
    case Type::List: {
      ListData& l = container.list();
      size_t from = l.kind == ListKind::Generator ? l.consumed : 0;
      for (size_t i = from; i < l.items.size(); ++i) {
        if (py_equal(l.items[i], item)) {
          if (l.kind == ListKind::Generator) l.consumed = i + 1;
          return true;
        }
      }
      if (l.kind == ListKind::Generator) l.consumed = l.items.size();
      return false;
    }
    case Type::Dict:
      if (!is_hashable(item)) fail("unhashable type: '" + type_name(item) + "'");
      return container.dict().find(item) != nullptr;
    default:
      fail("argument of type '" + type_name(container) + "' is not iterable");
  }
}

}  // namespace

// ---- scopes ----

Value* Scope::find_local(const std::string& name) {
  for (auto& kv : vars)
    if (kv.first == name) return &kv.second;
  return nullptr;
}

void Scope::set(const std::string& name, Value v) {
  if (Value* slot = find_local(name))
    *slot = std::move(v);
  else
    vars.emplace_back(name, std::move(v));
}

// ---- objects ----

std::optional<Value> Namespace::getattr(const std::string& name) {
  if (const Value* v = attrs_->find(std::string_view(name))) return *v;
  return std::nullopt;
}

std::string LoopContext::repr() const {
  return "<LoopContext " + std::to_string(index0_ + 1) + "/" + std::to_string(length()) + ">";
}

std::optional<Value> LoopContext::getattr(const std::string& name) {
  int64_t n = length();
  if (name == "index") return Value(index0_ + 1);
  if (name == "index0") return Value(index0_);
  if (name == "revindex") return Value(n - index0_);
  if (name == "revindex0") return Value(n - index0_ - 1);
  if (name == "first") return Value(index0_ == 0);
  if (name == "last") return Value(index0_ == n - 1);
  if (name == "length") return Value(n);
  if (name == "depth") return Value(static_cast<int64_t>(depth_));
  if (name == "depth0") return Value(static_cast<int64_t>(depth_ - 1));
  if (name == "previtem")
    return index0_ > 0 ? (*items_)[static_cast<size_t>(index0_ - 1)]
                       : Value::undefined("there is no previous item");
  if (name == "nextitem")
    return index0_ + 1 < n ? (*items_)[static_cast<size_t>(index0_ + 1)]
                           : Value::undefined("there is no next item");
  auto self = shared_from_this();
  if (name == "cycle") {
    return Value(std::make_shared<BuiltinFunction>("cycle", [self](Interpreter&, CallArgs& a) {
      if (a.pos.empty()) fail("no items for cycling given");
      return a.pos[static_cast<size_t>(self->index0_) % a.pos.size()];
    }));
  }
  if (name == "changed") {
    return Value(std::make_shared<BuiltinFunction>("changed", [self](Interpreter&, CallArgs& a) {
      bool same = self->last_changed_ && py_equal(Value::make_list(*self->last_changed_), Value::make_list(a.pos));
      if (same) return Value(false);
      self->last_changed_ = a.pos;
      return Value(true);
    }));
  }
  return std::nullopt;
}

Value LoopContext::call(Interpreter& in, CallArgs& args) {
  if (!loop_ || !loop_->recursive)
    fail("The loop must have the 'recursive' marker to be called recursively.");
  if (args.pos.size() != 1 || !args.kw.empty()) fail("loop() takes exactly one argument");
  std::string out;
  in.run_loop(*loop_, jinja::iterate(args.pos[0]), scope_, depth_ + 1, out);
  return Value(std::move(out));
}

std::optional<Value> Macro::getattr(const std::string& name) {
  if (name == "name") return Value(name_);
  if (name == "arguments") {
    ValueList args;
    for (const auto& p : def_->params) args.emplace_back(p);
    return Value::make_tuple(std::move(args));
  }
  if (name == "catch_kwargs") return Value(def_->catch_kwargs);
  if (name == "catch_varargs") return Value(def_->catch_varargs);
  if (name == "caller") return Value(def_->uses_caller);
  return std::nullopt;
}

Value Macro::call(Interpreter& in, CallArgs& args) {
  if (!closure_) fail("macro '" + name_ + "' was called after its template finished rendering");
  return in.invoke_macro(*def_, closure_, args);
}

// ---- interpreter ----

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

Interpreter::Flow Interpreter::exec_stmt(const Stmt& s, const ScopePtr& scope, std::string& out) {
  try {
    switch (s.kind) {
      case StmtKind::Output: out += s.text; break;
      case StmtKind::Print: out += to_str(eval(*s.expr, scope)); break;
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
        out += to_str(apply_filter_chain(s.filter.get(), std::move(v), scope));
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
  out += to_str(call(callee, args));
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

static Value unsafe_attr(const Value& obj, const std::string& name) {
  return Value::undefined("access to attribute '" + name + "' of '" + type_name(obj) + "' object is unsafe.", true);
}

static Value no_attribute(const Value& obj, const std::string& name) {
  return Value::undefined("'" + object_type_repr(obj) + "' has no attribute '" + name + "'");
}

Value Interpreter::getattr(const Value& obj, const std::string& name) {
  if (obj.is_undefined()) fail_undefined(obj);
  // Dunder attributes exist on every Python object and the sandbox refuses them all.
  if (name.size() > 4 && name.rfind("__", 0) == 0 && name.compare(name.size() - 2, 2, "__") == 0)
    return unsafe_attr(obj, name);
  if (obj.is_object()) {
    if (auto v = obj.object().getattr(name)) return *v;
    return no_attribute(obj, name);
  }
  switch (method_kind(obj, name)) {
    case MethodKind::Safe: return Value(std::make_shared<BoundMethod>(obj, name));
    case MethodKind::Unsafe: return unsafe_attr(obj, name);
    case MethodKind::None: break;
  }
  if (obj.is_dict())
    if (const Value* v = obj.dict().find(std::string_view(name))) return *v;
  return no_attribute(obj, name);
}

Value Interpreter::getitem(const Value& obj, const Value& key) {
  if (obj.is_undefined()) fail_undefined(obj);
  auto missing = [&]() {
    if (key.is_string()) {
      if (obj.is_object()) {
        if (auto v = obj.object().getattr(key.str())) return *v;
      } else {
        switch (method_kind(obj, key.str())) {
          case MethodKind::Safe: return Value(std::make_shared<BoundMethod>(obj, key.str()));
          case MethodKind::Unsafe: return unsafe_attr(obj, key.str());
          case MethodKind::None: break;
        }
      }
      return no_attribute(obj, key.str());
    }
    return Value::undefined(object_type_repr(obj) + " has no element " + repr(key));
  };
  if (obj.is_dict()) {
    if (is_hashable(key))
      if (const Value* v = obj.dict().find(key)) return *v;
    return missing();
  }
  if ((obj.is_string() || obj.is_sequence_list()) && is_integer_like(key)) {
    int64_t n = py_len(obj), i = key.as_int();
    if (i < 0) i += n;
    if (i < 0 || i >= n) return missing();
    if (obj.is_string()) return obj.is_markup() ? Value::markup(str_at(obj.str(), i)) : Value(str_at(obj.str(), i));
    return obj.list().items[static_cast<size_t>(i)];
  }
  return missing();
}

Value Interpreter::eval_slice(const Value& obj, const Expr& slice, const ScopePtr& scope) {
  std::optional<int64_t> parts[3];
  for (int k = 0; k < 3; ++k) {
    if (!slice.items[static_cast<size_t>(k)]) continue;
    Value v = eval(*slice.items[static_cast<size_t>(k)], scope);
    if (v.is_none()) continue;
    if (!is_integer_like(v)) fail("slice indices must be integers or None or have an __index__ method");
    parts[k] = v.as_int();
  }
  if (obj.is_undefined()) fail_undefined(obj);
  if (obj.is_string()) {
    SliceRange r = adjust_slice(py_len(obj), parts[0], parts[1], parts[2]);
    std::string s = str_slice(obj.str(), r);
    return obj.is_markup() ? Value::markup(std::move(s)) : Value(std::move(s));
  }
  if (obj.is_sequence_list()) {
    const ValueList& items = obj.list().items;
    SliceRange r = adjust_slice(static_cast<int64_t>(items.size()), parts[0], parts[1], parts[2]);
    ValueList out;
    for (int64_t k = 0, i = r.start; k < r.count; ++k, i += r.step) out.push_back(items[static_cast<size_t>(i)]);
    return Value::make_list(std::move(out), obj.list().kind);
  }
  if (obj.is_dict()) fail("unhashable type: 'slice'");
  fail("'" + type_name(obj) + "' object is not subscriptable");
}

Value binary_op(const std::string& op, const Value& a, const Value& b) {
  if (a.is_undefined()) fail_undefined(a);
  if (b.is_undefined()) fail_undefined(b);
  bool nums = a.is_number() && b.is_number();
  bool ints = is_integer_like(a) && is_integer_like(b);
  if (op == "+") {
    if (ints) return Value(add_checked(a.as_int(), b.as_int()));
    if (nums) return Value(a.as_double() + b.as_double());
    if (a.is_markup() && b.is_string()) return Value::markup(a.str() + markup_escape(b));
    if (b.is_markup() && a.is_string()) return Value::markup(markup_escape(a) + b.str());
    if (a.is_string() && b.is_string()) return Value(a.str() + b.str());
    if (a.is_list() && b.is_list()) return concat_lists(a, b);
    if (a.is_string() || a.is_sequence_list())
      fail("can only concatenate " + type_name(a) + " (not \"" + type_name(b) + "\") to " + type_name(a));
    unsupported("+", a, b);
  }
  if (op == "-") {
    if (ints) return Value(sub_checked(a.as_int(), b.as_int()));
    if (nums) return Value(a.as_double() - b.as_double());
    unsupported("-", a, b);
  }
  if (op == "*") {
    if (ints) return Value(mul_checked(a.as_int(), b.as_int()));
    if (nums) return Value(a.as_double() * b.as_double());
    if ((a.is_string() || a.is_sequence_list()) && is_integer_like(b)) return repeat(a, b.as_int());
    if ((b.is_string() || b.is_sequence_list()) && is_integer_like(a)) return repeat(b, a.as_int());
    if (a.is_string() || b.is_string() || a.is_sequence_list() || b.is_sequence_list())
      fail("can't multiply sequence by non-int of type '" + type_name(a.is_number() ? a : b) + "'");
    unsupported("*", a, b);
  }
  if (op == "/") {
    if (!nums) unsupported("/", a, b);
    if (b.as_double() == 0) fail("division by zero");
    return Value(a.as_double() / b.as_double());
  }
  if (op == "//") {
    if (!nums) unsupported("//", a, b);
    if (ints) {
      int64_t x = a.as_int(), y = b.as_int();
      if (y == 0) fail("integer division or modulo by zero");
      int64_t q = x / y;
      if ((x % y != 0) && ((x < 0) != (y < 0))) --q;
      return Value(q);
    }
    if (b.as_double() == 0) fail("float floor division by zero");
    return Value(std::floor(a.as_double() / b.as_double()));
  }
  if (op == "%") {
    if (a.is_markup()) {
      // Markup % args escapes the string arguments first.
      auto esc = [](const Value& x) { return x.is_string() ? Value(markup_escape(x)) : x; };
      Value args = b;
      if (b.is_list_kind(ListKind::Tuple)) {
        ValueList items;
        for (const auto& x : b.list().items) items.push_back(esc(x));
        args = Value::make_tuple(std::move(items));
      } else {
        args = esc(b);
      }
      return Value::markup(printf_format(a.str(), args));
    }
    if (a.is_string()) return Value(printf_format(a.str(), b));
    if (!nums) unsupported("%", a, b);
    if (ints) {
      int64_t x = a.as_int(), y = b.as_int();
      if (y == 0) fail("integer modulo by zero");
      int64_t m = x % y;
      if (m != 0 && ((m < 0) != (y < 0))) m += y;
      return Value(m);
    }
    double x = a.as_double(), y = b.as_double();
    if (y == 0) fail("float modulo");
    double m = std::fmod(x, y);
    if (m != 0 && ((m < 0) != (y < 0))) m += y;
    if (m == 0) m = std::copysign(0.0, y);
    return Value(m);
  }
  if (op == "**") {
    if (!nums) unsupported("** or pow()", a, b);
    if (ints && b.as_int() >= 0) {
      int64_t base = a.as_int(), e = b.as_int(), acc = 1;
      while (e > 0) {
        if (e & 1) acc = mul_checked(acc, base);
        e >>= 1;
        if (e) base = mul_checked(base, base);
      }
      return Value(acc);
    }
    if (a.as_double() == 0 && b.as_double() < 0) fail("0.0 cannot be raised to a negative power");
    return Value(std::pow(a.as_double(), b.as_double()));
  }
  fail("unknown operator " + op);
}

Value Interpreter::eval_compare(const Expr& e, const ScopePtr& scope) {
  Value left = eval(*e.a, scope);
  for (const auto& [op, operand] : e.cmp) {
    Value right = eval(*operand, scope);
    bool ok;
    if (op == "==") {
      ok = py_equal(left, right);
    } else if (op == "!=") {
      ok = !py_equal(left, right);
    } else if (op == "in") {
      ok = contains(right, left);
    } else if (op == "notin") {
      ok = !contains(right, left);
    } else {
      if (left.is_undefined()) fail_undefined(left);
      if (right.is_undefined()) fail_undefined(right);
      if (op == "<") ok = py_less(left, right);
      else if (op == ">") ok = py_less(right, left);
      else if (op == "<=") ok = py_less(left, right) || py_equal(left, right);
      else ok = py_less(right, left) || py_equal(left, right);
    }
    if (!ok) return Value(false);
    left = std::move(right);
  }
  return Value(true);
}

Value Interpreter::eval(const Expr& e, const ScopePtr& scope) {
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
      if (is_integer_like(v)) {
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
      for (const auto& x : e.items) s += to_str(eval(*x, scope));
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
