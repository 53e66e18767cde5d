// jinja2's filters that work on text.
#include <algorithm>
#include <cstdio>
#include <map>

#include "chat/jinja_budget.h"
#include "chat/jinja_filters.h"
#include "chat/jinja_strings.h"
#include "chat/jinja_unicode.h"

namespace dflash::jinja {

namespace {

// Filters that call a str method on soft_str(value) return Markup when given Markup.
Value like(const Value& v, std::string s) { return v.is_markup() ? Value::markup(std::move(s)) : Value(std::move(s)); }

Value f_capitalize(Interpreter&, Value v, CallArgs& a) {
  Binder b("capitalize", a, {});
  return like(v, py_capitalize(soft_str(v)));
}

Value f_center(Interpreter&, Value v, CallArgs& a) {
  Binder b("center", a, {"width"});
  return like(v, py_center(soft_str(v), b.has(0) ? int_arg(b[0], "width") : 80, ' '));
}

Value f_escape(Interpreter&, Value v, CallArgs& a) {
  Binder b("escape", a, {});
  return Value::markup(markup_escape(v));
}

Value f_forceescape(Interpreter&, Value v, CallArgs& a) {
  Binder b("forceescape", a, {});
  return Value::markup(html_escape(to_str(v)));
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

Value f_indent(Interpreter&, Value v, CallArgs& a) {
  Binder b("indent", a, {"width", "first", "blank"});
  std::string ind = b.has(0) && b[0].is_string() ? b[0].str() : py_repeat(" ", b.has(0) ? int_arg(b[0], "width") : 4);
  std::string s = soft_str(v) + "\n";
  std::vector<std::string> lines = py_splitlines(s, false);
  std::string rv;
  if (truthy(b[2])) {
    for (size_t i = 0; i < lines.size(); ++i) append_checked(rv, (i ? "\n" + ind : "") + lines[i]);
  } else {
    rv = lines.empty() ? "" : lines[0];
    for (size_t i = 1; i < lines.size(); ++i) append_checked(rv, "\n" + (lines[i].empty() ? "" : ind) + lines[i]);
  }
  if (truthy(b[1])) rv = ind + rv;
  return Value(rv);
}

Value f_lower(Interpreter&, Value v, CallArgs& a) {
  Binder b("lower", a, {});
  return like(v, py_lower(soft_str(v)));
}

Value f_upper(Interpreter&, Value v, CallArgs& a) {
  Binder b("upper", a, {});
  return like(v, py_upper(soft_str(v)));
}

Value f_replace(Interpreter&, Value v, CallArgs& a) {
  Binder b("replace", a, {"old", "new", "count"}, 2);
  int64_t count = b.has(2) && !b[2].is_none() ? int_arg(b[2], "count") : -1;
  return Value(py_replace(soft_str(v), soft_str(b[0]), soft_str(b[1]), count));
}

Value f_safe(Interpreter&, Value v, CallArgs& a) {
  Binder b("safe", a, {});
  return Value::markup(soft_str(v));
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

const NamedFilter kFilters[] = {
    {"capitalize", f_capitalize},
    {"center", f_center},
    {"e", f_escape},
    {"escape", f_escape},
    {"forceescape", f_forceescape},
    {"format", f_format},
    {"indent", f_indent},
    {"lower", f_lower},
    {"replace", f_replace},
    {"safe", f_safe},
    {"string", f_string},
    {"striptags", f_striptags},
    {"title", f_title},
    {"trim", f_trim},
    {"truncate", f_truncate},
    {"upper", f_upper},
    {"urlencode", f_urlencode},
    {"wordcount", f_wordcount},
};

}  // namespace

std::span<const NamedFilter> string_filters() { return kFilters; }

}  // namespace dflash::jinja
