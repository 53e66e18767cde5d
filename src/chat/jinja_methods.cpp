// The sandbox-visible methods of Python's str, list, tuple and dict.
#include <algorithm>

#include "chat/jinja_budget.h"
#include "chat/jinja_builtins.h"
#include "chat/jinja_strings.h"
#include "chat/jinja_unicode.h"

namespace dflash::jinja {

Binder::Binder(const std::string& fn, CallArgs& args, const std::vector<std::string>& params,
               size_t required)
    : vals_(params.size()) {
  if (args.pos.size() > params.size())
    fail(fn + "() takes at most " + std::to_string(params.size()) + " argument(s) (" +
         std::to_string(args.pos.size()) + " given)");
  for (size_t i = 0; i < args.pos.size(); ++i) vals_[i] = args.pos[i];
  for (auto& kv : args.kw) {
    auto it = std::find(params.begin(), params.end(), kv.first);
    if (it == params.end()) fail(fn + "() got an unexpected keyword argument '" + kv.first + "'");
    size_t i = static_cast<size_t>(it - params.begin());
    if (vals_[i]) fail(fn + "() got multiple values for argument '" + kv.first + "'");
    vals_[i] = kv.second;
  }
  for (size_t i = 0; i < required; ++i)
    if (!vals_[i]) fail(fn + "() missing required argument '" + params[i] + "'");
}

const Value& Binder::operator[](size_t i) const {
  static const Value kUndefined;
  return vals_[i] ? *vals_[i] : kUndefined;
}

int64_t int_arg(const Value& v, const char* what) {
  if (v.is_int() || v.is_bool()) return v.as_int();
  if (v.is_undefined()) fail_undefined(v);
  fail(std::string("'") + type_name(v) + "' object cannot be interpreted as an integer (" + what + ")");
}

std::string BoundMethod::repr() const {
  return "<built-in method " + name_ + " of " + jinja::type_name(self_) + " object>";
}

Value BoundMethod::call(Interpreter& in, CallArgs& args) { return call_method(in, self_, name_, args); }

namespace {

const std::vector<std::string> kStrMethods = {
    "capitalize", "casefold", "center", "count", "endswith", "find", "format", "index",
    "isalnum", "isalpha", "isascii", "isdecimal", "isdigit", "isidentifier", "islower",
    "isnumeric", "isspace", "istitle", "isupper", "join", "ljust", "lower", "lstrip",
    "partition", "removeprefix", "removesuffix", "replace", "rfind", "rindex", "rjust",
    "rpartition", "rsplit", "rstrip", "split", "splitlines", "startswith", "strip", "swapcase",
    "title", "upper", "zfill"};
const std::vector<std::string> kListSafe = {"count", "index", "copy", "pop", "clear"};
const std::vector<std::string> kListUnsafe = {"append", "extend", "insert", "remove", "reverse", "sort"};
const std::vector<std::string> kTupleSafe = {"count", "index"};
const std::vector<std::string> kDictSafe = {"items", "keys", "values", "get", "copy"};
const std::vector<std::string> kDictUnsafe = {"clear", "pop", "popitem", "setdefault", "update"};

bool listed(const std::vector<std::string>& v, const std::string& s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}

std::optional<std::string> opt_str(const Value& v, const std::string& fn) {
  if (v.is_undefined() || v.is_none()) return std::nullopt;
  if (!v.is_string()) fail(fn + " arg must be None or str");
  return v.str();
}

std::optional<int64_t> opt_int(const Value& v) {
  if (v.is_undefined() || v.is_none()) return std::nullopt;
  return int_arg(v, "slice index");
}

// The part of s that str methods taking start/end look at.
std::string sub_range(const std::string& s, const Binder& b, size_t first) {
  if (!b.has(first) && !b.has(first + 1)) return s;
  SliceRange r = adjust_slice(py_len(Value(s)), opt_int(b[first]), opt_int(b[first + 1]), 1);
  return str_slice(s, r);
}

bool affix_match(const std::string& s, const Value& affix, bool prefix, const char* fn) {
  auto one = [&](const Value& a) {
    if (!a.is_string())
      fail(std::string(fn) + " first arg must be str or a tuple of str, not " + type_name(a));
    const std::string& x = a.str();
    if (x.size() > s.size()) return false;
    return prefix ? s.compare(0, x.size(), x) == 0 : s.compare(s.size() - x.size(), x.size(), x) == 0;
  };
  if (affix.is_list_kind(ListKind::Tuple)) {
    for (const auto& a : affix.list().items)
      if (one(a)) return true;
    return false;
  }
  return one(affix);
}

template <typename Pred>
bool all_chars(const std::string& s, Pred p) {
  std::u32string u = utf8_decode(s);
  if (u.empty()) return false;
  for (char32_t c : u)
    if (!p(c)) return false;
  return true;
}

Value list_of_strings(const std::vector<std::string>& parts) {
  ValueList items;
  items.reserve(parts.size());
  for (const auto& p : parts) items.emplace_back(p);
  return Value::make_list(std::move(items));
}

Value str_method(Interpreter& in, const std::string& s, const std::string& name, CallArgs& args) {
  const std::string fn = "str." + name;
  if (name == "format") return Value(str_format(in, s, args));
  if (name == "upper") return Value(py_upper(s));
  if (name == "lower" || name == "casefold") return Value(py_lower(s));
  if (name == "title") return Value(py_str_title(s));
  if (name == "capitalize") return Value(py_capitalize(s));
  if (name == "swapcase") return Value(py_swapcase(s));
  if (name == "strip" || name == "lstrip" || name == "rstrip") {
    Binder b(fn, args, {"chars"});
    return Value(py_strip(s, opt_str(b[0], name), name != "rstrip", name != "lstrip"));
  }
  if (name == "split" || name == "rsplit") {
    Binder b(fn, args, {"sep", "maxsplit"});
    auto sep = opt_str(b[0], name);
    int64_t maxsplit = b.has(1) ? int_arg(b[1], "maxsplit") : -1;
    return list_of_strings(name == "split" ? py_split(s, sep, maxsplit) : py_rsplit(s, sep, maxsplit));
  }
  if (name == "splitlines") {
    Binder b(fn, args, {"keepends"});
    return list_of_strings(py_splitlines(s, truthy(b[0])));
  }
  if (name == "startswith" || name == "endswith") {
    Binder b(fn, args, {"affix", "start", "end"}, 1);
    return Value(affix_match(sub_range(s, b, 1), b[0], name == "startswith", name.c_str()));
  }
  if (name == "replace") {
    Binder b(fn, args, {"old", "new", "count"}, 2);
    if (!b[0].is_string() || !b[1].is_string()) fail("replace() arguments must be str");
    return Value(py_replace(s, b[0].str(), b[1].str(), b.has(2) ? int_arg(b[2], "count") : -1));
  }
  if (name == "find" || name == "rfind" || name == "index" || name == "rindex") {
    Binder b(fn, args, {"sub", "start", "end"}, 1);
    if (!b[0].is_string()) fail("must be str, not " + type_name(b[0]));
    int64_t r = py_find(s, b[0].str(), opt_int(b[1]), opt_int(b[2]), name[0] == 'r');
    if (r < 0 && name.find("index") != std::string::npos) fail("substring not found");
    return Value(r);
  }
  if (name == "count") {
    Binder b(fn, args, {"sub", "start", "end"}, 1);
    if (!b[0].is_string()) fail("must be str, not " + type_name(b[0]));
    return Value(py_count(s, b[0].str(), opt_int(b[1]), opt_int(b[2])));
  }
  if (name == "join") {
    Binder b(fn, args, {"iterable"}, 1);
    std::string out;
    ValueList items = iterate(b[0]);
    for (size_t i = 0; i < items.size(); ++i) {
      if (!items[i].is_string())
        fail("sequence item " + std::to_string(i) + ": expected str instance, " + type_name(items[i]) + " found");
      if (i) append_checked(out, s);
      append_checked(out, items[i].str());
    }
    return Value(std::move(out));
  }
  if (name == "center" || name == "ljust" || name == "rjust") {
    Binder b(fn, args, {"width", "fillchar"}, 1);
    char32_t fill = ' ';
    if (b.has(1)) {
      std::u32string f = b[1].is_string() ? utf8_decode(b[1].str()) : std::u32string();
      if (f.size() != 1) fail("The fill character must be exactly one character long");
      fill = f[0];
    }
    int64_t w = int_arg(b[0], "width");
    if (name == "center") return Value(py_center(s, w, fill));
    return Value(py_pad(s, w, fill, name == "ljust" ? '<' : '>'));
  }
  if (name == "zfill") {
    Binder b(fn, args, {"width"}, 1);
    int64_t w = int_arg(b[0], "width"), len = py_len(Value(s));
    if (w <= len) return Value(s);
    check_size(static_cast<uint64_t>(w - len));
    std::string pad(static_cast<size_t>(w - len), '0');
    if (!s.empty() && (s[0] == '+' || s[0] == '-')) return Value(s.substr(0, 1) + pad + s.substr(1));
    return Value(pad + s);
  }
  if (name == "partition" || name == "rpartition") {
    Binder b(fn, args, {"sep"}, 1);
    if (!b[0].is_string()) fail("must be str, not " + type_name(b[0]));
    const std::string& sep = b[0].str();
    if (sep.empty()) fail("empty separator");
    size_t f = name == "partition" ? s.find(sep) : s.rfind(sep);
    if (f == std::string::npos)
      return name == "partition" ? Value::make_tuple({Value(s), Value(""), Value("")})
                                 : Value::make_tuple({Value(""), Value(""), Value(s)});
    return Value::make_tuple({Value(s.substr(0, f)), Value(sep), Value(s.substr(f + sep.size()))});
  }
  if (name == "removeprefix" || name == "removesuffix") {
    Binder b(fn, args, {"affix"}, 1);
    if (!b[0].is_string()) fail("must be str, not " + type_name(b[0]));
    const std::string& a = b[0].str();
    if (a.empty() || a.size() > s.size()) return Value(s);
    if (name == "removeprefix") return Value(s.compare(0, a.size(), a) == 0 ? s.substr(a.size()) : s);
    return Value(s.compare(s.size() - a.size(), a.size(), a) == 0 ? s.substr(0, s.size() - a.size()) : s);
  }
  Binder none(fn, args, {});
  if (name == "isalpha") return Value(all_chars(s, py_isalpha));
  if (name == "isalnum") return Value(all_chars(s, py_isalnum));
  if (name == "isdecimal") return Value(all_chars(s, py_isdecimal));
  if (name == "isdigit") return Value(all_chars(s, py_isdigit));
  if (name == "isnumeric")
    return Value(all_chars(s, [](char32_t c) { return py_isalnum(c) && !py_isalpha(c); }));
  if (name == "isspace") return Value(all_chars(s, py_isspace));
  if (name == "isascii") return Value(is_ascii(s));
  if (name == "isidentifier") {
    std::u32string u = utf8_decode(s);
    if (u.empty() || !py_is_identifier_start(u[0])) return Value(false);
    return Value(std::all_of(u.begin(), u.end(), py_is_identifier_char));
  }
  if (name == "islower" || name == "isupper") {
    bool cased = false;
    for (char32_t c : utf8_decode(s)) {
      if (name == "islower" ? py_isupper(c) : py_islower(c)) return Value(false);
      cased = cased || py_iscased(c);
    }
    return Value(cased);
  }
  if (name == "istitle") {
    bool prev_cased = false, any = false;
    for (char32_t c : utf8_decode(s)) {
      if (py_isupper(c)) {
        if (prev_cased) return Value(false);
        prev_cased = any = true;
      } else if (py_islower(c)) {
        if (!prev_cased) return Value(false);
        prev_cased = any = true;
      } else {
        prev_cased = false;
      }
    }
    return Value(any);
  }
  fail("'str' object has no attribute '" + name + "'");
}

Value list_method(const Value& self, const std::string& name, CallArgs& args) {
  ListData& l = self.list();
  const std::string fn = type_name(self) + "." + name;
  if (name == "count") {
    Binder b(fn, args, {"value"}, 1);
    int64_t n = 0;
    for (const auto& x : l.items) n += py_equal(x, b[0]);
    return Value(n);
  }
  if (name == "index") {
    Binder b(fn, args, {"value", "start", "stop"}, 1);
    SliceRange r = adjust_slice(static_cast<int64_t>(l.items.size()), opt_int(b[1]), opt_int(b[2]), 1);
    for (int64_t i = r.start; i < r.stop; ++i)
      if (py_equal(l.items[static_cast<size_t>(i)], b[0])) return Value(i);
    fail(repr(b[0]) + " is not in " + type_name(self));
  }
  if (name == "copy") {
    Binder b(fn, args, {});
    return Value::make_list(l.items, l.kind);
  }
  if (name == "clear") {
    Binder b(fn, args, {});
    l.items.clear();
    return Value(nullptr);
  }
  if (name == "pop") {
    Binder b(fn, args, {"index"});
    if (l.items.empty()) fail("pop from empty list");
    int64_t n = static_cast<int64_t>(l.items.size());
    int64_t i = b.has(0) ? int_arg(b[0], "index") : -1;
    if (i < 0) i += n;
    if (i < 0 || i >= n) fail("pop index out of range");
    Value v = l.items[static_cast<size_t>(i)];
    l.items.erase(l.items.begin() + i);
    return v;
  }
  fail("'" + type_name(self) + "' object has no attribute '" + name + "'");
}

Value dict_view(const DictData& d, const char* kind) {
  ValueList items;
  for (const auto& kv : d.items) {
    if (kind[5] == 'i')
      items.push_back(Value::make_tuple({kv.first, kv.second}));
    else
      items.push_back(kind[5] == 'k' ? kv.first : kv.second);
  }
  Value v = Value::make_list(std::move(items), ListKind::View);
  v.list().view_name = kind;
  return v;
}

Value dict_method(const Value& self, const std::string& name, CallArgs& args) {
  DictData& d = self.dict();
  const std::string fn = "dict." + name;
  if (name == "items" || name == "keys" || name == "values") {
    Binder b(fn, args, {});
    return dict_view(d, name == "items" ? "dict_items" : name == "keys" ? "dict_keys" : "dict_values");
  }
  if (name == "get") {
    Binder b(fn, args, {"key", "default"}, 1);
    if (!is_hashable(b[0])) fail("unhashable type: '" + type_name(b[0]) + "'");
    if (const Value* v = d.find(b[0])) return *v;
    return b.get(1, Value(nullptr));
  }
  if (name == "copy") {
    Binder b(fn, args, {});
    auto c = std::make_shared<DictData>(d);
    return Value(std::move(c));
  }
  fail("'dict' object has no attribute '" + name + "'");
}

}  // namespace

MethodKind method_kind(const Value& self, const std::string& name) {
  switch (self.type()) {
    case Type::String: return listed(kStrMethods, name) ? MethodKind::Safe : MethodKind::None;
    case Type::List:
      switch (self.list().kind) {
        case ListKind::List:
          if (listed(kListSafe, name)) return MethodKind::Safe;
          return listed(kListUnsafe, name) ? MethodKind::Unsafe : MethodKind::None;
        case ListKind::Tuple: return listed(kTupleSafe, name) ? MethodKind::Safe : MethodKind::None;
        default: return MethodKind::None;
      }
    case Type::Dict:
      if (listed(kDictSafe, name)) return MethodKind::Safe;
      return listed(kDictUnsafe, name) ? MethodKind::Unsafe : MethodKind::None;
    default: return MethodKind::None;
  }
}

// markupsafe.Markup wraps str methods: string arguments are escaped, string results are Markup.
Value markup_method(Interpreter& in, const Value& self, const std::string& name, CallArgs& args) {
  static const std::vector<std::string> kWrapped = {
      "capitalize", "title", "lower", "upper", "replace", "ljust", "rjust", "lstrip", "rstrip",
      "center", "strip", "swapcase", "zfill", "casefold", "split", "rsplit", "splitlines",
      "partition", "rpartition", "format", "join"};
  if (!listed(kWrapped, name)) return str_method(in, self.str(), name, args);
  auto esc = [](Value& v) {
    if (v.is_string()) v = Value::markup(markup_escape(v));
  };
  CallArgs escaped = args;
  if (name == "join") {
    ValueList items;
    if (!escaped.pos.empty()) {
      for (auto& x : iterate(escaped.pos[0])) {
        esc(x);
        items.push_back(std::move(x));
      }
      escaped.pos[0] = Value::make_list(std::move(items));
    }
  } else {
    for (auto& v : escaped.pos) esc(v);
    for (auto& kv : escaped.kw) esc(kv.second);
  }
  Value r = str_method(in, self.str(), name, escaped);
  if (r.is_string()) return Value::markup(r.str());
  if (r.is_list())
    for (auto& x : r.list().items)
      if (x.is_string()) x = Value::markup(x.str());
  return r;
}

Value call_method(Interpreter& in, const Value& self, const std::string& name, CallArgs& args) {
  switch (self.type()) {
    case Type::String:
      if (self.is_markup()) return markup_method(in, self, name, args);
      return str_method(in, self.str(), name, args);
    case Type::List: return list_method(self, name, args);
    case Type::Dict: return dict_method(self, name, args);
    default: fail("'" + type_name(self) + "' object has no attribute '" + name + "'");
  }
}

}  // namespace dflash::jinja
