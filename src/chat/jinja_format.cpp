// Python's two string formatting languages: printf-style `%` and str.format().
#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdio>

#include "chat/jinja_budget.h"
#include "chat/jinja_builtins.h"
#include "chat/jinja_eval.h"
#include "chat/jinja_strings.h"
#include "chat/jinja_unicode.h"

namespace dflash::jinja {

namespace {

std::string c_format(const char* spec, double d) {
  char buf[512];
  std::snprintf(buf, sizeof buf, spec, d);
  return buf;
}

std::string to_base(int64_t v, int base, bool upper) {
  if (v == 0) return "0";
  uint64_t u = v < 0 ? static_cast<uint64_t>(-(v + 1)) + 1 : static_cast<uint64_t>(v);
  std::string out;
  const char* digits = upper ? "0123456789ABCDEF" : "0123456789abcdef";
  while (u) {
    out.insert(out.begin(), digits[u % static_cast<uint64_t>(base)]);
    u /= static_cast<uint64_t>(base);
  }
  return out;
}

// A width or precision written in a format: saturates instead of overflowing, so that a huge
// one fails the size limit where it is used.
template <class Text>
int read_count(const Text& s, size_t& i) {
  int n = -1;
  while (i < s.size() && s[i] >= '0' && s[i] <= '9') {
    int d = static_cast<int>(s[i++] - '0');
    n = n < 0 ? d : n > (INT_MAX - d) / 10 ? INT_MAX : n * 10 + d;
  }
  return n;
}

// Digits of a float for the fixed/exponent/general conversions, without sign.
std::string float_body(double d, char type, int precision, bool alt) {
  check_size(static_cast<size_t>(precision));
  d = std::fabs(d);
  if (std::isinf(d)) return type >= 'A' && type <= 'Z' ? "INF" : "inf";
  if (std::isnan(d)) return type >= 'A' && type <= 'Z' ? "NAN" : "nan";
  std::string spec = std::string("%") + (alt ? "#" : "") + "." + std::to_string(precision) + type;
  return c_format(spec.c_str(), d);
}

// ---- printf-style ----

struct PercentSpec {
  bool left = false, plus = false, space = false, alt = false, zero = false;
  int width = -1, precision = -1;
  char conv = 0;
};

std::string pad_number(const std::string& sign, const std::string& body, const PercentSpec& s) {
  size_t len = utf8_length(sign) + utf8_length(body);
  size_t w = s.width < 0 ? 0 : static_cast<size_t>(s.width);
  if (len >= w) return sign + body;
  check_size(w);
  std::string pad(w - len, s.zero && !s.left ? '0' : ' ');
  if (s.left) return sign + body + pad;
  if (s.zero) return sign + pad + body;
  return pad + sign + body;
}

std::string percent_one(const PercentSpec& s, const Value& v) {
  switch (s.conv) {
    case 's':
    case 'r':
    case 'a': {
      std::string text = s.conv == 's' ? to_str(v) : repr(v);
      if (s.precision >= 0) text = str_slice(text, adjust_slice(py_len(Value(text)), std::nullopt, s.precision, 1));
      PercentSpec t = s;
      t.zero = false;
      return pad_number("", text, t);
    }
    case 'd':
    case 'i':
    case 'u':
    case 'x':
    case 'X':
    case 'o': {
      bool integral_only = s.conv == 'x' || s.conv == 'X' || s.conv == 'o';
      int64_t n;
      if (v.is_integral()) n = v.as_int();
      else if (v.is_float() && !integral_only) n = static_cast<int64_t>(std::trunc(v.as_double()));
      else if (integral_only) fail(std::string("%") + s.conv + " format: an integer is required, not " + type_name(v));
      else fail(std::string("%") + s.conv + " format: a real number is required, not " + type_name(v));
      int base = s.conv == 'o' ? 8 : (s.conv == 'x' || s.conv == 'X') ? 16 : 10;
      std::string body = to_base(n, base, s.conv == 'X');
      if (s.precision >= 0 && static_cast<int>(body.size()) < s.precision) {
        check_size(static_cast<size_t>(s.precision));
        body.insert(0, static_cast<size_t>(s.precision) - body.size(), '0');
      }
      if (s.alt && base != 10) body = (base == 8 ? "0o" : s.conv == 'X' ? "0X" : "0x") + body;
      std::string sign = n < 0 ? "-" : s.plus ? "+" : s.space ? " " : "";
      return pad_number(sign, body, s);
    }
    case 'e':
    case 'E':
    case 'f':
    case 'F':
    case 'g':
    case 'G': {
      if (!v.is_number()) fail(std::string("must be real number, not ") + type_name(v));
      double d = v.as_double();
      std::string body = float_body(d, s.conv, s.precision < 0 ? 6 : s.precision, s.alt);
      std::string sign = std::signbit(d) && !std::isnan(d) ? "-" : s.plus ? "+" : s.space ? " " : "";
      return pad_number(sign, body, s);
    }
    case 'c': {
      std::string ch;
      if (v.is_integral()) utf8_append(ch, static_cast<char32_t>(v.as_int()));
      else if (v.is_string() && py_len(v) == 1) ch = v.str();
      else fail("%c requires int or char");
      PercentSpec t = s;
      t.zero = false;
      return pad_number("", ch, t);
    }
    default: fail(std::string("unsupported format character '") + s.conv + "'");
  }
}

// ---- str.format ----

// A field's argument number or [index]: Python refuses more digits than its ssize_t holds.
int64_t field_index(const std::string& digits) {
  int64_t n = 0;
  for (char c : digits)
    if (__builtin_mul_overflow(n, 10, &n) || __builtin_add_overflow(n, c - '0', &n))
      fail("Too many decimal digits in format string");
  return n;
}

struct FormatSpec {
  char32_t fill = ' ';
  char align = 0;
  char sign = '-';
  bool alt = false, zero = false;
  int width = -1, precision = -1;
  char grouping = 0;
  char type = 0;
};

FormatSpec parse_spec(const std::string& text) {
  std::u32string s = utf8_decode(text);
  FormatSpec f;
  size_t i = 0;
  auto is_align = [](char32_t c) { return c == '<' || c == '>' || c == '^' || c == '='; };
  if (s.size() >= 2 && is_align(s[1])) {
    f.fill = s[0];
    f.align = static_cast<char>(s[1]);
    i = 2;
  } else if (!s.empty() && is_align(s[0])) {
    f.align = static_cast<char>(s[0]);
    i = 1;
  }
  if (i < s.size() && (s[i] == '+' || s[i] == '-' || s[i] == ' ')) f.sign = static_cast<char>(s[i++]);
  if (i < s.size() && s[i] == '#') {
    f.alt = true;
    ++i;
  }
  if (i < s.size() && s[i] == '0') {
    f.zero = true;
    ++i;
  }
  f.width = read_count(s, i);
  if (i < s.size() && (s[i] == ',' || s[i] == '_')) f.grouping = static_cast<char>(s[i++]);
  if (i < s.size() && s[i] == '.') {
    ++i;
    f.precision = read_count(s, i);
    if (f.precision < 0) fail("Format specifier missing precision");
  }
  if (i < s.size()) f.type = static_cast<char>(s[i++]);
  if (i < s.size()) fail("Invalid format specifier");
  return f;
}

std::string group_digits(const std::string& digits, char sep, int every) {
  std::string out;
  int n = 0;
  for (size_t k = digits.size(); k-- > 0;) {
    if (n && n % every == 0) out.insert(out.begin(), sep);
    out.insert(out.begin(), digits[k]);
    ++n;
  }
  return out;
}

std::string align_text(const std::string& sign, const std::string& body, const FormatSpec& f, char dflt) {
  char align = f.align ? f.align : (f.zero ? '=' : dflt);
  char32_t fill = f.align ? f.fill : (f.zero ? U'0' : U' ');
  int64_t len = static_cast<int64_t>(utf8_length(sign) + utf8_length(body));
  if (f.width <= len) return sign + body;
  std::string pad_char;
  utf8_append(pad_char, fill);
  int64_t pad = f.width - len;
  if (align == '=') return sign + py_repeat(pad_char, pad) + body;
  return py_pad(sign + body, f.width, fill, align);
}

std::string format_number(const Value& v, const FormatSpec& f) {
  char type = f.type;
  bool is_int_type = type == 0 || type == 'd' || type == 'n' || type == 'b' || type == 'o' ||
                     type == 'x' || type == 'X' || type == 'c';
  std::string sign, body;
  if (v.is_integral() && is_int_type) {
    int64_t n = v.as_int();
    if (type == 'c') {
      utf8_append(body, static_cast<char32_t>(n));
      return align_text("", body, f, '<');
    }
    int base = type == 'b' ? 2 : type == 'o' ? 8 : (type == 'x' || type == 'X') ? 16 : 10;
    body = to_base(n, base, type == 'X');
    if (f.grouping) body = group_digits(body, f.grouping, base == 10 ? 3 : 4);
    if (f.alt && base != 10) body = std::string("0") + (base == 2 ? "b" : base == 8 ? "o" : type == 'X' ? "X" : "x") + body;
    sign = n < 0 ? "-" : f.sign == '+' ? "+" : f.sign == ' ' ? " " : "";
    return align_text(sign, body, f, '>');
  }
  if (!(type == 0 || type == 'e' || type == 'E' || type == 'f' || type == 'F' || type == 'g' ||
        type == 'G' || type == '%' || type == 'n'))
    fail(std::string("Unknown format code '") + type + "' for object of type '" + type_name(v) + "'");
  double d = v.as_double();
  sign = std::signbit(d) && !std::isnan(d) ? "-" : f.sign == '+' ? "+" : f.sign == ' ' ? " " : "";
  if (type == '%') {
    body = float_body(d * 100, 'f', f.precision < 0 ? 6 : f.precision, f.alt) + "%";
  } else if (type == 0 && f.precision < 0) {
    body = float_repr(std::fabs(d));
  } else if (type == 0 || type == 'n') {
    body = float_body(d, 'g', f.precision < 0 ? 6 : std::max(f.precision, 1), f.alt);
    if (type == 0 && body.find_first_of(".einf") == std::string::npos) body += ".0";
  } else {
    body = float_body(d, type, f.precision < 0 ? 6 : f.precision, f.alt);
  }
  if (f.grouping) {
    size_t end = body.find_first_not_of("0123456789");
    body = group_digits(body.substr(0, end), f.grouping, 3) + (end == std::string::npos ? "" : body.substr(end));
  }
  return align_text(sign, body, f, '>');
}

std::string format_value(const Value& v, const std::string& spec) {
  if (spec.empty()) return to_str(v);
  FormatSpec f = parse_spec(spec);
  if (v.is_number() && !(v.is_bool() && (f.type == 0 || f.type == 's'))) return format_number(v, f);
  if (v.is_string() || v.is_bool()) {
    if (f.type != 0 && f.type != 's')
      fail(std::string("Unknown format code '") + f.type + "' for object of type '" + type_name(v) + "'");
    std::string text = to_str(v);
    if (f.precision >= 0) text = str_slice(text, adjust_slice(py_len(Value(text)), std::nullopt, f.precision, 1));
    return align_text("", text, f, '<');
  }
  fail("unsupported format string passed to " + type_name(v) + ".__format__");
}

}  // namespace

std::string printf_format(const std::string& fmt, const Value& args) {
  ValueList positional;
  const Value* mapping = nullptr;
  if (args.is_list_kind(ListKind::Tuple)) positional = args.list().items;
  else if (args.is_dict() && fmt.find("%(") != std::string::npos) mapping = &args;
  else positional.push_back(args);
  size_t next = 0;
  auto take = [&]() -> const Value& {
    if (next >= positional.size()) fail("not enough arguments for format string");
    return positional[next++];
  };
  std::string out;
  for (size_t i = 0; i < fmt.size(); ++i) {
    if (fmt[i] != '%') {
      out.push_back(fmt[i]);
      continue;
    }
    if (++i >= fmt.size()) fail("incomplete format");
    PercentSpec s;
    const Value* named = nullptr;
    if (fmt[i] == '(') {
      size_t close = fmt.find(')', i);
      if (close == std::string::npos) fail("incomplete format key");
      if (!mapping) fail("format requires a mapping");
      named = mapping->dict().find(std::string_view(fmt).substr(i + 1, close - i - 1));
      if (!named) fail("KeyError: '" + fmt.substr(i + 1, close - i - 1) + "'");
      i = close + 1;
    }
    for (; i < fmt.size(); ++i) {
      char c = fmt[i];
      if (c == '-') s.left = true;
      else if (c == '+') s.plus = true;
      else if (c == ' ') s.space = true;
      else if (c == '#') s.alt = true;
      else if (c == '0') s.zero = true;
      else break;
    }
    auto number = [&]() {
      if (i < fmt.size() && fmt[i] == '*') {
        ++i;
        return static_cast<int>(std::clamp<int64_t>(int_arg(take(), "*"), -INT_MAX, INT_MAX));
      }
      return read_count(fmt, i);
    };
    s.width = number();
    if (s.width < -1) {
      s.left = true;
      s.width = -s.width;
    }
    if (i < fmt.size() && fmt[i] == '.') {
      ++i;
      s.precision = std::max(0, number());
    }
    while (i < fmt.size() && (fmt[i] == 'h' || fmt[i] == 'l' || fmt[i] == 'L')) ++i;
    if (i >= fmt.size()) fail("incomplete format");
    s.conv = fmt[i];
    if (s.conv == '%') {
      out.push_back('%');
      continue;
    }
    out += percent_one(s, named ? *named : take());
  }
  if (!mapping && next < positional.size()) fail("not all arguments converted during string formatting");
  return out;
}

std::string str_format(Interpreter& in, const std::string& fmt, CallArgs& args) {
  std::string out;
  size_t auto_index = 0;
  auto field_value = [&](const std::string& field) -> Value {
    size_t end = field.find_first_of(".[");
    std::string first = field.substr(0, end);
    Value v;
    if (first.empty() || std::all_of(first.begin(), first.end(), [](char c) { return c >= '0' && c <= '9'; })) {
      size_t idx = first.empty() ? auto_index++ : static_cast<size_t>(field_index(first));
      if (idx >= args.pos.size()) fail("Replacement index " + std::to_string(idx) + " out of range for positional args tuple");
      v = args.pos[idx];
    } else {
      bool found = false;
      for (auto& kv : args.kw)
        if (kv.first == first) {
          v = kv.second;
          found = true;
        }
      if (!found) fail("KeyError: '" + first + "'");
    }
    size_t i = end;
    while (i != std::string::npos && i < field.size()) {
      if (field[i] == '.') {
        size_t j = field.find_first_of(".[", i + 1);
        v = in.getattr(v, field.substr(i + 1, j == std::string::npos ? std::string::npos : j - i - 1));
        i = j;
      } else {
        size_t j = field.find(']', i);
        if (j == std::string::npos) fail("Missing ']' in format string");
        std::string key = field.substr(i + 1, j - i - 1);
        bool digits = !key.empty() && std::all_of(key.begin(), key.end(), [](char c) { return c >= '0' && c <= '9'; });
        v = in.getitem(v, digits ? Value(field_index(key)) : Value(key));
        i = j + 1;
      }
    }
    return v;
  };
  for (size_t i = 0; i < fmt.size(); ++i) {
    char c = fmt[i];
    if (c == '}') {
      if (i + 1 < fmt.size() && fmt[i + 1] == '}') {
        out.push_back('}');
        ++i;
        continue;
      }
      fail("Single '}' encountered in format string");
    }
    if (c != '{') {
      out.push_back(c);
      continue;
    }
    if (i + 1 < fmt.size() && fmt[i + 1] == '{') {
      out.push_back('{');
      ++i;
      continue;
    }
    int depth = 1;
    size_t j = i + 1;
    for (; j < fmt.size() && depth; ++j) {
      if (fmt[j] == '{') ++depth;
      if (fmt[j] == '}') --depth;
    }
    if (depth) fail("expected '}' before end of string");
    std::string field = fmt.substr(i + 1, j - i - 2);
    i = j - 1;
    std::string spec, conv;
    size_t colon = field.find(':');
    if (colon != std::string::npos) {
      spec = field.substr(colon + 1);
      field = field.substr(0, colon);
    }
    size_t bang = field.find('!');
    if (bang != std::string::npos) {
      conv = field.substr(bang + 1);
      field = field.substr(0, bang);
    }
    Value v = field_value(field);
    if (spec.find('{') != std::string::npos) spec = str_format(in, spec, args);
    if (conv == "r" || conv == "a") v = Value(repr(v));
    else if (conv == "s") v = Value(to_str(v));
    else if (!conv.empty()) fail("Unknown conversion specifier " + conv);
    out += format_value(v, spec);
  }
  return out;
}

}  // namespace dflash::jinja
