// jinja2's builtin filters, plus Hugging Face's replacement for tojson.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>

#include "chat/jinja_builtins.h"
#include "chat/jinja_eval.h"
#include "chat/jinja_strings.h"
#include "chat/jinja_unicode.h"

namespace dflash::jinja {

namespace {

Value generator(ValueList items) { return Value::make_list(std::move(items), ListKind::Generator); }

Value lower_if_string(Value v) { return v.is_string() ? Value(py_lower(v.str())) : v; }

// jinja2's make_attrgetter: "a.b.0" walks items with subscript-then-attribute lookup.
struct AttrGetter {
  std::vector<Value> parts;
  std::optional<Value> dflt;
  bool ignore_case = false;

  AttrGetter(const Value& attribute, std::optional<Value> d, bool lower) : dflt(std::move(d)), ignore_case(lower) {
    if (attribute.is_string()) {
      for (const auto& p : py_split(attribute.str(), std::string("."), -1)) {
        bool digits = !p.empty() && std::all_of(p.begin(), p.end(), [](char c) { return c >= '0' && c <= '9'; });
        parts.push_back(digits ? Value(static_cast<int64_t>(std::stoll(p))) : Value(p));
      }
    } else if (!attribute.is_none() && !attribute.is_undefined()) {
      parts.push_back(attribute);
    }
  }

  Value operator()(Interpreter& in, Value item) const {
    for (const auto& p : parts) {
      item = in.getitem(item, p);
      if (dflt && item.is_undefined()) item = *dflt;
    }
    return ignore_case ? lower_if_string(std::move(item)) : item;
  }
};

// make_multi_attrgetter: "age,name" gives a list key.
Value multi_key(Interpreter& in, const Value& attribute, const Value& item, bool lower) {
  if (!attribute.is_string()) return AttrGetter(attribute, std::nullopt, lower)(in, item);
  ValueList key;
  for (const auto& part : py_split(attribute.str(), std::string(","), -1))
    key.push_back(AttrGetter(Value(part), std::nullopt, lower)(in, item));
  return Value::make_list(std::move(key));
}

ValueList sorted_by(ValueList items, const std::vector<Value>& keys, bool reverse) {
  std::vector<size_t> order(items.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return reverse ? py_less(keys[b], keys[a]) : py_less(keys[a], keys[b]);
  });
  ValueList out;
  for (size_t i : order) out.push_back(std::move(items[i]));
  return out;
}

std::string soft_str(const Value& v) { return to_str(v); }

// Filters that call a str method on soft_str(value) return Markup when given Markup.
Value like(const Value& v, std::string s) { return v.is_markup() ? Value::markup(std::move(s)) : Value(std::move(s)); }

Value f_abs(Interpreter&, Value v, CallArgs& a) {
  Binder b("abs", a, {});
  if (v.is_int() || v.is_bool()) {
    if (v.as_int() == INT64_MIN) fail("integer overflow");
    return Value(static_cast<int64_t>(std::llabs(v.as_int())));
  }
  if (v.is_float()) return Value(std::fabs(v.as_double()));
  fail("bad operand type for abs(): '" + type_name(v) + "'");
}

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

Value f_batch(Interpreter&, Value v, CallArgs& a) {
  Binder b("batch", a, {"linecount", "fill_with"}, 1);
  int64_t n = int_arg(b[0], "linecount");
  ValueList out, tmp;
  for (auto& item : iterate(v)) {
    if (static_cast<int64_t>(tmp.size()) == n) {
      out.push_back(Value::make_list(std::move(tmp)));
      tmp.clear();
    }
    tmp.push_back(std::move(item));
  }
  if (!tmp.empty()) {
    if (b.has(1) && !b[1].is_none())
      while (static_cast<int64_t>(tmp.size()) < n) tmp.push_back(b[1]);
    out.push_back(Value::make_list(std::move(tmp)));
  }
  return generator(std::move(out));
}

Value f_capitalize(Interpreter&, Value v, CallArgs& a) {
  Binder b("capitalize", a, {});
  return like(v, py_capitalize(soft_str(v)));
}

Value f_center(Interpreter&, Value v, CallArgs& a) {
  Binder b("center", a, {"width"});
  return like(v, py_center(soft_str(v), b.has(0) ? int_arg(b[0], "width") : 80, ' '));
}

Value f_length(Interpreter&, Value v, CallArgs& a) {
  Binder b("length", a, {});
  return Value(py_len(v));
}

Value f_default(Interpreter&, Value v, CallArgs& a) {
  Binder b("default", a, {"default_value", "boolean"});
  if (v.is_undefined() || (truthy(b[1]) && !truthy(v))) return b.get(0, Value(""));
  return v;
}

Value f_dictsort(Interpreter&, Value v, CallArgs& a) {
  Binder b("dictsort", a, {"case_sensitive", "by", "reverse"});
  if (!v.is_dict()) fail("'" + type_name(v) + "' object has no attribute 'items'");
  std::string by = b.has(1) ? soft_str(b[1]) : "key";
  if (by != "key" && by != "value") fail("You can only sort by either \"key\" or \"value\"");
  ValueList items;
  std::vector<Value> keys;
  for (const auto& kv : v.dict().items) {
    items.push_back(Value::make_tuple({kv.first, kv.second}));
    Value k = by == "key" ? kv.first : kv.second;
    keys.push_back(truthy(b[0]) ? k : lower_if_string(k));
  }
  return Value::make_list(sorted_by(std::move(items), keys, truthy(b[2])));
}

Value f_escape(Interpreter&, Value v, CallArgs& a) {
  Binder b("escape", a, {});
  return Value::markup(markup_escape(v));
}

Value f_forceescape(Interpreter&, Value v, CallArgs& a) {
  Binder b("forceescape", a, {});
  return Value::markup(html_escape(to_str(v)));
}


Value f_filesizeformat(Interpreter&, Value v, CallArgs& a) {
  Binder b("filesizeformat", a, {"binary"});
  bool binary = truthy(b[0]);
  double bytes;
  if (v.is_number()) bytes = v.as_double();
  else if (v.is_string()) bytes = std::stod(v.str());
  else fail("float() argument must be a string or a real number, not '" + type_name(v) + "'");
  double base = binary ? 1024 : 1000;
  static const char* kDec[] = {"kB", "MB", "GB", "TB", "PB", "EB", "ZB", "YB"};
  static const char* kBin[] = {"KiB", "MiB", "GiB", "TiB", "PiB", "EiB", "ZiB", "YiB"};
  if (bytes == 1) return Value("1 Byte");
  if (bytes < base) return Value(std::to_string(static_cast<int64_t>(bytes)) + " Bytes");
  double unit = base;
  const char* prefix = "";
  for (int i = 0; i < 8; ++i) {
    unit = std::pow(base, i + 2);
    prefix = binary ? kBin[i] : kDec[i];
    if (bytes < unit) break;
  }
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.1f %s", base * bytes / unit, prefix);
  return Value(buf);
}

Value f_first(Interpreter&, Value v, CallArgs& a) {
  Binder b("first", a, {});
  if (v.is_list_kind(ListKind::Generator)) {
    ListData& l = v.list();
    if (l.consumed < l.items.size()) return l.items[l.consumed++];
  } else {
    ValueList items = iterate(v);
    if (!items.empty()) return items.front();
  }
  return Value::undefined("No first item, sequence was empty.");
}

std::optional<double> parse_py_float(const std::string& text) {
  std::string s = py_strip(text, std::nullopt, true, true), clean;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '_') {
      if (i == 0 || i + 1 == s.size() || !isdigit(static_cast<unsigned char>(s[i - 1])) ||
          !isdigit(static_cast<unsigned char>(s[i + 1])))
        return std::nullopt;
      continue;
    }
    clean.push_back(s[i]);
  }
  std::string low = py_lower(clean);
  std::string body = !low.empty() && (low[0] == '+' || low[0] == '-') ? low.substr(1) : low;
  if (body == "inf" || body == "infinity" || body == "nan") {
    double d = body == "nan" ? NAN : INFINITY;
    return low[0] == '-' ? -d : d;
  }
  if (body.empty() || body.find_first_not_of("0123456789.e+-") != std::string::npos) return std::nullopt;
  char* end = nullptr;
  double d = std::strtod(clean.c_str(), &end);
  if (end != clean.c_str() + clean.size()) return std::nullopt;
  return d;
}

Value f_float(Interpreter&, Value v, CallArgs& a) {
  Binder b("float", a, {"default"});
  if (v.is_undefined()) fail_undefined(v);
  if (v.is_number()) return Value(v.as_double());
  if (v.is_string())
    if (auto d = parse_py_float(v.str())) return Value(*d);
  return b.get(0, Value(0.0));
}

std::optional<int64_t> parse_py_int(const std::string& text, int64_t base) {
  std::string s = py_strip(text, std::nullopt, true, true);
  bool neg = false;
  size_t i = 0;
  if (i < s.size() && (s[i] == '+' || s[i] == '-')) neg = s[i++] == '-';
  if (base == 0 || base == 16 || base == 8 || base == 2) {
    if (i + 1 < s.size() && s[i] == '0') {
      char p = static_cast<char>(s[i + 1] | 0x20);
      int64_t pb = p == 'x' ? 16 : p == 'o' ? 8 : p == 'b' ? 2 : 0;
      if (pb && (base == 0 || base == pb)) {
        base = pb;
        i += 2;
        if (i < s.size() && s[i] == '_') ++i;
      }
    }
    if (base == 0) base = 10;
  }
  if (base < 2 || base > 36 || i >= s.size()) return std::nullopt;
  int64_t v = 0;
  bool prev_digit = false;
  for (; i < s.size(); ++i) {
    char c = s[i];
    if (c == '_' && prev_digit && i + 1 < s.size()) {
      prev_digit = false;
      continue;
    }
    int d = c >= '0' && c <= '9' ? c - '0' : (c | 0x20) >= 'a' && (c | 0x20) <= 'z' ? (c | 0x20) - 'a' + 10 : 99;
    if (d >= base) return std::nullopt;
    if (__builtin_mul_overflow(v, base, &v) || __builtin_add_overflow(v, d, &v)) return std::nullopt;
    prev_digit = true;
  }
  if (!prev_digit) return std::nullopt;
  return neg ? -v : v;
}

Value f_int(Interpreter&, Value v, CallArgs& a) {
  Binder b("int", a, {"default", "base"});
  Value dflt = b.get(0, Value(0));
  if (v.is_undefined()) fail_undefined(v);
  if (v.is_integral()) return Value(v.as_int());
  if (v.is_float()) {
    double d = v.as_double();
    if (std::isnan(d) || std::isinf(d)) return dflt;
    return Value(static_cast<int64_t>(std::trunc(d)));
  }
  if (v.is_string()) {
    if (auto i = parse_py_int(v.str(), b.has(1) ? int_arg(b[1], "base") : 10)) return Value(*i);
    if (auto d = parse_py_float(v.str()))
      if (!std::isnan(*d) && !std::isinf(*d)) return Value(static_cast<int64_t>(std::trunc(*d)));
  }
  return dflt;
}

Value f_format(Interpreter&, Value v, CallArgs& a) {
  if (!a.pos.empty() && !a.kw.empty()) fail("can't handle positional and keyword arguments at the same time");
  if (!a.kw.empty()) {
    Value d = Value::make_dict();
    for (auto& kv : a.kw) d.dict().set(Value(kv.first), kv.second);
    return Value(printf_format(soft_str(v), d));
  }
  return Value(printf_format(soft_str(v), Value::make_tuple(a.pos)));
}

Value f_groupby(Interpreter& in, Value v, CallArgs& a) {
  Binder b("groupby", a, {"attribute", "default", "case_sensitive"}, 1);
  bool cs = truthy(b[2]);
  std::optional<Value> dflt;
  if (b.has(1) && !b[1].is_none()) dflt = b[1];
  AttrGetter key(b[0], dflt, !cs), output(b[0], dflt, false);
  ValueList items = iterate(v);
  std::vector<Value> keys;
  for (const auto& item : items) keys.push_back(key(in, item));
  std::vector<size_t> order(items.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t x, size_t y) { return py_less(keys[x], keys[y]); });
  ValueList out;
  for (size_t i = 0; i < order.size();) {
    size_t j = i;
    ValueList group;
    while (j < order.size() && py_equal(keys[order[j]], keys[order[i]])) group.push_back(items[order[j++]]);
    Value k = cs ? keys[order[i]] : output(in, group.front());
    out.push_back(Value::make_tuple({k, Value::make_list(std::move(group))}));
    i = j;
  }
  return Value::make_list(std::move(out));
}

Value f_indent(Interpreter&, Value v, CallArgs& a) {
  Binder b("indent", a, {"width", "first", "blank"});
  std::string ind = b.has(0) && b[0].is_string() ? b[0].str() : std::string(static_cast<size_t>(std::max<int64_t>(0, b.has(0) ? int_arg(b[0], "width") : 4)), ' ');
  std::string s = soft_str(v) + "\n";
  std::vector<std::string> lines = py_splitlines(s, false);
  std::string rv;
  if (truthy(b[2])) {
    for (size_t i = 0; i < lines.size(); ++i) rv += (i ? "\n" + ind : "") + lines[i];
  } else {
    rv = lines.empty() ? "" : lines[0];
    for (size_t i = 1; i < lines.size(); ++i) rv += "\n" + (lines[i].empty() ? "" : ind) + lines[i];
  }
  if (truthy(b[1])) rv = ind + rv;
  return Value(rv);
}

Value f_join(Interpreter& in, Value v, CallArgs& a) {
  Binder b("join", a, {"d", "attribute"});
  std::string sep = b.has(0) ? soft_str(b[0]) : "";
  ValueList items = iterate(v);
  std::string out;
  for (size_t i = 0; i < items.size(); ++i) {
    if (i) out += sep;
    out += soft_str(b.has(1) ? AttrGetter(b[1], std::nullopt, false)(in, items[i]) : items[i]);
  }
  return Value(std::move(out));
}

Value f_last(Interpreter&, Value v, CallArgs& a) {
  Binder b("last", a, {});
  if (v.is_list_kind(ListKind::Generator)) fail("'generator' object is not reversible");
  ValueList items = iterate(v);
  if (items.empty()) return Value::undefined("No last item, sequence was empty.");
  return items.back();
}

Value f_list(Interpreter&, Value v, CallArgs& a) {
  Binder b("list", a, {});
  return Value::make_list(iterate(v));
}

Value f_lower(Interpreter&, Value v, CallArgs& a) {
  Binder b("lower", a, {});
  return like(v, py_lower(soft_str(v)));
}

Value f_upper(Interpreter&, Value v, CallArgs& a) {
  Binder b("upper", a, {});
  return like(v, py_upper(soft_str(v)));
}

Value f_items(Interpreter&, Value v, CallArgs& a) {
  Binder b("items", a, {});
  if (v.is_undefined()) return generator({});
  if (!v.is_dict()) fail("Can only get item pairs from a mapping.");
  ValueList out;
  for (const auto& kv : v.dict().items) out.push_back(Value::make_tuple({kv.first, kv.second}));
  return generator(std::move(out));
}

Value f_map(Interpreter& in, Value v, CallArgs& a) {
  if (!truthy(v)) return generator({});
  bool by_attr = a.pos.empty() && std::any_of(a.kw.begin(), a.kw.end(), [](auto& kv) { return kv.first == "attribute"; });
  ValueList out;
  if (by_attr) {
    Value attribute;
    std::optional<Value> dflt;
    for (auto& kv : a.kw) {
      if (kv.first == "attribute") attribute = kv.second;
      else if (kv.first == "default") dflt = kv.second.is_none() ? std::nullopt : std::optional<Value>(kv.second);
      else fail("Unexpected keyword argument '" + kv.first + "'");
    }
    AttrGetter get(attribute, dflt, false);
    for (auto& item : iterate(v)) out.push_back(get(in, item));
    return generator(std::move(out));
  }
  if (a.pos.empty()) fail("map requires a filter argument");
  if (!a.pos[0].is_string()) fail("filter name must be a string");
  std::string name = a.pos[0].str();
  CallArgs rest;
  rest.pos.assign(a.pos.begin() + 1, a.pos.end());
  rest.kw = a.kw;
  for (auto& item : iterate(v)) {
    CallArgs copy = rest;
    out.push_back(in.filter(name, item, copy));
  }
  return generator(std::move(out));
}

Value min_max(Interpreter& in, Value v, CallArgs& a, bool want_max) {
  Binder b(want_max ? "max" : "min", a, {"case_sensitive", "attribute"});
  ValueList items = iterate(v);
  if (items.empty()) return Value::undefined("No aggregated item, sequence was empty.");
  AttrGetter key(b[1], std::nullopt, !truthy(b[0]));
  size_t best = 0;
  Value best_key = key(in, items[0]);
  for (size_t i = 1; i < items.size(); ++i) {
    Value k = key(in, items[i]);
    if (want_max ? py_less(best_key, k) : py_less(k, best_key)) {
      best = i;
      best_key = k;
    }
  }
  return items[best];
}

Value f_max(Interpreter& in, Value v, CallArgs& a) { return min_max(in, std::move(v), a, true); }
Value f_min(Interpreter& in, Value v, CallArgs& a) { return min_max(in, std::move(v), a, false); }

Value select_or_reject(Interpreter& in, Value v, CallArgs& a, bool select, bool by_attr) {
  if (!truthy(v)) return generator({});
  size_t off = by_attr ? 1 : 0;
  if (by_attr && a.pos.empty()) fail("Missing parameter for attribute name");
  std::optional<AttrGetter> get;
  if (by_attr) get.emplace(a.pos[0], std::nullopt, false);
  std::optional<std::string> test;
  CallArgs rest;
  if (a.pos.size() > off) {
    if (!a.pos[off].is_string()) fail("test name must be a string");
    test = a.pos[off].str();
    rest.pos.assign(a.pos.begin() + static_cast<std::ptrdiff_t>(off) + 1, a.pos.end());
    rest.kw = a.kw;
  }
  ValueList out;
  for (auto& item : iterate(v)) {
    Value probe = get ? (*get)(in, item) : item;
    bool ok;
    if (test) {
      CallArgs copy = rest;
      ok = in.test(*test, probe, copy);
    } else {
      ok = truthy(probe);
    }
    if (ok == select) out.push_back(std::move(item));
  }
  return generator(std::move(out));
}

Value f_select(Interpreter& in, Value v, CallArgs& a) { return select_or_reject(in, std::move(v), a, true, false); }
Value f_reject(Interpreter& in, Value v, CallArgs& a) { return select_or_reject(in, std::move(v), a, false, false); }
Value f_selectattr(Interpreter& in, Value v, CallArgs& a) { return select_or_reject(in, std::move(v), a, true, true); }
Value f_rejectattr(Interpreter& in, Value v, CallArgs& a) { return select_or_reject(in, std::move(v), a, false, true); }

Value f_pprint(Interpreter&, Value v, CallArgs& a) {
  Binder b("pprint", a, {});
  return Value(repr(v));
}

Value f_random(Interpreter&, Value, CallArgs&) {
  fail("the random filter is not supported: renderings must be deterministic");
}

Value f_replace(Interpreter&, Value v, CallArgs& a) {
  Binder b("replace", a, {"old", "new", "count"}, 2);
  int64_t count = b.has(2) && !b[2].is_none() ? int_arg(b[2], "count") : -1;
  return Value(py_replace(soft_str(v), soft_str(b[0]), soft_str(b[1]), count));
}

Value f_reverse(Interpreter&, Value v, CallArgs& a) {
  Binder b("reverse", a, {});
  if (v.is_string()) {
    std::u32string u = utf8_decode(v.str());
    std::reverse(u.begin(), u.end());
    return Value(utf8_encode(u));
  }
  if (v.is_list_kind(ListKind::Generator)) {
    ValueList items = iterate(v);
    std::reverse(items.begin(), items.end());
    return Value::make_list(std::move(items));
  }
  if (v.is_undefined() || v.is_list() || v.is_dict()) {
    ValueList items = iterate(v);
    std::reverse(items.begin(), items.end());
    return generator(std::move(items));
  }
  fail("argument must be iterable");
}

Value f_round(Interpreter&, Value v, CallArgs& a) {
  Binder b("round", a, {"precision", "method"});
  int64_t precision = b.has(0) ? int_arg(b[0], "precision") : 0;
  std::string method = b.has(1) ? soft_str(b[1]) : "common";
  if (method != "common" && method != "ceil" && method != "floor")
    fail("method must be common, ceil or floor");
  if (!v.is_number()) fail("type " + type_name(v) + " doesn't define __round__ method");
  if (method == "common") {
    if (v.is_integral() && precision >= 0) return Value(v.as_int());
    double x = v.as_double();
    if (std::isnan(x) || std::isinf(x)) return Value(x);
    if (precision >= 0) {
      char buf[512];
      std::snprintf(buf, sizeof buf, "%.*f", static_cast<int>(std::min<int64_t>(precision, 300)), x);
      double r = std::strtod(buf, nullptr);
      return v.is_integral() ? Value(static_cast<int64_t>(r)) : Value(r);
    }
    double scale = std::pow(10.0, static_cast<double>(-precision));
    double r = std::nearbyint(x / scale) * scale;
    return v.is_integral() ? Value(static_cast<int64_t>(r)) : Value(r);
  }
  double scale = std::pow(10.0, static_cast<double>(precision));
  double y = v.as_double() * scale;
  y = method == "ceil" ? std::ceil(y) : std::floor(y);
  return Value(y / scale);
}

Value f_safe(Interpreter&, Value v, CallArgs& a) {
  Binder b("safe", a, {});
  return Value::markup(soft_str(v));
}

Value f_slice(Interpreter&, Value v, CallArgs& a) {
  Binder b("slice", a, {"slices", "fill_with"}, 1);
  ValueList seq = iterate(v);
  int64_t slices = int_arg(b[0], "slices");
  if (slices <= 0) fail("integer division or modulo by zero");
  int64_t length = static_cast<int64_t>(seq.size());
  int64_t per = length / slices, extra = length % slices, offset = 0;
  ValueList out;
  for (int64_t n = 0; n < slices; ++n) {
    int64_t start = offset + n * per;
    if (n < extra) ++offset;
    int64_t end = offset + (n + 1) * per;
    ValueList tmp(seq.begin() + start, seq.begin() + end);
    if (b.has(1) && !b[1].is_none() && n >= extra) tmp.push_back(b[1]);
    out.push_back(Value::make_list(std::move(tmp)));
  }
  return generator(std::move(out));
}

Value f_sort(Interpreter& in, Value v, CallArgs& a) {
  Binder b("sort", a, {"reverse", "case_sensitive", "attribute"});
  ValueList items = iterate(v);
  std::vector<Value> keys;
  for (const auto& item : items) keys.push_back(multi_key(in, b[2], item, !truthy(b[1])));
  return Value::make_list(sorted_by(std::move(items), keys, truthy(b[0])));
}

Value f_string(Interpreter&, Value v, CallArgs& a) {
  Binder b("string", a, {});
  return like(v, soft_str(v));
}

std::string unescape_entities(const std::string& s) {
  static const std::map<std::string, std::string> kNamed = {
      {"amp", "&"}, {"lt", "<"}, {"gt", ">"}, {"quot", "\""}, {"apos", "'"}, {"nbsp", "\u00a0"}};
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '&') {
      size_t semi = s.find(';', i);
      if (semi != std::string::npos && semi - i <= 10) {
        std::string name = s.substr(i + 1, semi - i - 1);
        if (!name.empty() && name[0] == '#') {
          bool hex = name.size() > 1 && (name[1] | 0x20) == 'x';
          char* end = nullptr;
          long cp = std::strtol(name.c_str() + (hex ? 2 : 1), &end, hex ? 16 : 10);
          if (end && *end == '\0' && cp > 0 && cp <= 0x10FFFF) {
            utf8_append(out, static_cast<char32_t>(cp));
            i = semi;
            continue;
          }
        } else if (auto it = kNamed.find(name); it != kNamed.end()) {
          out += it->second;
          i = semi;
          continue;
        }
      }
    }
    out.push_back(s[i]);
  }
  return out;
}

Value f_striptags(Interpreter&, Value v, CallArgs& a) {
  Binder b("striptags", a, {});
  std::string s = soft_str(v), no_tags;
  for (size_t i = 0; i < s.size();) {
    if (s.compare(i, 4, "<!--") == 0) {
      size_t e = s.find("-->", i + 4);
      if (e != std::string::npos) {
        i = e + 3;
        continue;
      }
    }
    if (s[i] == '<') {
      size_t e = s.find('>', i + 1);
      if (e != std::string::npos) {
        i = e + 1;
        continue;
      }
    }
    no_tags.push_back(s[i++]);
  }
  std::string joined;
  for (const auto& w : py_split(no_tags, std::nullopt, -1)) joined += (joined.empty() ? "" : " ") + w;
  return Value(unescape_entities(joined));
}

Value f_sum(Interpreter& in, Value v, CallArgs& a) {
  Binder b("sum", a, {"attribute", "start"});
  Value acc = b.get(1, Value(0));
  for (auto& item : iterate(v))
    acc = binary_op("+", acc, b.has(0) ? AttrGetter(b[0], std::nullopt, false)(in, item) : item);
  return acc;
}

Value f_title(Interpreter&, Value v, CallArgs& a) {
  Binder b("title", a, {});
  // Words start after runs of whitespace or - ( { [ <, as jinja2's title filter splits them.
  std::u32string u = utf8_decode(soft_str(v)), out;
  auto is_sep = [](char32_t c) { return py_isspace(c) || c == '-' || c == '(' || c == '{' || c == '[' || c == '<'; };
  size_t i = 0;
  while (i < u.size()) {
    size_t j = i;
    bool sep = is_sep(u[i]);
    while (j < u.size() && is_sep(u[j]) == sep) ++j;
    if (sep) {
      out.append(u, i, j - i);
    } else {
      py_append_upper(out, u[i]);
      std::string rest = py_lower(utf8_encode(std::u32string_view(u).substr(i + 1, j - i - 1)));
      out += utf8_decode(rest);
    }
    i = j;
  }
  return Value(utf8_encode(out));
}

// Hugging Face: json.dumps(x, ensure_ascii=False, indent=indent, separators=separators, sort_keys=False).
Value f_tojson(Interpreter&, Value v, CallArgs& a) {
  Binder b("tojson", a, {"ensure_ascii", "indent", "separators", "sort_keys"});
  JsonOptions opt;
  opt.ensure_ascii = truthy(b[0]);
  opt.sort_keys = truthy(b[3]);
  const Value& indent = b[1];
  if (indent.is_string()) opt.indent = indent.str();
  else if (indent.is_integral()) opt.indent = std::string(static_cast<size_t>(std::max<int64_t>(0, indent.as_int())), ' ');
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

Value f_trim(Interpreter&, Value v, CallArgs& a) {
  Binder b("trim", a, {"chars"});
  std::optional<std::string> chars;
  if (b.has(0) && !b[0].is_none()) chars = soft_str(b[0]);
  return like(v, py_strip(soft_str(v), chars, true, true));
}

Value f_truncate(Interpreter&, Value v, CallArgs& a) {
  Binder b("truncate", a, {"length", "killwords", "end", "leeway"});
  std::string s = soft_str(v);
  int64_t length = b.has(0) ? int_arg(b[0], "length") : 255;
  std::string end = b.has(2) ? soft_str(b[2]) : "...";
  int64_t leeway = b.has(3) && !b[3].is_none() ? int_arg(b[3], "leeway") : 5;
  int64_t end_len = py_len(Value(end)), len = py_len(Value(s));
  if (length < end_len) fail("expected length >= " + std::to_string(end_len) + ", got " + std::to_string(length));
  if (leeway < 0) fail("expected leeway >= 0, got " + std::to_string(leeway));
  if (len <= length + leeway) return Value(s);
  std::string head = str_slice(s, adjust_slice(len, std::nullopt, length - end_len, 1));
  if (truthy(b[1])) return Value(head + end);
  return Value(py_rsplit(head, std::string(" "), 1)[0] + end);
}

Value f_unique(Interpreter& in, Value v, CallArgs& a) {
  Binder b("unique", a, {"case_sensitive", "attribute"});
  AttrGetter key(b[1], std::nullopt, !truthy(b[0]));
  ValueList out, seen;
  for (auto& item : iterate(v)) {
    Value k = key(in, item);
    if (!is_hashable(k)) fail("unhashable type: '" + type_name(k) + "'");
    if (std::none_of(seen.begin(), seen.end(), [&](const Value& s) { return py_equal(s, k); })) {
      seen.push_back(k);
      out.push_back(std::move(item));
    }
  }
  return generator(std::move(out));
}

std::string url_quote(const std::string& s, bool for_query) {
  std::string out;
  for (unsigned char c : s) {
    if (isalnum(c) || c == '_' || c == '.' || c == '-' || c == '~' || (!for_query && c == '/')) {
      out.push_back(static_cast<char>(c));
    } else {
      char buf[4];
      std::snprintf(buf, sizeof buf, "%%%02X", c);
      // Query strings spell spaces as '+'.
      out += for_query && c == ' ' ? std::string("+") : std::string(buf);
    }
  }
  return out;
}

Value f_urlencode(Interpreter&, Value v, CallArgs& a) {
  Binder b("urlencode", a, {});
  if (v.is_string()) return Value(url_quote(v.str(), false));
  ValueList pairs;
  if (v.is_dict())
    for (const auto& kv : v.dict().items) pairs.push_back(Value::make_tuple({kv.first, kv.second}));
  else
    pairs = iterate(v);
  std::string out;
  for (const auto& p : pairs) {
    ValueList kv = iterate(p);
    if (kv.size() != 2) fail("urlencode expects pairs");
    if (!out.empty()) out += "&";
    out += url_quote(soft_str(kv[0]), true) + "=" + url_quote(soft_str(kv[1]), true);
  }
  return Value(out);
}

Value f_wordcount(Interpreter&, Value v, CallArgs& a) {
  Binder b("wordcount", a, {});
  int64_t n = 0;
  bool in_word = false;
  for (char32_t c : utf8_decode(soft_str(v))) {
    bool w = c == '_' || py_isalnum(c);
    if (w && !in_word) ++n;
    in_word = w;
  }
  return Value(n);
}

struct NamedFilter {
  const char* name;
  FilterFn fn;
};

const NamedFilter kFilters[] = {
    {"abs", f_abs},           {"attr", f_attr},
    {"batch", f_batch},       {"capitalize", f_capitalize},
    {"center", f_center},     {"count", f_length},
    {"d", f_default},         {"default", f_default},
    {"dictsort", f_dictsort}, {"e", f_escape},
    {"escape", f_escape},     {"filesizeformat", f_filesizeformat},
    {"first", f_first},       {"float", f_float},
    {"forceescape", f_forceescape}, {"format", f_format},
    {"groupby", f_groupby},   {"indent", f_indent},
    {"int", f_int},           {"items", f_items},
    {"join", f_join},         {"last", f_last},
    {"length", f_length},     {"list", f_list},
    {"lower", f_lower},       {"map", f_map},
    {"max", f_max},           {"min", f_min},
    {"pprint", f_pprint},     {"random", f_random},
    {"reject", f_reject},     {"rejectattr", f_rejectattr},
    {"replace", f_replace},   {"reverse", f_reverse},
    {"round", f_round},       {"safe", f_safe},
    {"select", f_select},     {"selectattr", f_selectattr},
    {"slice", f_slice},       {"sort", f_sort},
    {"string", f_string},     {"striptags", f_striptags},
    {"sum", f_sum},           {"title", f_title},
    {"tojson", f_tojson},     {"trim", f_trim},
    {"truncate", f_truncate}, {"unique", f_unique},
    {"upper", f_upper},       {"urlencode", f_urlencode},
    {"wordcount", f_wordcount},
};

}  // namespace

FilterFn find_filter(const std::string& name) {
  for (const auto& f : kFilters)
    if (name == f.name) return f.fn;
  return nullptr;
}

}  // namespace dflash::jinja
