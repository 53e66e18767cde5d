// Python's json module for template values: json.dumps (what tojson prints) and the conversion
// of the render context from JSON.
#include <algorithm>
#include <cmath>
#include <cstdio>

#include "chat/jinja_budget.h"
#include "chat/jinja_unicode.h"
#include "chat/jinja_value.h"

namespace dflash::jinja {

Value from_json(const nlohmann::ordered_json& j) {
  using T = nlohmann::ordered_json::value_t;
  switch (j.type()) {
    case T::null: return Value(nullptr);
    case T::boolean: return Value(j.get<bool>());
    case T::number_integer: return Value(j.get<int64_t>());
    case T::number_unsigned: {
      uint64_t u = j.get<uint64_t>();
      if (u <= static_cast<uint64_t>(INT64_MAX)) return Value(static_cast<int64_t>(u));
      return Value(static_cast<double>(u));
    }
    case T::number_float: return Value(j.get<double>());
    case T::string: return Value(j.get<std::string>());
    case T::array: {
      ValueNesting nesting;
      ValueList items;
      items.reserve(j.size());
      for (const auto& x : j) items.push_back(from_json(x));
      return Value::make_list(std::move(items));
    }
    case T::object: {
      ValueNesting nesting;
      auto d = std::make_shared<DictData>();
      d->items.reserve(j.size());
      for (auto it = j.begin(); it != j.end(); ++it) {
        Value key(it.key());
        Value value = from_json(it.value());
        d->items.emplace_back(std::move(key), std::move(value));
      }
      return Value(std::move(d));
    }
    default: return Value(nullptr);
  }
}

static void json_escape(std::string& out, std::string_view s, bool ensure_ascii) {
  out.push_back('"');
  auto hex4 = [&](unsigned v) {
    char buf[16];
    std::snprintf(buf, sizeof buf, "\\u%04x", v);
    out += buf;
  };
  for (char32_t c : utf8_decode(s)) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      default:
        if (c < 0x20) {
          hex4(static_cast<unsigned>(c));
        } else if (ensure_ascii && c >= 0x7F) {
          if (c >= 0x10000) {
            char32_t v = c - 0x10000;
            hex4(0xD800 + static_cast<unsigned>(v >> 10));
            hex4(0xDC00 + static_cast<unsigned>(v & 0x3FF));
          } else {
            hex4(static_cast<unsigned>(c));
          }
        } else {
          utf8_append(out, c);
        }
    }
  }
  out.push_back('"');
}

static std::string json_float(double d) {
  if (std::isnan(d)) return "NaN";
  if (std::isinf(d)) return d > 0 ? "Infinity" : "-Infinity";
  return float_repr(d);
}

static void dump(std::string& out, const Value& v, const JsonOptions& opt, int depth) {
  auto newline = [&](int level) {
    out.push_back('\n');
    for (int i = 0; i < level; ++i) append_checked(out, *opt.indent);
  };
  switch (v.type()) {
    case Type::None: out += "null"; return;
    case Type::Bool: out += v.as_bool() ? "true" : "false"; return;
    case Type::Int: out += std::to_string(v.as_int()); return;
    case Type::Float: out += json_float(v.as_double()); return;
    case Type::String: json_escape(out, v.str(), opt.ensure_ascii); return;
    case Type::List: {
      ValueNesting nesting;
      const ListData& l = v.list();
      if (l.kind != ListKind::List && l.kind != ListKind::Tuple) break;
      if (l.items.empty()) {
        out += "[]";
        return;
      }
      out.push_back('[');
      for (size_t i = 0; i < l.items.size(); ++i) {
        if (i) out += opt.item_sep;
        if (opt.indent) newline(depth + 1);
        dump(out, l.items[i], opt, depth + 1);
      }
      if (opt.indent) newline(depth);
      out.push_back(']');
      return;
    }
    case Type::Dict: {
      ValueNesting nesting;
      const DictData& d = v.dict();
      if (d.items.empty()) {
        out += "{}";
        return;
      }
      std::vector<std::pair<std::string, const Value*>> entries;
      std::vector<const Value*> keys;
      for (const auto& kv : d.items) {
        const Value& k = kv.first;
        std::string key;
        if (k.is_string()) key = k.str();
        else if (k.is_bool()) key = k.as_bool() ? "true" : "false";
        else if (k.is_int()) key = std::to_string(k.as_int());
        else if (k.is_float()) key = json_float(k.as_double());
        else if (k.is_none()) key = "null";
        else fail("keys must be str, int, float, bool or None, not " + type_name(k));
        entries.emplace_back(std::move(key), &kv.second);
        keys.push_back(&k);
      }
      if (opt.sort_keys) {
        std::vector<size_t> order(entries.size());
        for (size_t i = 0; i < order.size(); ++i) order[i] = i;
        std::stable_sort(order.begin(), order.end(),
                         [&](size_t a, size_t b) { return py_less(*keys[a], *keys[b]); });
        std::vector<std::pair<std::string, const Value*>> sorted;
        for (size_t i : order) sorted.push_back(entries[i]);
        entries = std::move(sorted);
      }
      out.push_back('{');
      for (size_t i = 0; i < entries.size(); ++i) {
        if (i) out += opt.item_sep;
        if (opt.indent) newline(depth + 1);
        json_escape(out, entries[i].first, opt.ensure_ascii);
        out += opt.key_sep;
        dump(out, *entries[i].second, opt, depth + 1);
      }
      if (opt.indent) newline(depth);
      out.push_back('}');
      return;
    }
    default: break;
  }
  fail("Object of type " + type_name(v) + " is not JSON serializable");
}

std::string to_json(const Value& v, const JsonOptions& opt) {
  std::string out;
  dump(out, v, opt, 0);
  return out;
}

}  // namespace dflash::jinja
