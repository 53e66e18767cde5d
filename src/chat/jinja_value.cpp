#include "chat/jinja_value.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>

#include "chat/jinja_budget.h"
#include "chat/jinja_unicode.h"

namespace dflash::jinja {

void fail(const std::string& msg) { throw RenderError(msg); }

Value Value::undefined(std::string message, bool unsafe) {
  Value v;
  v.v_ = std::make_shared<const UndefinedInfo>(UndefinedInfo{std::move(message), unsafe});
  return v;
}

Value Value::make_list(ValueList items, ListKind kind) {
  charge(items.size());
  auto d = std::make_shared<ListData>();
  d->items = std::move(items);
  d->kind = kind;
  return Value(std::move(d));
}

const void* Value::identity() const {
  switch (type()) {
    case Type::List: return &list();
    case Type::Dict: return &dict();
    case Type::Object: return &object();
    default: return nullptr;
  }
}

void fail_undefined(const Value& v) {
  const UndefinedInfo* info = v.undefined_info();
  fail(info && !info->message.empty() ? info->message : "value is undefined");
}

// ---- destruction ----

void Value::take_contents(ValueList& into) {
  if (auto* l = std::get_if<std::shared_ptr<ListData>>(&v_); l && l->use_count() == 1) {
    for (auto& x : (*l)->items) into.push_back(std::move(x));
    (*l)->items.clear();
  } else if (auto* d = std::get_if<std::shared_ptr<DictData>>(&v_); d && d->use_count() == 1) {
    for (auto& kv : (*d)->items) {
      into.push_back(std::move(kv.first));
      into.push_back(std::move(kv.second));
    }
    (*d)->items.clear();
  }
}

namespace {

// Destroys the values in `pending` and everything they alone hold, with a work list instead
// of recursion.
void dismantle(ValueList& pending) {
  while (!pending.empty()) {
    Value v = std::move(pending.back());
    pending.pop_back();
    v.take_contents(pending);
  }
}

}  // namespace

ListData::~ListData() {
  ValueList pending;
  for (auto& x : items) x.take_contents(pending);
  dismantle(pending);
}

DictData::~DictData() {
  ValueList pending;
  for (auto& kv : items) {
    kv.first.take_contents(pending);
    kv.second.take_contents(pending);
  }
  dismantle(pending);
}

// ---- dicts ----

Value* DictData::find(const Value& key) {
  if (key.is_string()) return find(std::string_view(key.str()));
  for (auto& kv : items)
    if (py_equal(kv.first, key)) return &kv.second;
  return nullptr;
}

Value* DictData::find(std::string_view key) {
  for (auto& kv : items)
    if (kv.first.is_string() && kv.first.str() == key) return &kv.second;
  return nullptr;
}

const Value* DictData::find(const Value& key) const { return const_cast<DictData*>(this)->find(key); }
const Value* DictData::find(std::string_view key) const {
  return const_cast<DictData*>(this)->find(key);
}

void DictData::set(Value key, Value value) {
  if (!is_hashable(key)) fail("unhashable type: '" + type_name(key) + "'");
  if (Value* slot = find(key)) {
    *slot = std::move(value);
    return;
  }
  items.emplace_back(std::move(key), std::move(value));
}

bool DictData::erase(const Value& key) {
  for (auto it = items.begin(); it != items.end(); ++it) {
    if (py_equal(it->first, key)) {
      items.erase(it);
      return true;
    }
  }
  return false;
}

// ---- objects ----

std::string Object::repr() const { return "<" + type_name() + " object>"; }
std::optional<Value> Object::getattr(const std::string&) { return std::nullopt; }
void Object::setattr(const std::string&, Value) {
  fail("cannot assign attribute on non-namespace object");
}
Value Object::call(Interpreter&, CallArgs&) { fail("'" + type_name() + "' object is not callable"); }

// ---- Python semantics ----

bool truthy(const Value& v) {
  switch (v.type()) {
    case Type::Undefined:
    case Type::None: return false;
    case Type::Bool: return v.as_bool();
    case Type::Int: return v.as_int() != 0;
    case Type::Float: return v.as_double() != 0.0;
    case Type::String: return !v.str().empty();
    case Type::List:
      // A generator object is always true, however many items it would yield.
      return v.list().kind == ListKind::Generator || !v.list().items.empty();
    case Type::Dict: return !v.dict().items.empty();
    case Type::Object: return true;
  }
  return false;
}

std::string float_repr(double d) {
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d > 0 ? "inf" : "-inf";
  if (d == 0) return std::signbit(d) ? "-0.0" : "0.0";
  // Shortest round-trip digits, then laid out the way Python's float.__repr__ does.
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof buf, d, std::chars_format::scientific);
  std::string sci(buf, res.ptr);
  bool neg = sci[0] == '-';
  if (neg) sci.erase(0, 1);
  size_t epos = sci.find('e');
  std::string mant = sci.substr(0, epos);
  int exp = std::stoi(sci.substr(epos + 1));
  std::string digits;
  for (char c : mant)
    if (c != '.') digits.push_back(c);
  std::string out = neg ? "-" : "";
  if (exp >= -5 + 1 && exp < 16) {
    int point = exp + 1;  // digits before the decimal point
    if (point <= 0) {
      out += "0." + std::string(-point, '0') + digits;
    } else if (point >= static_cast<int>(digits.size())) {
      out += digits + std::string(point - digits.size(), '0') + ".0";
    } else {
      out += digits.substr(0, point) + "." + digits.substr(point);
    }
    return out;
  }
  out += digits.substr(0, 1);
  if (digits.size() > 1) out += "." + digits.substr(1);
  char e[16];
  std::snprintf(e, sizeof e, "e%c%02d", exp < 0 ? '-' : '+', exp < 0 ? -exp : exp);
  return out + e;
}

std::string repr_string(std::string_view s) {
  bool has_single = s.find('\'') != std::string_view::npos;
  bool has_double = s.find('"') != std::string_view::npos;
  char quote = has_single && !has_double ? '"' : '\'';
  std::string out(1, quote);
  for (char32_t c : utf8_decode(s)) {
    if (c == static_cast<char32_t>(quote) || c == '\\') {
      out.push_back('\\');
      out.push_back(static_cast<char>(c));
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (py_isprintable(c)) {
      utf8_append(out, c);
    } else {
      char buf[16];
      if (c < 0x100)
        std::snprintf(buf, sizeof buf, "\\x%02x", static_cast<unsigned>(c));
      else if (c < 0x10000)
        std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(c));
      else
        std::snprintf(buf, sizeof buf, "\\U%08x", static_cast<unsigned>(c));
      out += buf;
    }
  }
  out.push_back(quote);
  return out;
}

static std::string join_reprs(const ValueList& items) {
  std::string out;
  for (size_t i = 0; i < items.size(); ++i) {
    if (i) out += ", ";
    out += repr(items[i]);
  }
  return out;
}

std::string to_str(const Value& v) {
  switch (v.type()) {
    case Type::Undefined: return "";
    case Type::None: return "None";
    case Type::Bool: return v.as_bool() ? "True" : "False";
    case Type::Int: return std::to_string(v.as_int());
    case Type::Float: return float_repr(v.as_double());
    case Type::String: return v.str();
    case Type::List: {
      ValueNesting nesting;
      const ListData& l = v.list();
      switch (l.kind) {
        case ListKind::List: return "[" + join_reprs(l.items) + "]";
        case ListKind::Tuple:
          return "(" + join_reprs(l.items) + (l.items.size() == 1 ? ",)" : ")");
        case ListKind::Generator: return "<generator object>";
        case ListKind::View: return l.view_name + "([" + join_reprs(l.items) + "])";
      }
      return "";
    }
    case Type::Dict: {
      ValueNesting nesting;
      std::string out = "{";
      bool first = true;
      for (const auto& kv : v.dict().items) {
        if (!first) out += ", ";
        first = false;
        out += repr(kv.first) + ": " + repr(kv.second);
      }
      return out + "}";
    }
    case Type::Object: return v.object().repr();
  }
  return "";
}

std::string markup_escape(const Value& v) {
  if (v.is_markup()) return v.str();
  std::string s = to_str(v), out;
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&#34;"; break;
      case '\'': out += "&#39;"; break;
      default: out.push_back(c);
    }
  }
  return out;
}

std::string repr(const Value& v) {
  if (v.is_markup()) return "Markup(" + repr_string(v.str()) + ")";
  if (v.is_string()) return repr_string(v.str());
  if (v.is_undefined()) return "Undefined";
  return to_str(v);
}

std::string type_name(const Value& v) {
  switch (v.type()) {
    case Type::Undefined: return "Undefined";
    case Type::None: return "NoneType";
    case Type::Bool: return "bool";
    case Type::Int: return "int";
    case Type::Float: return "float";
    case Type::String: return "str";
    case Type::List:
      switch (v.list().kind) {
        case ListKind::List: return "list";
        case ListKind::Tuple: return "tuple";
        case ListKind::Generator: return "generator";
        case ListKind::View: return v.list().view_name;
      }
      return "list";
    case Type::Dict: return "dict";
    case Type::Object: return v.object().type_name();
  }
  return "object";
}

std::string object_type_repr(const Value& v) {
  if (v.is_none()) return "None";
  if (v.is_object() && v.object().is_namespace()) return "jinja2.utils.Namespace object";
  return type_name(v) + " object";
}

static int compare_numbers(const Value& a, const Value& b) {
  if (a.is_integral() && b.is_integral()) {
    int64_t x = a.as_int(), y = b.as_int();
    return x < y ? -1 : x > y ? 1 : 0;
  }
  double x = a.as_double(), y = b.as_double();
  return x < y ? -1 : x > y ? 1 : 0;
}

bool py_equal(const Value& a, const Value& b) {
  charge(1);
  if (a.is_number() && b.is_number()) {
    if (a.is_float() && std::isnan(a.as_double())) return false;
    if (b.is_float() && std::isnan(b.as_double())) return false;
    return compare_numbers(a, b) == 0;
  }
  if (a.type() != b.type()) return false;
  switch (a.type()) {
    case Type::Undefined:
    case Type::None: return true;
    case Type::String: return a.str() == b.str();
    case Type::List: {
      ValueNesting nesting;
      const ListData &x = a.list(), &y = b.list();
      if (x.kind == ListKind::Generator || y.kind == ListKind::Generator) return &x == &y;
      if (x.kind != y.kind) return false;
      if (x.items.size() != y.items.size()) return false;
      for (size_t i = 0; i < x.items.size(); ++i)
        if (!py_equal(x.items[i], y.items[i])) return false;
      return true;
    }
    case Type::Dict: {
      ValueNesting nesting;
      const DictData &x = a.dict(), &y = b.dict();
      if (x.items.size() != y.items.size()) return false;
      for (const auto& kv : x.items) {
        const Value* other = y.find(kv.first);
        if (!other || !py_equal(kv.second, *other)) return false;
      }
      return true;
    }
    case Type::Object: return &a.object() == &b.object();
    default: return false;
  }
}

bool py_less(const Value& a, const Value& b) {
  charge(1);
  if (a.is_number() && b.is_number()) return compare_numbers(a, b) < 0;
  if (a.is_string() && b.is_string()) return a.str() < b.str();
  if (a.is_list() && b.is_list() && a.list().kind == b.list().kind &&
      (a.list().kind == ListKind::List || a.list().kind == ListKind::Tuple)) {
    ValueNesting nesting;
    const ValueList &x = a.list().items, &y = b.list().items;
    for (size_t i = 0; i < x.size() && i < y.size(); ++i) {
      if (py_equal(x[i], y[i])) continue;
      return py_less(x[i], y[i]);
    }
    return x.size() < y.size();
  }
  fail("'<' not supported between instances of '" + type_name(a) + "' and '" + type_name(b) + "'");
}

bool is_hashable(const Value& v) {
  switch (v.type()) {
    case Type::Dict: return false;
    case Type::List: {
      if (v.list().kind == ListKind::Generator) return true;
      if (v.list().kind != ListKind::Tuple) return false;
      ValueNesting nesting;
      for (const auto& x : v.list().items)
        if (!is_hashable(x)) return false;
      return true;
    }
    default: return true;
  }
}

namespace {

ValueList items_of(const Value& v) {
  switch (v.type()) {
    case Type::Undefined: return {};
    case Type::String: {
      ValueList out;
      const std::string& s = v.str();
      check_items(utf8_length(s));
      for (size_t i = 0; i < s.size();) {
        size_t j = i + 1;
        while (j < s.size() && (static_cast<unsigned char>(s[j]) & 0xC0) == 0x80) ++j;
        out.emplace_back(s.substr(i, j - i));
        i = j;
      }
      return out;
    }
    case Type::List: {
      ListData& l = v.list();
      if (l.kind != ListKind::Generator) return l.items;
      ValueList rest(l.items.begin() + static_cast<std::ptrdiff_t>(l.consumed), l.items.end());
      l.consumed = l.items.size();
      return rest;
    }
    case Type::Dict: {
      ValueList keys;
      for (const auto& kv : v.dict().items) keys.push_back(kv.first);
      return keys;
    }
    case Type::Object:
      if (auto items = v.object().iterate()) return *items;
      break;
    default: break;
  }
  fail("'" + type_name(v) + "' object is not iterable");
}

}  // namespace

ValueList iterate(const Value& v) {
  ValueList items = items_of(v);
  charge(items.size());
  return items;
}

int64_t py_len(const Value& v) {
  switch (v.type()) {
    case Type::Undefined: return 0;
    case Type::String: return static_cast<int64_t>(utf8_length(v.str()));
    case Type::List:
      if (v.list().kind != ListKind::Generator) return static_cast<int64_t>(v.list().items.size());
      break;
    case Type::Dict: return static_cast<int64_t>(v.dict().items.size());
    default: break;
  }
  fail("object of type '" + type_name(v) + "' has no len()");
}

}  // namespace dflash::jinja
