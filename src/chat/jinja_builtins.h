#pragma once
// What templates can call: jinja2's filters and tests, the globals Hugging Face provides,
// and the methods of Python's str, list and dict that the sandbox allows.
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "chat/jinja_value.h"

namespace dflash::jinja {

// Matches positional and keyword arguments to parameter names like a Python signature.
class Binder {
 public:
  Binder(const std::string& fn, CallArgs& args, const std::vector<std::string>& params,
         size_t required = 0);
  bool has(size_t i) const { return vals_[i].has_value(); }
  const Value& operator[](size_t i) const;  // undefined when not passed
  Value get(size_t i, Value def) const { return has(i) ? *vals_[i] : std::move(def); }

 private:
  std::vector<std::optional<Value>> vals_;
};

// Python's int(x) semantics for the argument of an integer parameter.
int64_t int_arg(const Value& v, const char* what);

class BuiltinFunction : public Object {
 public:
  using Fn = std::function<Value(Interpreter&, CallArgs&)>;
  BuiltinFunction(std::string name, Fn fn) : name_(std::move(name)), fn_(std::move(fn)) {}
  std::string type_name() const override { return "builtin_function_or_method"; }
  std::string repr() const override { return "<built-in function " + name_ + ">"; }
  bool is_callable() const override { return true; }
  Value call(Interpreter& in, CallArgs& args) override { return fn_(in, args); }

 private:
  std::string name_;
  Fn fn_;
};

// `"abc".upper` before it is called.
class BoundMethod : public Object {
 public:
  BoundMethod(Value self, std::string name) : self_(std::move(self)), name_(std::move(name)) {}
  std::string type_name() const override { return "builtin_function_or_method"; }
  std::string repr() const override;
  bool is_callable() const override { return true; }
  Value call(Interpreter& in, CallArgs& args) override;

 private:
  Value self_;
  std::string name_;
};

enum class MethodKind { None, Safe, Unsafe };
// Whether a str/list/dict value has a method of that name, and whether the sandbox allows it.
MethodKind method_kind(const Value& self, const std::string& name);
Value call_method(Interpreter& in, const Value& self, const std::string& name, CallArgs& args);

using FilterFn = Value (*)(Interpreter&, Value, CallArgs&);
using TestFn = bool (*)(Interpreter&, const Value&, CallArgs&);
FilterFn find_filter(const std::string& name);
TestFn find_test(const std::string& name);

std::vector<std::pair<std::string, Value>> make_globals();

// Python's `fmt % args` and `fmt.format(*args, **kwargs)`.
std::string printf_format(const std::string& fmt, const Value& args);
std::string str_format(Interpreter& in, const std::string& fmt, CallArgs& args);

}  // namespace dflash::jinja
