// jinja2's filters that work on sequences and mappings.
#include <algorithm>
#include <charconv>
#include <optional>

#include "chat/jinja_eval.h"
#include "chat/jinja_filters.h"
#include "chat/jinja_strings.h"
#include "chat/jinja_unicode.h"

namespace dflash::jinja {

namespace {

Value generator(ValueList items) { return Value::make_list(std::move(items), ListKind::Generator); }

Value lower_if_string(Value v) { return v.is_string() ? Value(py_lower(v.str())) : v; }

// jinja2's make_attrgetter: "a.b.0" walks items with subscript-then-attribute lookup.
struct AttrGetter {
  struct Part {
    Value key;
    bool huge_index = false;  // digits beyond int64: an index no sequence or dict here can hold
  };
  std::vector<Part> parts;
  std::optional<Value> dflt;
  bool ignore_case = false;

  AttrGetter(const Value& attribute, std::optional<Value> d, bool lower) : dflt(std::move(d)), ignore_case(lower) {
    if (attribute.is_string()) {
      for (const auto& p : py_split(attribute.str(), std::string("."), -1)) {
        bool digits = !p.empty() && std::all_of(p.begin(), p.end(), [](char c) { return c >= '0' && c <= '9'; });
        int64_t index = 0;
        if (!digits)
          parts.push_back({Value(p)});
        else if (std::from_chars(p.data(), p.data() + p.size(), index).ec == std::errc())
          parts.push_back({Value(index)});
        else
          parts.push_back({Value(p), true});
      }
    } else if (!attribute.is_none() && !attribute.is_undefined()) {
      parts.push_back({attribute});
    }
  }

  Value operator()(Interpreter& in, Value item) const {
    for (const auto& p : parts) {
      if (!p.huge_index)
        item = in.getitem(item, p.key);
      else if (item.is_undefined())
        fail_undefined(item);
      else
        item = Value::undefined(object_type_repr(item) + " has no element " + p.key.str());
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

Value f_batch(Interpreter&, Value v, CallArgs& a) {
  Binder b("batch", a, {"linecount", "fill_with"}, 1);
  int64_t n = int_arg(b[0], "linecount");
  if (b.has(1) && !b[1].is_none() && n > 0) check_items(static_cast<uint64_t>(n));
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

Value f_length(Interpreter&, Value v, CallArgs& a) {
  Binder b("length", a, {});
  return Value(py_len(v));
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

Value f_join(Interpreter& in, Value v, CallArgs& a) {
  Binder b("join", a, {"d", "attribute"});
  std::string sep = b.has(0) ? soft_str(b[0]) : "";
  ValueList items = iterate(v);
  std::string out;
  for (size_t i = 0; i < items.size(); ++i) {
    if (i) append_checked(out, sep);
    append_checked(out, soft_str(b.has(1) ? AttrGetter(b[1], std::nullopt, false)(in, items[i]) : items[i]));
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

Value f_slice(Interpreter&, Value v, CallArgs& a) {
  Binder b("slice", a, {"slices", "fill_with"}, 1);
  ValueList seq = iterate(v);
  int64_t slices = int_arg(b[0], "slices");
  if (slices <= 0) fail("integer division or modulo by zero");
  check_items(static_cast<uint64_t>(slices));
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

Value f_sum(Interpreter& in, Value v, CallArgs& a) {
  Binder b("sum", a, {"attribute", "start"});
  Value acc = b.get(1, Value(0));
  for (auto& item : iterate(v))
    acc = binary_op("+", acc, b.has(0) ? AttrGetter(b[0], std::nullopt, false)(in, item) : item);
  return acc;
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

const NamedFilter kFilters[] = {
    {"batch", f_batch},
    {"count", f_length},
    {"dictsort", f_dictsort},
    {"first", f_first},
    {"groupby", f_groupby},
    {"items", f_items},
    {"join", f_join},
    {"last", f_last},
    {"length", f_length},
    {"list", f_list},
    {"map", f_map},
    {"max", f_max},
    {"min", f_min},
    {"reject", f_reject},
    {"rejectattr", f_rejectattr},
    {"reverse", f_reverse},
    {"select", f_select},
    {"selectattr", f_selectattr},
    {"slice", f_slice},
    {"sort", f_sort},
    {"sum", f_sum},
    {"unique", f_unique},
};

}  // namespace

std::span<const NamedFilter> list_filters() { return kFilters; }

}  // namespace dflash::jinja
