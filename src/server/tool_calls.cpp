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
  // Some models write the arguments as a JSON string, as the OpenAI API carries them.
  if (args.is_string()) args = ojson::parse(args.get<std::string>(), nullptr, false);
  if (!args.is_object()) {
    why = "a hermes tool call to '" + name + "' whose arguments are not a JSON object";
    return false;
  }
  call.name = name;
  call.arguments = dump(args);
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
  const ojson* fn = find_function(opt.tools, name);
  const ojson* props = nullptr;
  if (fn && fn->contains("parameters") && (*fn)["parameters"].is_object() && (*fn)["parameters"].contains("properties") &&
      (*fn)["parameters"]["properties"].is_object())
    props = &(*fn)["parameters"]["properties"];
  ojson args = ojson::object();
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
    args[pname] = convert_xml_parameter(value, schema);
    p = end + 12;
  }
  call.name = name;
  call.arguments = dump(args);
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
  std::vector<std::string> types;
  if (schema.is_object() && schema.contains("type")) {
    const ojson& t = schema["type"];
    if (t.is_string()) types.push_back(t.get<std::string>());
    if (t.is_array())
      for (const ojson& x : t)
        if (x.is_string()) types.push_back(x.get<std::string>());
  }
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

// One channel of a finished answer; `count` runs across channels.
std::string parse_channel(const std::string& t, const ToolCallOptions& opt, std::vector<ToolCall>& calls,
                          std::string& note) {
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
    if (close == std::string::npos) {
      out += t.substr(open);
      add_note(note, "an unclosed <tool_call> block");
      break;
    }
    const std::string inside = t.substr(open + kOpen.size(), close - open - kOpen.size());
    const std::string raw = t.substr(open, close + kClose.size() - open);
    ToolCall c;
    std::string why;
    if (!opt.parallel && !calls.empty()) {
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
  p.reasoning = parse_channel(reasoning, opt, p.calls, p.note);
  p.content = parse_channel(content, opt, p.calls, p.note);
  if (!p.calls.empty()) {
    p.reasoning.erase(p.reasoning.size() - trailing_ws(p.reasoning));
    p.content.erase(p.content.size() - trailing_ws(p.content));
  }
  return p;
}

ToolCallStream::ToolCallStream(ToolCallOptions opt) : opt_(std::move(opt)) {}

void ToolCallStream::emit_text(Channel& ch, const std::string& text, std::string& out) {
  if (text.empty()) return;
  const size_t ws = trailing_ws(text);
  if (ws == text.size()) {
    ch.ws += text;
    return;
  }
  out += ch.ws;
  out.append(text, 0, text.size() - ws);
  ch.ws = text.substr(text.size() - ws);
}

void ToolCallStream::take_block(const std::string& raw, const std::string& inside, Channel& ch, std::string& out,
                                std::vector<ToolCallDelta>& calls) {
  ToolCall c;
  std::string why;
  if (!opt_.parallel && count_ > 0) {
    emit_text(ch, raw, out);
    add_note(note_, "a further call left as text (parallel_tool_calls is false)");
    return;
  }
  if (!parse_tool_block(inside, opt_, c, why)) {
    emit_text(ch, raw, out);
    add_note(note_, why);
    return;
  }
  const int index = count_++;
  ToolCallDelta head;
  head.index = index;
  head.id = opt_.id_base + "_" + std::to_string(index);
  head.name = c.name;
  head.first = true;
  calls.push_back(head);
  ToolCallDelta args;
  args.index = index;
  args.arguments = c.arguments;
  calls.push_back(args);
}

void ToolCallStream::feed(Channel& ch, const std::string& text, std::string& out, std::vector<ToolCallDelta>& calls,
                          bool final) {
  ch.pending += text;
  for (;;) {
    if (ch.in_block) {
      const size_t close = ch.pending.find(kClose, kOpen.size());
      if (close == std::string::npos) {
        if (!final) return;
        ch.in_block = false;
        emit_text(ch, std::exchange(ch.pending, std::string()), out);
        add_note(note_, "an unclosed <tool_call> block");
        return;
      }
      const std::string raw = ch.pending.substr(0, close + kClose.size());
      const std::string inside = ch.pending.substr(kOpen.size(), close - kOpen.size());
      ch.pending.erase(0, raw.size());
      ch.in_block = false;
      take_block(raw, inside, ch, out, calls);
      continue;
    }
    const size_t open = ch.pending.find(kOpen);
    if (open != std::string::npos) {
      emit_text(ch, ch.pending.substr(0, open), out);
      ch.pending.erase(0, open);
      ch.in_block = true;
      continue;
    }
    // Hold back the longest tail that could still become "<tool_call>".
    size_t keep = 0;
    if (!final)
      for (size_t len = std::min(kOpen.size() - 1, ch.pending.size()); len > 0; --len)
        if (ch.pending.compare(ch.pending.size() - len, len, kOpen, 0, len) == 0) {
          keep = len;
          break;
        }
    emit_text(ch, ch.pending.substr(0, ch.pending.size() - keep), out);
    ch.pending.erase(0, ch.pending.size() - keep);
    return;
  }
}

ToolStreamOut ToolCallStream::push(const std::string& reasoning, const std::string& content) {
  ToolStreamOut o;
  if (opt_.format == ToolFormat::None) {
    o.reasoning = reasoning;
    o.content = content;
    return o;
  }
  if (!reasoning.empty()) feed(reasoning_, reasoning, o.reasoning, o.calls, false);
  if (!content.empty()) {
    // The answer has begun: reasoning is over, so what it held back is judged now (in the
    // finished parse too, reasoning's blocks come before the answer's).
    if (!reasoning_.pending.empty()) feed(reasoning_, "", o.reasoning, o.calls, true);
    feed(content_, content, o.content, o.calls, false);
  }
  return o;
}

ToolStreamOut ToolCallStream::flush() {
  ToolStreamOut o;
  if (opt_.format == ToolFormat::None) return o;
  feed(reasoning_, "", o.reasoning, o.calls, true);
  feed(content_, "", o.content, o.calls, true);
  // Trailing whitespace stays only where no call was found (as the finished parse trims it).
  if (count_ == 0) {
    o.reasoning += reasoning_.ws;
    o.content += content_.ws;
  }
  reasoning_.ws.clear();
  content_.ws.clear();
  return o;
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
    choice["finish_reason"] = "tool_calls";
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
