// jinja2's filters on values of any type, plus Hugging Face's replacement for tojson, and the
// lookup of a filter by name in every filter file's table.
#include <algorithm>

#include "chat/jinja_eval.h"
#include "chat/jinja_filters.h"
#include "chat/jinja_strings.h"

namespace dflash::jinja {

namespace {

Value f_attr(Interpreter& in, Value v, CallArgs& a) {
  Binder b("attr", a, {"name"}, 1);
  if (v.is_undefined()) fail_undefined(v);
  if (!b[0].is_string()) fail("attribute name must be string");
  const std::string& name = b[0].str();
  if (v.is_object()) {
    if (auto r = v.object().getattr(name)) return *r;
  } else if (method_kind(v, name) != MethodKind::None) {
    return in.getattr(v, name);
  }
  return Value::undefined("'" + object_type_repr(v) + "' has no attribute '" + name + "'");
}

Value f_default(Interpreter&, Value v, CallArgs& a) {
  Binder b("default", a, {"default_value", "boolean"});
  if (v.is_undefined() || (truthy(b[1]) && !truthy(v))) return b.get(0, Value(""));
  return v;
}

Value f_pprint(Interpreter&, Value v, CallArgs& a) {
  Binder b("pprint", a, {});
  return Value(repr(v));
}

Value f_random(Interpreter&, Value, CallArgs&) {
  fail("the random filter is not supported: renderings must be deterministic");
}

// Hugging Face: json.dumps(x, ensure_ascii=False, indent=indent, separators=separators, sort_keys=False).
Value f_tojson(Interpreter&, Value v, CallArgs& a) {
  Binder b("tojson", a, {"ensure_ascii", "indent", "separators", "sort_keys"});
  JsonOptions opt;
  opt.ensure_ascii = truthy(b[0]);
  opt.sort_keys = truthy(b[3]);
  const Value& indent = b[1];
  if (indent.is_string()) opt.indent = indent.str();
  else if (indent.is_integral()) opt.indent = py_repeat(" ", indent.as_int());
  else if (!indent.is_none() && !indent.is_undefined()) fail("indent must be an int or a string");
  if (opt.indent) opt.item_sep = ",";
  const Value& sep = b[2];
  if (!sep.is_none() && !sep.is_undefined()) {
    if (!sep.is_sequence_list() || sep.list().items.size() != 2 || !sep.list().items[0].is_string() ||
        !sep.list().items[1].is_string())
      fail("separators must be a pair of strings");
    opt.item_sep = sep.list().items[0].str();
    opt.key_sep = sep.list().items[1].str();
  }
  return Value(to_json(v, opt));
}

const NamedFilter kFilters[] = {
    {"attr", f_attr},
    {"d", f_default},
    {"default", f_default},
    {"pprint", f_pprint},
    {"random", f_random},
    {"tojson", f_tojson},
};

}  // namespace

FilterFn find_filter(const std::string& name) {
  for (auto table : {std::span<const NamedFilter>(kFilters), string_filters(), list_filters(), number_filters()})
    for (const auto& f : table)
      if (name == f.name) return f.fn;
  return nullptr;
}

}  // namespace dflash::jinja
