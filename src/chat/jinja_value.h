#pragma once
// The values a template computes with, modelled on the Python objects jinja2 would hold:
// Python truthiness, equality, ordering, str() and repr() all follow CPython so that a
// rendering is byte-identical to what Hugging Face's jinja2 produces.
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include <nlohmann/json.hpp>

#include "util/error.h"

namespace dflash::jinja {

class Value;
class Object;
class Interpreter;
using ValueList = std::vector<Value>;

// A failure while rendering; `line` is filled in by the statement that was running.
class RenderError : public Error {
 public:
  explicit RenderError(const std::string& msg, int line = 0) : Error(msg), line(line) {}
  int line;
};
// raise_exception() from the template: its message is passed on untouched.
class RaisedError : public Error {
 public:
  explicit RaisedError(const std::string& msg) : Error(msg) {}
};
[[noreturn]] void fail(const std::string& msg);

enum class Type : uint8_t { Undefined, None, Bool, Int, Float, String, List, Dict, Object };
// Lists also stand in for tuples, one-shot generators (what map/select return) and dict views.
enum class ListKind : uint8_t { List, Tuple, Generator, View };

struct UndefinedInfo {
  std::string message;   // what using it reports
  bool unsafe = false;   // a sandbox-blocked attribute: using it is a SecurityError
};

// Both destroy what they alone hold one level at a time (see Value::take_contents).
struct ListData {
  ListData() = default;
  ListData(const ListData&) = default;
  ListData& operator=(const ListData&) = default;
  ~ListData();
  ValueList items;
  ListKind kind = ListKind::List;
  std::string view_name;  // dict_items / dict_keys / dict_values for views
  size_t consumed = 0;    // generators can be iterated once
};

struct DictData {
  DictData() = default;
  DictData(const DictData&) = default;
  DictData& operator=(const DictData&) = default;
  ~DictData();
  std::vector<std::pair<Value, Value>> items;
  Value* find(const Value& key);
  Value* find(std::string_view key);
  const Value* find(const Value& key) const;
  const Value* find(std::string_view key) const;
  void set(Value key, Value value);
  bool erase(const Value& key);
};

struct CallArgs {
  ValueList pos;
  std::vector<std::pair<std::string, Value>> kw;
};

class Value {
 public:
  Value() : v_(std::shared_ptr<const UndefinedInfo>()) {}
  Value(std::nullptr_t) : v_(nullptr) {}
  Value(bool b) : v_(b) {}
  Value(int i) : v_(static_cast<int64_t>(i)) {}
  Value(int64_t i) : v_(i) {}
  Value(size_t i) : v_(static_cast<int64_t>(i)) {}
  Value(double d) : v_(d) {}
  Value(std::string s) : v_(std::move(s)) {}
  Value(const char* s) : v_(std::string(s)) {}
  Value(std::shared_ptr<ListData> l) : v_(std::move(l)) {}
  Value(std::shared_ptr<DictData> d) : v_(std::move(d)) {}
  Value(std::shared_ptr<Object> o) : v_(std::move(o)) {}

  static Value undefined(std::string message, bool unsafe = false);
  // markupsafe.Markup: a str that escapes plain strings concatenated to it.
  static Value markup(std::string s) {
    Value v(std::move(s));
    v.markup_ = true;
    return v;
  }
  static Value make_list(ValueList items = {}, ListKind kind = ListKind::List);
  static Value make_tuple(ValueList items) { return make_list(std::move(items), ListKind::Tuple); }
  static Value make_dict() { return Value(std::make_shared<DictData>()); }

  Type type() const { return static_cast<Type>(v_.index()); }
  bool is_undefined() const { return type() == Type::Undefined; }
  bool is_none() const { return type() == Type::None; }
  bool is_bool() const { return type() == Type::Bool; }
  bool is_int() const { return type() == Type::Int; }
  bool is_float() const { return type() == Type::Float; }
  bool is_number() const { return is_bool() || is_int() || is_float(); }
  bool is_integral() const { return is_bool() || is_int(); }
  bool is_string() const { return type() == Type::String; }
  bool is_markup() const { return markup_ && is_string(); }
  bool is_list() const { return type() == Type::List; }
  bool is_dict() const { return type() == Type::Dict; }
  bool is_object() const { return type() == Type::Object; }
  bool is_list_kind(ListKind k) const { return is_list() && list().kind == k; }
  // A real list or tuple: indexable, sliceable, has a length.
  bool is_sequence_list() const {
    return is_list() && (list().kind == ListKind::List || list().kind == ListKind::Tuple);
  }

  bool as_bool() const { return std::get<bool>(v_); }
  int64_t as_int() const { return is_bool() ? (as_bool() ? 1 : 0) : std::get<int64_t>(v_); }
  double as_double() const { return is_float() ? std::get<double>(v_) : static_cast<double>(as_int()); }
  const std::string& str() const { return std::get<std::string>(v_); }
  ListData& list() const { return *std::get<std::shared_ptr<ListData>>(v_); }
  DictData& dict() const { return *std::get<std::shared_ptr<DictData>>(v_); }
  Object& object() const { return *std::get<std::shared_ptr<Object>>(v_); }
  const std::shared_ptr<Object>& object_ptr() const { return std::get<std::shared_ptr<Object>>(v_); }
  const UndefinedInfo* undefined_info() const { return std::get<0>(v_).get(); }
  // Identity, for `is sameas` and the equality of objects that compare by identity.
  const void* identity() const;
  // Moves the items (or keys and values) of a list or dict that no other value shares into
  // `into`. A template can nest lists a million deep, which destroying recursively would
  // overflow the stack; ~ListData and ~DictData take them apart with this instead.
  void take_contents(ValueList& into);

 private:
  std::variant<std::shared_ptr<const UndefinedInfo>, std::nullptr_t, bool, int64_t, double,
               std::string, std::shared_ptr<ListData>, std::shared_ptr<DictData>,
               std::shared_ptr<Object>>
      v_;
  bool markup_ = false;
};

// Namespaces, loop contexts, macros, bound methods and builtin functions.
class Object {
 public:
  virtual ~Object() = default;
  virtual std::string type_name() const = 0;  // Python's type(x).__name__
  virtual std::string repr() const;
  virtual std::optional<Value> getattr(const std::string& name);
  virtual bool is_namespace() const { return false; }
  virtual void setattr(const std::string& name, Value v);
  virtual bool is_callable() const { return false; }
  virtual Value call(Interpreter& in, CallArgs& args);
  virtual std::optional<ValueList> iterate() { return std::nullopt; }
  // Drops references that could form cycles (a macro stored in the scope it closes over);
  // called on every tracked object when a render ends.
  virtual void release() {}
};

// Fails the way using an undefined value fails in jinja2.
[[noreturn]] void fail_undefined(const Value& v);

bool truthy(const Value& v);
std::string to_str(const Value& v);  // Python str()
std::string repr(const Value& v);    // Python repr()
std::string repr_string(std::string_view s);
// markupsafe.escape(): Markup passes through, anything else is str()-ed and HTML-escaped.
std::string markup_escape(const Value& v);
std::string float_repr(double d);
std::string type_name(const Value& v);  // Python type(x).__name__
std::string object_type_repr(const Value& v);  // how jinja2 names an object in messages

bool py_equal(const Value& a, const Value& b);
// Python's a < b; fails with a TypeError message for unorderable pairs.
bool py_less(const Value& a, const Value& b);
bool is_hashable(const Value& v);

// Items of an iterable (a generator is drained); fails for non-iterables.
ValueList iterate(const Value& v);
// len(), failing for values without a length.
int64_t py_len(const Value& v);

Value from_json(const nlohmann::ordered_json& j);

struct JsonOptions {
  std::optional<std::string> indent;  // nullopt: single line
  std::string item_sep = ", ";
  std::string key_sep = ": ";
  bool ensure_ascii = false;
  bool sort_keys = false;
};
// Python's json.dumps.
std::string to_json(const Value& v, const JsonOptions& opt);

}  // namespace dflash::jinja
