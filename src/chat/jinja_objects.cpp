// The objects templates see: scopes, namespace(), loop and macros.
#include "chat/jinja_builtins.h"
#include "chat/jinja_eval.h"
#include "chat/jinja_objects.h"

namespace dflash::jinja {


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

// A namespace inside itself prints as in Python, where the dict repr inside it guards against
// recursion: the inner one shows its attributes as {...}.
std::string Namespace::repr() const {
  if (in_repr_) return "<Namespace {...}>";
  in_repr_ = true;
  struct Reset {
    bool& flag;
    ~Reset() { flag = false; }
  } reset{in_repr_};
  return "<Namespace " + to_str(Value(attrs_)) + ">";
}

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

}  // namespace dflash::jinja
