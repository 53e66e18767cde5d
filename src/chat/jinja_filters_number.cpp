// jinja2's filters that work on numbers, and Python's int() and float() parsing of strings.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "chat/jinja_filters.h"
#include "chat/jinja_strings.h"
#include "chat/jinja_unicode.h"

namespace dflash::jinja {

namespace {

Value f_abs(Interpreter&, Value v, CallArgs& a) {
  Binder b("abs", a, {});
  if (v.is_int() || v.is_bool()) {
    if (v.as_int() == INT64_MIN) fail("integer overflow");
    return Value(static_cast<int64_t>(std::llabs(v.as_int())));
  }
  if (v.is_float()) return Value(std::fabs(v.as_double()));
  fail("bad operand type for abs(): '" + type_name(v) + "'");
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

Value f_filesizeformat(Interpreter&, Value v, CallArgs& a) {
  Binder b("filesizeformat", a, {"binary"});
  bool binary = truthy(b[0]);
  double bytes;
  if (v.is_number()) {
    bytes = v.as_double();
  } else if (v.is_string()) {
    std::optional<double> d = parse_py_float(v.str());
    if (!d) fail("could not convert string to float: " + repr(v));
    bytes = *d;
  } else {
    fail("float() argument must be a string or a real number, not '" + type_name(v) + "'");
  }
  double base = binary ? 1024 : 1000;
  static const char* kDec[] = {"kB", "MB", "GB", "TB", "PB", "EB", "ZB", "YB"};
  static const char* kBin[] = {"KiB", "MiB", "GiB", "TiB", "PiB", "EiB", "ZiB", "YiB"};
  if (bytes == 1) return Value("1 Byte");
  if (bytes < base) {
    // Python's int(bytes): every digit of any finite value (+ 0.0 turns -0.0 into 0).
    if (std::isinf(bytes)) fail("cannot convert float infinity to integer");
    char buf[512];
    std::snprintf(buf, sizeof buf, "%.0f", std::trunc(bytes) + 0.0);
    return Value(std::string(buf) + " Bytes");
  }
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

const NamedFilter kFilters[] = {
    {"abs", f_abs},
    {"filesizeformat", f_filesizeformat},
    {"float", f_float},
    {"int", f_int},
    {"round", f_round},
};

}  // namespace

std::span<const NamedFilter> number_filters() { return kFilters; }

}  // namespace dflash::jinja
