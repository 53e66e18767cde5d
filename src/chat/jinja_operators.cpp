// Python's operators on template values: arithmetic, comparison and containment, attribute
// and item access, slicing.
#include <cmath>

#include "chat/jinja_budget.h"
#include "chat/jinja_builtins.h"
#include "chat/jinja_eval.h"
#include "chat/jinja_strings.h"

namespace dflash::jinja {

namespace {

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
  check_size(list_bytes(a.list().items) + list_bytes(b.list().items));
  ValueList items = a.list().items;
  items.insert(items.end(), b.list().items.begin(), b.list().items.end());
  return Value::make_list(std::move(items), a.list().kind);
}

Value repeat(const Value& seq, int64_t n) {
  if (seq.is_string()) return Value(py_repeat(seq.str(), n));
  const ValueList& once = seq.list().items;
  check_repeat(list_bytes(once), n);
  ValueList items;
  for (int64_t i = 0; i < n; ++i) items.insert(items.end(), once.begin(), once.end());
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

Value unsafe_attr(const Value& obj, const std::string& name) {
  return Value::undefined("access to attribute '" + name + "' of '" + type_name(obj) + "' object is unsafe.", true);
}

Value no_attribute(const Value& obj, const std::string& name) {
  return Value::undefined("'" + object_type_repr(obj) + "' has no attribute '" + name + "'");
}

}  // namespace

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
  if ((obj.is_string() || obj.is_sequence_list()) && key.is_integral()) {
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
    if (!v.is_integral()) fail("slice indices must be integers or None or have an __index__ method");
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
  bool ints = a.is_integral() && b.is_integral();
  if (op == "+") {
    if (ints) return Value(add_checked(a.as_int(), b.as_int()));
    if (nums) return Value(a.as_double() + b.as_double());
    if (a.is_string() && b.is_string()) check_size(a.str().size() + b.str().size());
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
    if ((a.is_string() || a.is_sequence_list()) && b.is_integral()) return repeat(a, b.as_int());
    if ((b.is_string() || b.is_sequence_list()) && a.is_integral()) return repeat(b, a.as_int());
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

}  // namespace dflash::jinja
