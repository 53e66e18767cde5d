#include "server/tool_calls.h"

#include <algorithm>
#include <utility>

namespace dflash::server {

using ojson = nlohmann::ordered_json;

namespace {

const std::string kOpen = "<tool_call>";
const std::string kClose = "</tool_call>";

bool is_ws(char c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; }

std::string trim(const std::string& s) {
  size_t b = 0, e = s.size();
  while (b < e && is_ws(s[b])) ++b;
  while (e > b && is_ws(s[e - 1])) --e;
  return s.substr(b, e - b);
}

size_t trailing_ws(const std::string& s) {
  size_t n = 0;
  while (n < s.size() && is_ws(s[s.size() - 1 - n])) ++n;
  return n;
}

// The length of the well-formed UTF-8 sequence at s[i] (a lead byte), or 0: ill-formed, or cut
// at the end of s (then utf8_incomplete_tail counts it).
size_t utf8_sequence(const std::string& s, size_t i) {
  const unsigned char c = static_cast<unsigned char>(s[i]);
  const size_t n = c >= 0xF5 ? 0 : c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC2 ? 2 : 0;
  if (n == 0 || i + n > s.size()) return 0;
  for (size_t k = 1; k < n; ++k) {
    const unsigned char d = static_cast<unsigned char>(s[i + k]);
    unsigned char lo = 0x80, hi = 0xBF;
    if (k == 1 && c == 0xE0) lo = 0xA0;
    if (k == 1 && c == 0xED) hi = 0x9F;
    if (k == 1 && c == 0xF0) lo = 0x90;
    if (k == 1 && c == 0xF4) hi = 0x8F;
    if (d < lo || d > hi) return 0;
  }
  return n;
}

// How many bytes at the end of s begin a UTF-8 sequence that more bytes could complete.
size_t utf8_incomplete_tail(const std::string& s) {
  for (size_t back = 1; back <= 3 && back <= s.size(); ++back) {
    const unsigned char c = static_cast<unsigned char>(s[s.size() - back]);
    if (c < 0x80) return 0;
    if (c >= 0xC0) {
      // Completable: filled up with the smallest continuations allowed, the bytes are well-formed.
      const size_t need = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : 2;
      if (need <= back) return 0;
      std::string t = s.substr(s.size() - back);
      while (t.size() < need) t += (t.size() == 1 && c == 0xE0) ? '\xA0' : (t.size() == 1 && c == 0xF0) ? '\x90' : '\x80';
      return utf8_sequence(t, 0) == need ? back : 0;
    }
  }
  return 0;
}

std::string dump(const ojson& j) { return j.dump(-1, ' ', false, ojson::error_handler_t::replace); }

void add_note(std::string& note, const std::string& why) {
  if (!note.empty()) note += "; ";
  note += why;
}

// The offered function named `name` (its "function" object), or null.
const ojson* find_function(const ojson& tools, const std::string& name) {
  if (!tools.is_array()) return nullptr;
  for (const ojson& t : tools)
    if (t.is_object() && t.contains("function") && t["function"].is_object()) {
      const ojson& f = t["function"];
      if (f.contains("name") && f["name"].is_string() && f["name"].get<std::string>() == name) return &f;
    }
  return nullptr;
}

// Whether `name` may be called; `why` says why not.
bool allowed(const std::string& name, const ToolCallOptions& opt, std::string& why) {
  if (!opt.only_function.empty() && name != opt.only_function) {
    why = "a call to '" + name + "', not the function tool_choice names ('" + opt.only_function + "')";
    return false;
  }
  if (opt.tools.is_array() && !opt.tools.empty() && !find_function(opt.tools, name)) {
    why = "a call to '" + name + "', which is not among the request's tools";
    return false;
  }
  return true;
}

// JSON text without the whitespace outside strings (the text may be unfinished).
std::string compact_json(const std::string& s) {
  std::string out;
  bool in_str = false, esc = false;
  for (char c : s) {
    if (in_str) {
      if (esc) esc = false;
      else if (c == '\\') esc = true;
      else if (c == '"') in_str = false;
    } else if (is_ws(c)) {
      continue;
    } else if (c == '"') {
      in_str = true;
    }
    out += c;
  }
  return out;
}

// The end of the (valid, compact) JSON value at p.
size_t skip_value(const std::string& s, size_t p) {
  int depth = 0;
  bool in_str = false, esc = false;
  for (; p < s.size(); ++p) {
    const char c = s[p];
    if (in_str) {
      if (esc) esc = false;
      else if (c == '\\') esc = true;
      else if (c == '"') {
        in_str = false;
        if (depth == 0) return p + 1;
      }
    } else if (c == '"') {
      in_str = true;
    } else if (c == '{' || c == '[') {
      ++depth;
    } else if (c == '}' || c == ']') {
      if (depth == 0) return p;
      if (--depth == 0) return p + 1;
    } else if (c == ',' || c == ':') {
      if (depth == 0) return p;
    }
  }
  return p;
}

// The text of the last member `key` (written unescaped) of a valid, compact JSON object, or "".
std::string member_text(const std::string& s, const char* key) {
  const std::string want = std::string("\"") + key + "\"";
  std::string found;
  size_t p = 1;
  while (p < s.size() && s[p] == '"') {
    const size_t k = skip_value(s, p);
    if (k >= s.size() || s[k] != ':') break;
    const size_t e = skip_value(s, k + 1);
    if (s.compare(p, k - p, want) == 0) found = s.substr(k + 1, e - k - 1);
    if (e >= s.size() || s[e] != ',') break;
    p = e + 1;
  }
  return found;
}

bool parse_hermes(const std::string& inside, const ToolCallOptions& opt, ToolCall& call, std::string& why) {
  const ojson j = ojson::parse(inside, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) {
    why = "a hermes tool call that is not valid JSON";
    return false;
  }
  if (!j.is_object() || !j.contains("name") || !j["name"].is_string()) {
    why = "a hermes tool call without a string \"name\"";
    return false;
  }
  const std::string name = j["name"].get<std::string>();
  if (!allowed(name, opt, why)) return false;
  const char* key = j.contains("arguments") ? "arguments" : j.contains("parameters") ? "parameters" : nullptr;
  ojson args = key ? j[key] : ojson::object();
  const bool as_written = key && args.is_object();
  // Some models write the arguments as a JSON string, as the OpenAI API carries them.
  if (args.is_string()) args = ojson::parse(args.get<std::string>(), nullptr, false);
  if (!args.is_object()) {
    why = "a hermes tool call to '" + name + "' whose arguments are not a JSON object";
    return false;
  }
  call.name = name;
  // The object as the model wrote it, less the whitespace outside strings (what streams as it
  // is written); a re-encoding only where that text cannot be found (a key written escaped).
  const std::string raw = as_written ? member_text(compact_json(inside), key) : std::string();
  call.arguments = raw.empty() ? dump(args) : raw;
  return true;
}

// Strips one newline each side: the template writes the value on lines of its own.
std::string xml_value(const std::string& raw) {
  size_t b = 0, e = raw.size();
  if (b < e && raw[b] == '\n') ++b;
  if (e > b && raw[e - 1] == '\n') --e;
  if (e > b && raw[e - 1] == '\r') --e;
  return raw.substr(b, e - b);
}

// The parameters of the function `name` offers (its schema's "properties"), or null.
const ojson* xml_properties(const ToolCallOptions& opt, const std::string& name) {
  const ojson* fn = find_function(opt.tools, name);
  if (fn && fn->contains("parameters") && (*fn)["parameters"].is_object() && (*fn)["parameters"].contains("properties") &&
      (*fn)["parameters"]["properties"].is_object())
    return &(*fn)["parameters"]["properties"];
  return nullptr;
}

// A schema's "type" as a list.
std::vector<std::string> schema_types(const ojson& schema) {
  std::vector<std::string> types;
  if (schema.is_object() && schema.contains("type")) {
    const ojson& t = schema["type"];
    if (t.is_string()) types.push_back(t.get<std::string>());
    if (t.is_array())
      for (const ojson& x : t)
        if (x.is_string()) types.push_back(x.get<std::string>());
  }
  return types;
}

// Whether a parameter of this schema is always a JSON string (its value can stream as written).
bool xml_streams(const ojson& schema) {
  const std::vector<std::string> types = schema_types(schema);
  if (types.empty()) return true;
  return std::find(types.begin(), types.end(), "string") != types.end() &&
         std::find(types.begin(), types.end(), "null") == types.end();
}

// Bytes as the inside of a JSON string, as nlohmann writes them (ill-formed UTF-8 as U+FFFD).
// Escaping a text in pieces gives the escaping of the whole when no piece ends inside a
// UTF-8 sequence that could still be completed (utf8_incomplete_tail).
std::string json_escape(const std::string& s) {
  std::string out;
  for (size_t i = 0; i < s.size();) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    if (c < 0x80) {
      switch (c) {
        case '"': out += "\\\""; break;
        case '\\': out += "\\\\"; break;
        case '\b': out += "\\b"; break;
        case '\f': out += "\\f"; break;
        case '\n': out += "\\n"; break;
        case '\r': out += "\\r"; break;
        case '\t': out += "\\t"; break;
        default:
          if (c < 0x20) {
            static const char* hex = "0123456789abcdef";
            out += "\\u00";
            out += hex[c >> 4];
            out += hex[c & 15];
          } else {
            out += char(c);
          }
      }
      ++i;
      continue;
    }
    const size_t n = utf8_sequence(s, i);
    if (n == 0) {
      out += "\xEF\xBF\xBD";
      ++i;
    } else {
      out.append(s, i, n);
      i += n;
    }
  }
  return out;
}

// A parameter's member head: `,"P":` (no comma for the first).
std::string xml_member(bool comma, const std::string& pname) {
  return (comma ? "," : "") + dump(ojson(pname)) + ":";
}

// A parameter's value as JSON text; `closed` false: the start of a streaming string's text.
std::string xml_json(const std::string& value, const ojson& schema, bool closed) {
  if (xml_streams(schema)) return "\"" + json_escape(value) + (closed ? "\"" : "");
  return dump(convert_xml_parameter(value, schema));
}

bool parse_xml(const std::string& inside, const ToolCallOptions& opt, ToolCall& call, std::string& why) {
  const std::string s = inside;
  size_t p = 0;
  auto skip_ws = [&] {
    while (p < s.size() && is_ws(s[p])) ++p;
  };
  auto at = [&](const char* lit) { return s.compare(p, std::char_traits<char>::length(lit), lit) == 0; };
  skip_ws();
  if (!at("<function=")) {
    why = "an XML tool call without <function=...>";
    return false;
  }
  p += 10;
  size_t gt = s.find('>', p);
  if (gt == std::string::npos || s.find('\n', p) < gt) {
    why = "an XML tool call whose <function=...> tag is not closed";
    return false;
  }
  const std::string name = trim(s.substr(p, gt - p));
  p = gt + 1;
  if (name.empty()) {
    why = "an XML tool call without a function name";
    return false;
  }
  if (!allowed(name, opt, why)) return false;
  const ojson* props = xml_properties(opt, name);
  std::string args = "{";
  for (;;) {
    skip_ws();
    if (at("</function>")) {
      p += 11;
      skip_ws();
      if (p != s.size()) {
        why = "an XML tool call to '" + name + "' with text after </function>";
        return false;
      }
      break;
    }
    if (!at("<parameter=")) {
      why = "an XML tool call to '" + name + "' with text that is neither <parameter=...> nor </function>";
      return false;
    }
    p += 11;
    gt = s.find('>', p);
    if (gt == std::string::npos || s.find('\n', p) < gt) {
      why = "an XML tool call to '" + name + "' whose <parameter=...> tag is not closed";
      return false;
    }
    const std::string pname = trim(s.substr(p, gt - p));
    const size_t end = s.find("</parameter>", gt + 1);
    if (pname.empty() || end == std::string::npos) {
      why = "an XML tool call to '" + name + "' with an unnamed or unclosed parameter";
      return false;
    }
    const std::string value = xml_value(s.substr(gt + 1, end - gt - 1));
    const ojson schema = props && props->contains(pname) ? (*props)[pname] : ojson();
    args += xml_member(args.size() > 1, pname) + xml_json(value, schema, true);
    p = end + 12;
  }
  call.name = name;
  call.arguments = args + "}";
  return true;
}

}  // namespace

ToolFormat tool_format_from_template(const std::string& src) {
  if (src.find("<function=") != std::string::npos) return ToolFormat::Xml;
  if (src.find(kOpen) != std::string::npos) return ToolFormat::Hermes;
  return ToolFormat::None;
}

const char* tool_format_name(ToolFormat f) {
  switch (f) {
    case ToolFormat::Hermes: return "hermes";
    case ToolFormat::Xml: return "xml";
    default: return "none";
  }
}

std::string tool_call_id_base(const std::string& response_id) {
  const size_t dash = response_id.rfind('-');
  return "call_" + (dash == std::string::npos ? response_id : response_id.substr(dash + 1));
}

ojson convert_xml_parameter(const std::string& raw, const ojson& schema) {
  const std::vector<std::string> types = schema_types(schema);
  const bool has_string = std::find(types.begin(), types.end(), "string") != types.end();
  const bool has_null = std::find(types.begin(), types.end(), "null") != types.end();
  if (types.empty()) return raw;  // no schema type: the text as written
  if (has_string) {
    if (has_null && trim(raw) == "null") return nullptr;
    return raw;
  }
  ojson v = ojson::parse(trim(raw), nullptr, /*allow_exceptions=*/false);
  if (v.is_discarded()) return raw;
  return v;
}

bool parse_tool_block(const std::string& inside, const ToolCallOptions& opt, ToolCall& call, std::string& why) {
  if (opt.format == ToolFormat::Xml) {
    // A Qwen3.5 model may still write the hermes form; take whichever the block is.
    const std::string t = trim(inside);
    if (!t.empty() && t[0] == '{') return parse_hermes(t, opt, call, why);
    return parse_xml(inside, opt, call, why);
  }
  return parse_hermes(trim(inside), opt, call, why);
}

namespace {

// Hermes: {"name": "NAME", "arguments": {...  -> the name, and the object's text so far less
// the whitespace outside strings (a name written with escapes never commits).
CallProgress hermes_progress(const std::string& s) {
  CallProgress r;
  size_t p = 0;
  auto skip_ws = [&] {
    while (p < s.size() && is_ws(s[p])) ++p;
  };
  auto lit = [&](const char* l) {
    skip_ws();
    const size_t n = std::char_traits<char>::length(l);
    if (s.compare(p, n, l) != 0) return false;
    p += n;
    return true;
  };
  if (!lit("{") || !lit("\"name\"") || !lit(":") || !lit("\"")) return r;
  const size_t q = s.find('"', p);
  if (q == std::string::npos || s.find('\\', p) < q) return r;
  r.name = s.substr(p, q - p);
  r.named = true;
  p = q + 1;
  if (!lit(",") || !lit("\"arguments\"") || !lit(":")) return r;
  skip_ws();
  if (p >= s.size() || s[p] != '{') return r;
  r.arguments = compact_json(s.substr(p));
  const size_t e = skip_value(r.arguments, 0);  // the object's end, once it is complete
  if (e < r.arguments.size()) r.arguments.resize(e);
  return r;
}

CallProgress xml_progress(const std::string& s, const ToolCallOptions& opt) {
  CallProgress r;
  size_t p = 0;
  while (p < s.size() && is_ws(s[p])) ++p;
  if (p < s.size() && s[p] == '{') return hermes_progress(s);
  auto at = [&](const char* lit) { return s.compare(p, std::char_traits<char>::length(lit), lit) == 0; };
  if (!at("<function=")) return r;
  p += 10;
  size_t gt = s.find('>', p);
  if (gt == std::string::npos || s.find('\n', p) < gt) return r;
  r.name = trim(s.substr(p, gt - p));
  if (r.name.empty()) return r;
  r.named = true;
  p = gt + 1;
  const ojson* props = xml_properties(opt, r.name);
  std::string args = "{";
  for (;;) {
    while (p < s.size() && is_ws(s[p])) ++p;
    if (!at("<parameter=")) break;
    p += 11;
    gt = s.find('>', p);
    if (gt == std::string::npos || s.find('\n', p) < gt) break;
    const std::string pname = trim(s.substr(p, gt - p));
    if (pname.empty()) break;
    const ojson schema = props && props->contains(pname) ? (*props)[pname] : ojson();
    const size_t end = s.find("</parameter>", gt + 1);
    if (end == std::string::npos) {
      if (!xml_streams(schema)) break;
      // The value so far, less what may still turn out not to be value: a tail that could
      // begin </parameter>, the line end xml_value strips, an unfinished UTF-8 sequence.
      std::string v = s.substr(gt + 1);
      if (!v.empty() && v[0] == '\n') v.erase(0, 1);
      const size_t lt = v.rfind('<');
      if (lt != std::string::npos && std::string("</parameter>").compare(0, v.size() - lt, v, lt) == 0) v.resize(lt);
      for (int k = 0; k < 2 && !v.empty() && (v.back() == '\n' || v.back() == '\r'); ++k) v.pop_back();
      v.resize(v.size() - utf8_incomplete_tail(v));
      args += xml_member(args.size() > 1, pname) + xml_json(v, schema, false);
      break;
    }
    args += xml_member(args.size() > 1, pname) + xml_json(xml_value(s.substr(gt + 1, end - gt - 1)), schema, true);
    p = end + 12;
  }
  r.arguments = args;
  return r;
}

}  // namespace

CallProgress call_progress(const std::string& inside, const ToolCallOptions& opt) {
  return opt.format == ToolFormat::Xml ? xml_progress(inside, opt) : hermes_progress(inside);
}

std::string without_partial_close(const std::string& inside) {
  const size_t lt = inside.rfind('<');
  if (lt != std::string::npos && inside.size() - lt < kClose.size() && kClose.compare(0, inside.size() - lt, inside, lt) == 0)
    return inside.substr(0, lt);
  return inside;
}

bool commits(const CallProgress& p, const ToolCallOptions& opt, int count) {
  std::string why;
  return opt.incremental && p.named && (opt.parallel || count == 0) && allowed(p.name, opt, why);
}

std::string committed_arguments(const std::string& inside, const CallProgress& p, const ToolCallOptions& opt,
                                std::string& why) {
  ToolCall c;
  if (parse_tool_block(inside, opt, c, why)) {
    if (c.name == p.name && c.arguments.compare(0, p.arguments.size(), p.arguments) == 0) return c.arguments;
    why = "its text changed after it was streamed";
  }
  why = "an invalid tool call to '" + p.name + "' (" + why + "): its arguments are as far as they were streamed";
  return p.arguments;
}

namespace {

// One channel of a finished answer; `count` runs across channels. `incremental`: the
// answer's channel in incremental mode (blocks commit as soon as named, see ToolCallOptions).
std::string parse_channel(const std::string& t, const ToolCallOptions& opt, std::vector<ToolCall>& calls,
                          std::string& note, bool incremental, bool& cut) {
  std::string out;
  size_t pos = 0;
  for (;;) {
    const size_t open = t.find(kOpen, pos);
    if (open == std::string::npos) {
      out += t.substr(pos);
      break;
    }
    out += t.substr(pos, open - pos);
    const size_t close = t.find(kClose, open + kOpen.size());
    if (close == std::string::npos && incremental) {
      const CallProgress p = call_progress(without_partial_close(t.substr(open + kOpen.size())), opt);
      if (commits(p, opt, int(calls.size()))) {
        const int index = int(calls.size());
        calls.push_back({index, opt.id_base + "_" + std::to_string(index), p.name, p.arguments});
        add_note(note, "a tool call to '" + p.name + "' cut before </tool_call>: its arguments are incomplete");
        cut = true;
        break;
      }
    }
    if (close == std::string::npos) {
      out += t.substr(open);
      add_note(note, "an unclosed <tool_call> block");
      break;
    }
    const std::string inside = t.substr(open + kOpen.size(), close - open - kOpen.size());
    const std::string raw = t.substr(open, close + kClose.size() - open);
    ToolCall c;
    std::string why;
    const CallProgress p = incremental ? call_progress(inside, opt) : CallProgress();
    if (incremental && commits(p, opt, int(calls.size()))) {
      const int index = int(calls.size());
      calls.push_back({index, opt.id_base + "_" + std::to_string(index), p.name, committed_arguments(inside, p, opt, why)});
      if (!why.empty()) add_note(note, why);
    } else if (!opt.parallel && !calls.empty()) {
      out += raw;
      add_note(note, "a further call left as text (parallel_tool_calls is false)");
    } else if (parse_tool_block(inside, opt, c, why)) {
      c.index = int(calls.size());
      c.id = opt.id_base + "_" + std::to_string(c.index);
      calls.push_back(std::move(c));
    } else {
      out += raw;
      add_note(note, why);
    }
    pos = close + kClose.size();
  }
  return out;
}

}  // namespace

ToolParse parse_tool_calls(const std::string& reasoning, const std::string& content, const ToolCallOptions& opt) {
  ToolParse p;
  if (opt.format == ToolFormat::None) {
    p.reasoning = reasoning;
    p.content = content;
    return p;
  }
  p.reasoning = parse_channel(reasoning, opt, p.calls, p.note, false, p.cut);
  p.content = parse_channel(content, opt, p.calls, p.note, opt.incremental, p.cut);
  if (!p.calls.empty()) {
    p.reasoning.erase(p.reasoning.size() - trailing_ws(p.reasoning));
    p.content.erase(p.content.size() - trailing_ws(p.content));
  }
  return p;
}

void apply_tool_parse(ojson& response, const ToolParse& p) {
  ojson& choice = response["choices"][0];
  ojson& msg = choice["message"];
  if (p.reasoning.empty()) msg.erase("reasoning_content");
  else msg["reasoning_content"] = p.reasoning;
  if (!p.calls.empty()) {
    msg["content"] = p.content.empty() ? ojson() : ojson(p.content);
    ojson calls = ojson::array();
    for (const ToolCall& c : p.calls)
      calls.push_back({{"id", c.id}, {"type", "function"}, {"function", {{"name", c.name}, {"arguments", c.arguments}}}});
    msg["tool_calls"] = std::move(calls);
    if (!p.cut) choice["finish_reason"] = "tool_calls";  // a cut call keeps its finish_reason
  } else {
    msg["content"] = p.content;
  }
  if (!p.note.empty()) response["dflash"]["tool_parse"] = p.note;
}

ojson tool_call_deltas_json(const std::vector<ToolCallDelta>& calls) {
  ojson out = ojson::array();
  for (const ToolCallDelta& d : calls) {
    if (d.first)
      out.push_back({{"index", d.index},
                     {"id", d.id},
                     {"type", "function"},
                     {"function", {{"name", d.name}, {"arguments", d.arguments}}}});
    else
      out.push_back({{"index", d.index}, {"function", {{"arguments", d.arguments}}}});
  }
  return out;
}

}  // namespace dflash::server
