// Functions every template can call: jinja2's globals and Hugging Face's raise_exception.
// strftime_now is added by the interpreter because it depends on the render's clock.
#include <memory>

#include "chat/jinja_builtins.h"
#include "chat/jinja_eval.h"
#include "chat/jinja_objects.h"

namespace dflash::jinja {

namespace {

// The sandbox refuses ranges longer than this (jinja2.sandbox.MAX_RANGE).
constexpr int64_t kMaxRange = 100000;

Value fn_range(Interpreter&, CallArgs& a) {
  if (!a.kw.empty()) fail("range() takes no keyword arguments");
  if (a.pos.empty() || a.pos.size() > 3)
    fail("range expected at most 3 arguments, got " + std::to_string(a.pos.size()));
  int64_t start = 0, stop, step = 1;
  if (a.pos.size() == 1) {
    stop = int_arg(a.pos[0], "range");
  } else {
    start = int_arg(a.pos[0], "range");
    stop = int_arg(a.pos[1], "range");
    if (a.pos.size() == 3) step = int_arg(a.pos[2], "range");
  }
  if (step == 0) fail("range() arg 3 must not be zero");
  int64_t count = 0;
  if (step > 0 && stop > start) count = (stop - start - 1) / step + 1;
  if (step < 0 && start > stop) count = (start - stop - 1) / (-step) + 1;
  if (count > kMaxRange)
    fail("Range too big. The sandbox blocks ranges larger than MAX_RANGE (100000).");
  ValueList items;
  items.reserve(static_cast<size_t>(count));
  for (int64_t i = 0; i < count; ++i) items.emplace_back(start + i * step);
  return Value::make_list(std::move(items));
}

// dict(mapping_or_pairs, **kwargs), as namespace() also accepts.
Value build_dict(CallArgs& a, const char* fn) {
  if (a.pos.size() > 1) fail(std::string(fn) + " expected at most 1 argument, got " + std::to_string(a.pos.size()));
  Value d = Value::make_dict();
  if (!a.pos.empty()) {
    const Value& src = a.pos[0];
    if (src.is_dict()) {
      d.dict().items = src.dict().items;
    } else {
      for (const auto& pair : iterate(src)) {
        ValueList kv = iterate(pair);
        if (kv.size() != 2) fail("dictionary update sequence element has length " + std::to_string(kv.size()) + "; 2 is required");
        d.dict().set(kv[0], kv[1]);
      }
    }
  }
  for (auto& kv : a.kw) d.dict().set(Value(kv.first), kv.second);
  return d;
}

Value fn_dict(Interpreter&, CallArgs& a) { return build_dict(a, "dict"); }

Value fn_namespace(Interpreter& in, CallArgs& a) {
  Value d = build_dict(a, "namespace");
  auto ns = std::make_shared<Namespace>();
  for (auto& kv : d.dict().items) {
    if (!kv.first.is_string()) fail("namespace() keywords must be strings");
    ns->setattr(kv.first.str(), kv.second);
  }
  in.track(ns);
  return Value(std::shared_ptr<Object>(ns));
}

Value fn_raise_exception(Interpreter&, CallArgs& a) {
  Binder b("raise_exception", a, {"message"}, 1);
  throw RaisedError(to_str(b[0]));
}

class Cycler : public Object, public std::enable_shared_from_this<Cycler> {
 public:
  explicit Cycler(ValueList items) : items_(std::move(items)) {}
  std::string type_name() const override { return "Cycler"; }
  std::optional<Value> getattr(const std::string& name) override {
    auto self = shared_from_this();
    if (name == "current") return items_[pos_];
    if (name == "next")
      return Value(std::make_shared<BuiltinFunction>("next", [self](Interpreter&, CallArgs&) {
        Value v = self->items_[self->pos_];
        self->pos_ = (self->pos_ + 1) % self->items_.size();
        return v;
      }));
    if (name == "reset")
      return Value(std::make_shared<BuiltinFunction>("reset", [self](Interpreter&, CallArgs&) {
        self->pos_ = 0;
        return Value(nullptr);
      }));
    return std::nullopt;
  }

 private:
  ValueList items_;
  size_t pos_ = 0;
};

Value fn_cycler(Interpreter&, CallArgs& a) {
  if (a.pos.empty()) fail("at least one item has to be provided");
  return Value(std::shared_ptr<Object>(std::make_shared<Cycler>(a.pos)));
}

Value fn_joiner(Interpreter&, CallArgs& a) {
  Binder b("joiner", a, {"sep"});
  std::string sep = b.has(0) ? to_str(b[0]) : ", ";
  auto used = std::make_shared<bool>(false);
  return Value(std::make_shared<BuiltinFunction>("joiner", [sep, used](Interpreter&, CallArgs&) {
    if (!*used) {
      *used = true;
      return Value("");
    }
    return Value(sep);
  }));
}

}  // namespace

std::vector<std::pair<std::string, Value>> make_globals() {
  std::vector<std::pair<std::string, Value>> g;
  auto add = [&](const char* name, BuiltinFunction::Fn fn) {
    g.emplace_back(name, Value(std::make_shared<BuiltinFunction>(name, std::move(fn))));
  };
  add("range", fn_range);
  add("dict", fn_dict);
  add("namespace", fn_namespace);
  add("raise_exception", fn_raise_exception);
  add("cycler", fn_cycler);
  add("joiner", fn_joiner);
  return g;
}

}  // namespace dflash::jinja
