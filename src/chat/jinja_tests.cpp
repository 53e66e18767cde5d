// jinja2's builtin tests (`x is defined`, `x is string`, ...).
#include <algorithm>

#include "chat/jinja_builtins.h"
#include "chat/jinja_eval.h"
#include "chat/jinja_unicode.h"

namespace dflash::jinja {

namespace {

const Value& one_arg(CallArgs& a, const char* name) {
  if (a.pos.size() != 1 || !a.kw.empty()) fail(std::string("test '") + name + "' takes exactly one argument");
  return a.pos[0];
}

void no_args(CallArgs& a, const char* name) {
  if (!a.pos.empty() || !a.kw.empty()) fail(std::string("test '") + name + "' takes no arguments");
}

bool t_boolean(Interpreter&, const Value& v, CallArgs& a) { no_args(a, "boolean"); return v.is_bool(); }
bool t_callable(Interpreter&, const Value& v, CallArgs& a) {
  no_args(a, "callable");
  // Undefined defines __call__ (to raise), so Python's callable() accepts it.
  return v.is_undefined() || (v.is_object() && v.object().is_callable());
}
bool t_defined(Interpreter&, const Value& v, CallArgs& a) { no_args(a, "defined"); return !v.is_undefined(); }
bool t_undefined(Interpreter&, const Value& v, CallArgs& a) { no_args(a, "undefined"); return v.is_undefined(); }
bool t_none(Interpreter&, const Value& v, CallArgs& a) { no_args(a, "none"); return v.is_none(); }
bool t_true(Interpreter&, const Value& v, CallArgs& a) { no_args(a, "true"); return v.is_bool() && v.as_bool(); }
bool t_false(Interpreter&, const Value& v, CallArgs& a) { no_args(a, "false"); return v.is_bool() && !v.as_bool(); }
bool t_integer(Interpreter&, const Value& v, CallArgs& a) { no_args(a, "integer"); return v.is_int(); }
bool t_float(Interpreter&, const Value& v, CallArgs& a) { no_args(a, "float"); return v.is_float(); }
bool t_number(Interpreter&, const Value& v, CallArgs& a) { no_args(a, "number"); return v.is_number(); }
bool t_string(Interpreter&, const Value& v, CallArgs& a) { no_args(a, "string"); return v.is_string(); }
bool t_mapping(Interpreter&, const Value& v, CallArgs& a) { no_args(a, "mapping"); return v.is_dict(); }
bool t_escaped(Interpreter&, const Value&, CallArgs& a) { no_args(a, "escaped"); return false; }

bool t_iterable(Interpreter&, const Value& v, CallArgs& a) {
  no_args(a, "iterable");
  return v.is_undefined() || v.is_string() || v.is_list() || v.is_dict() ||
         (v.is_object() && v.object().type_name() == "LoopContext");
}

bool t_sequence(Interpreter&, const Value& v, CallArgs& a) {
  no_args(a, "sequence");
  // Needs len() and __getitem__: str, list, tuple, dict, and Undefined (which defines both).
  return v.is_undefined() || v.is_string() || v.is_sequence_list() || v.is_dict();
}

bool t_lower(Interpreter&, const Value& v, CallArgs& a) {
  no_args(a, "lower");
  bool cased = false;
  for (char32_t c : utf8_decode(to_str(v))) {
    if (py_isupper(c)) return false;
    cased = cased || py_iscased(c);
  }
  return cased;
}

bool t_upper(Interpreter&, const Value& v, CallArgs& a) {
  no_args(a, "upper");
  bool cased = false;
  for (char32_t c : utf8_decode(to_str(v))) {
    if (py_islower(c)) return false;
    cased = cased || py_iscased(c);
  }
  return cased;
}

bool t_odd(Interpreter&, const Value& v, CallArgs& a) {
  no_args(a, "odd");
  return py_equal(binary_op("%", v, Value(2)), Value(1));
}
bool t_even(Interpreter&, const Value& v, CallArgs& a) {
  no_args(a, "even");
  return py_equal(binary_op("%", v, Value(2)), Value(0));
}
bool t_divisibleby(Interpreter&, const Value& v, CallArgs& a) {
  return py_equal(binary_op("%", v, one_arg(a, "divisibleby")), Value(0));
}

bool compare_undefined_guard(const Value& x, const Value& y) {
  if (x.is_undefined()) fail_undefined(x);
  if (y.is_undefined()) fail_undefined(y);
  return true;
}

bool t_eq(Interpreter&, const Value& v, CallArgs& a) { return py_equal(v, one_arg(a, "eq")); }
bool t_ne(Interpreter&, const Value& v, CallArgs& a) { return !py_equal(v, one_arg(a, "ne")); }
bool t_lt(Interpreter&, const Value& v, CallArgs& a) {
  const Value& o = one_arg(a, "lt");
  return compare_undefined_guard(v, o) && py_less(v, o);
}
bool t_gt(Interpreter&, const Value& v, CallArgs& a) {
  const Value& o = one_arg(a, "gt");
  return compare_undefined_guard(v, o) && py_less(o, v);
}
bool t_le(Interpreter&, const Value& v, CallArgs& a) {
  const Value& o = one_arg(a, "le");
  return compare_undefined_guard(v, o) && (py_less(v, o) || py_equal(v, o));
}
bool t_ge(Interpreter&, const Value& v, CallArgs& a) {
  const Value& o = one_arg(a, "ge");
  return compare_undefined_guard(v, o) && (py_less(o, v) || py_equal(v, o));
}

bool t_in(Interpreter&, const Value& v, CallArgs& a) {
  const Value& seq = one_arg(a, "in");
  if (seq.is_string()) {
    if (!v.is_string()) fail("'in <string>' requires string as left operand, not " + type_name(v));
    return seq.str().find(v.str()) != std::string::npos;
  }
  if (seq.is_dict()) return seq.dict().find(v) != nullptr;
  ValueList items = iterate(seq);
  return std::any_of(items.begin(), items.end(), [&](const Value& x) { return py_equal(x, v); });
}

bool t_sameas(Interpreter&, const Value& v, CallArgs& a) {
  const Value& o = one_arg(a, "sameas");
  if (v.type() != o.type()) return false;
  if (v.identity()) return v.identity() == o.identity();
  return py_equal(v, o);
}

bool t_filter(Interpreter&, const Value& v, CallArgs& a) {
  no_args(a, "filter");
  return v.is_string() && find_filter(v.str()) != nullptr;
}

bool t_test(Interpreter&, const Value& v, CallArgs& a) {
  no_args(a, "test");
  return v.is_string() && find_test(v.str()) != nullptr;
}

struct NamedTest {
  const char* name;
  TestFn fn;
};

const NamedTest kTests[] = {
    {"boolean", t_boolean}, {"callable", t_callable}, {"defined", t_defined},
    {"divisibleby", t_divisibleby}, {"eq", t_eq}, {"equalto", t_eq}, {"==", t_eq},
    {"escaped", t_escaped}, {"even", t_even}, {"false", t_false}, {"filter", t_filter},
    {"float", t_float}, {"ge", t_ge}, {">=", t_ge}, {"gt", t_gt}, {">", t_gt},
    {"greaterthan", t_gt}, {"in", t_in}, {"integer", t_integer}, {"iterable", t_iterable},
    {"le", t_le}, {"<=", t_le}, {"lower", t_lower}, {"lt", t_lt}, {"<", t_lt},
    {"lessthan", t_lt}, {"mapping", t_mapping}, {"ne", t_ne}, {"!=", t_ne}, {"none", t_none},
    {"number", t_number}, {"odd", t_odd}, {"sameas", t_sameas}, {"sequence", t_sequence},
    {"string", t_string}, {"test", t_test}, {"true", t_true}, {"undefined", t_undefined},
    {"upper", t_upper},
};

}  // namespace

TestFn find_test(const std::string& name) {
  for (const auto& t : kTests)
    if (name == t.name) return t.fn;
  return nullptr;
}

}  // namespace dflash::jinja
