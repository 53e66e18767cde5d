#include "decoding/grammar/json_schema_grammar.h"

#include <cmath>
#include <map>
#include <set>

#include "decoding/grammar/json_number_grammar.h"
#include "decoding/grammar/json_string_grammar.h"
#include "util/error.h"

namespace dflash {

using Expr = GrammarBuilder::Expr;
using J = nlohmann::ordered_json;

namespace {

// Keywords that describe a value without restricting it.
const std::set<std::string> kAnnotations = {
    "title", "description", "default", "examples", "example", "$schema", "$id", "$comment", "$anchor",
    "deprecated", "readOnly", "writeOnly", "discriminator", "contentMediaType", "contentEncoding",
    "markdownDescription", "externalDocs", "xml", "$defs", "definitions"};

// Keywords this compiler enforces (some only for some values; see their handlers).
const std::set<std::string> kHandled = {
    "type", "enum", "const", "properties", "required", "additionalProperties", "unevaluatedProperties",
    "items", "prefixItems", "additionalItems", "minItems", "maxItems", "uniqueItems", "minLength", "maxLength",
    "pattern", "format", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "anyOf", "oneOf",
    "allOf", "$ref", "nullable"};

// Formats with a grammar; the others are annotations, as JSON Schema treats format by default.
const std::map<std::string, std::string> kFormatPatterns = {
    {"date", "^[0-9]{4}-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01])$"},
    {"time", "^([01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](\\.[0-9]{1,9})?(Z|[+-]([01][0-9]|2[0-3]):[0-5][0-9])$"},
    {"date-time",
     "^[0-9]{4}-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01])[Tt]([01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9]"
     "(\\.[0-9]{1,9})?([Zz]|[+-]([01][0-9]|2[0-3]):[0-5][0-9])$"},
    {"uuid", "^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$"},
};

constexpr int kMaxLength = 65536;  // bound on minLength/maxLength/minItems/maxItems
constexpr int kMaxNesting = 128;   // schema nesting (not value nesting)

bool is_annotation(const std::string& k) { return kAnnotations.count(k) || k.rfind("x-", 0) == 0; }

bool matches_type(const J& v, const std::string& t) {
  if (t == "null") return v.is_null();
  if (t == "boolean") return v.is_boolean();
  if (t == "string") return v.is_string();
  if (t == "object") return v.is_object();
  if (t == "array") return v.is_array();
  if (t == "number") return v.is_number();
  if (t == "integer") {
    return v.is_number_integer() || (v.is_number_float() && std::floor(v.get<double>()) == v.get<double>());
  }
  return false;
}

class SchemaCompiler {
 public:
  SchemaCompiler(GrammarBuilder& b, const J& root, const JsonGrammarOptions& o)
      : b_(b), root_(root), str_(b) {
    const Expr space = b.byte_class(ByteSet().add_chars(" \t"));
    Expr ws = b.repeat(space, 0, o.max_spaces);
    if (o.newlines) {
      ws = b.seq({ws, b.optional(b.seq({b.optional(b.literal("\r")), b.literal("\n"), b.repeat(space, 0, o.max_indent)}))});
    }
    ws_ = rule("ws", ws);
    string_ = rule("string", b.seq({b.literal("\""), b.repeat(str_.character, 0, -1), b.literal("\"")}));
  }

  Expr compile(const J& s, const std::string& path) {
    if (++depth_ > kMaxNesting) fail(path, "the schema is nested too deeply");
    Expr e = compile_inner(s, path);
    --depth_;
    return e;
  }

  Expr any_value() {
    if (value_.valid()) return value_;
    value_ = b_.declare("value");
    const Expr member = b_.seq({string_, ws_, b_.literal(":"), ws_, value_, ws_});
    const Expr item = b_.seq({value_, ws_});
    b_.define(value_, b_.alt({container("{", rule("member", member), "}", 0, -1), container("[", rule("item", item), "]", 0, -1),
                              string_, json_number(b_, std::nullopt, false, std::nullopt, false),
                              b_.literal("true"), b_.literal("false"), b_.literal("null")}));
    return value_;
  }

  Expr any_object() {
    const Expr member = b_.seq({string_, ws_, b_.literal(":"), ws_, any_value(), ws_});
    return container("{", rule("member", member), "}", 0, -1);
  }

 private:
  [[noreturn]] static void fail(const std::string& path, const std::string& why) {
    throw Error("json schema at " + path + ": " + why);
  }

  Expr rule(const std::string& name, Expr body) {
    const Expr r = b_.declare(name);
    b_.define(r, body);
    return r;
  }

  // open ws [item ("," ws item){min-1, max-1}] close, where `item` carries its own trailing ws.
  Expr container(const char* open, Expr item, const char* close, int min, int max) {
    if (max == 0) return b_.seq({b_.literal(open), ws_, b_.literal(close)});
    const Expr more = b_.seq({b_.literal(","), ws_, item});
    const Expr list = b_.seq({item, b_.repeat(more, std::max(min, 1) - 1, max == -1 ? -1 : max - 1)});
    return b_.seq({b_.literal(open), ws_, min == 0 ? b_.optional(list) : list, b_.literal(close)});
  }

  static int count(const J& s, const char* key, int fallback, const std::string& path) {
    if (!s.contains(key)) return fallback;
    const J& v = s[key];
    if (!v.is_number() || v.get<double>() < 0 || std::floor(v.get<double>()) != v.get<double>()) {
      fail(path, std::string("'") + key + "' must be a non-negative integer");
    }
    if (v.get<double>() > kMaxLength) fail(path, std::string("'") + key + "' over " + std::to_string(kMaxLength) + " is not supported");
    return int(v.get<double>());
  }

  static std::string literal_of(const J& v, const std::string& path) {
    try {
      return v.dump();
    } catch (const std::exception& e) {
      fail(path, std::string("a value cannot be written as JSON: ") + e.what());
    }
  }

  void check_keywords(const J& s, const std::string& path) {
    for (auto it = s.begin(); it != s.end(); ++it) {
      const std::string& k = it.key();
      if (is_annotation(k)) continue;
      if (!kHandled.count(k)) {
        fail(path, "keyword '" + k + "' is not supported (it restricts which values are valid, and ignoring it "
                   "could produce output that fails validation)");
      }
    }
    if (s.contains("uniqueItems") && s["uniqueItems"] != false) {
      fail(path, "keyword 'uniqueItems' is not supported: a grammar cannot compare array items with each other");
    }
  }

  // Keywords next to `self` that restrict values (annotations and `self` do not).
  static std::string restricting_sibling(const J& s, const std::set<std::string>& self) {
    for (auto it = s.begin(); it != s.end(); ++it) {
      if (!is_annotation(it.key()) && !self.count(it.key())) return it.key();
    }
    return "";
  }

  Expr compile_inner(const J& s, const std::string& path) {
    if (s.is_boolean()) {
      if (s.get<bool>()) return any_value();
      fail(path, "the schema 'false' matches no value");
    }
    if (!s.is_object()) fail(path, "a schema must be an object or a boolean");
    check_keywords(s, path);
    for (const char* combinator : {"$ref", "anyOf", "oneOf", "allOf"}) {
      if (!s.contains(combinator)) continue;
      std::set<std::string> self = {combinator};
      if (s.contains("nullable")) self.insert("nullable");
      const std::string other = restricting_sibling(s, self);
      if (!other.empty()) {
        fail(path, std::string("'") + combinator + "' together with '" + other +
                   "' is not supported; move the keyword inside the subschemas");
      }
    }
    if (s.value("nullable", false)) {
      J rest = s;
      rest.erase("nullable");
      return b_.alt({b_.literal("null"), compile(rest, path)});
    }
    if (s.contains("$ref")) {
      if (!s["$ref"].is_string()) fail(path, "'$ref' must be a string");
      return ref(s["$ref"].get<std::string>(), path);
    }
    for (const char* key : {"anyOf", "oneOf", "allOf"}) {
      if (!s.contains(key)) continue;
      const J& list = s[key];
      if (!list.is_array() || list.empty()) fail(path, std::string("'") + key + "' must be a non-empty array");
      // allOf would need the intersection of languages: only the one-schema form (pydantic's
      // wrapper around a $ref) is the schema itself.
      if (std::string(key) == "allOf" && list.size() != 1) fail(path, "'allOf' with more than one schema is not supported");
      std::vector<Expr> options;
      // oneOf as alternatives: exact when the branches are disjoint, as in tagged unions.
      for (size_t i = 0; i < list.size(); ++i) options.push_back(compile(list[i], path + "/" + key + "/" + std::to_string(i)));
      return b_.alt(options);
    }
    std::vector<std::string> types;
    if (s.contains("type")) {
      const J& t = s["type"];
      if (t.is_string()) {
        types.push_back(t.get<std::string>());
      } else if (t.is_array() && !t.empty()) {
        for (const J& x : t) {
          if (!x.is_string()) fail(path, "'type' must be a string or an array of strings");
          types.push_back(x.get<std::string>());
        }
      } else {
        fail(path, "'type' must be a string or an array of strings");
      }
    }
    if (s.contains("enum") || s.contains("const")) return enumeration(s, types, path);
    if (types.empty()) types = inferred_types(s);
    if (types.empty()) return any_value();
    std::vector<Expr> options;
    for (const std::string& t : types) options.push_back(typed(t, s, path));
    return b_.alt(options);
  }

  // No "type": the value's type from the keywords that only apply to one type (a schema with
  // "properties" describes objects). Keeping to those types is narrower, never invalid.
  static std::vector<std::string> inferred_types(const J& s) {
    std::vector<std::string> t;
    auto any = [&](std::initializer_list<const char*> keys) {
      for (const char* k : keys) if (s.contains(k)) return true;
      return false;
    };
    if (any({"properties", "required", "additionalProperties", "unevaluatedProperties"})) t.push_back("object");
    if (any({"items", "prefixItems", "additionalItems", "minItems", "maxItems"})) t.push_back("array");
    if (any({"minLength", "maxLength", "pattern", "format"})) t.push_back("string");
    if (any({"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"})) t.push_back("number");
    return t;
  }

  Expr enumeration(const J& s, const std::vector<std::string>& types, const std::string& path) {
    std::vector<J> values;
    if (s.contains("const")) values.push_back(s["const"]);
    if (s.contains("enum")) {
      if (!s["enum"].is_array() || s["enum"].empty()) fail(path, "'enum' must be a non-empty array");
      for (const J& v : s["enum"]) {
        if (!s.contains("const") || v == s["const"]) values.push_back(v);
      }
    }
    std::vector<Expr> options;
    for (const J& v : values) {
      bool ok = types.empty();
      for (const std::string& t : types) ok |= matches_type(v, t);
      if (ok) options.push_back(b_.literal(literal_of(v, path)));
    }
    if (options.empty()) fail(path, "no value of 'enum'/'const' satisfies the schema's 'type'");
    return b_.alt(options);
  }

  Expr typed(const std::string& t, const J& s, const std::string& path) {
    if (t == "null") return b_.literal("null");
    if (t == "boolean") return b_.alt({b_.literal("true"), b_.literal("false")});
    if (t == "string") return string_schema(s, path);
    if (t == "integer") return integer_schema(s, path);
    if (t == "number") return number_schema(s, path);
    if (t == "object") return object_schema(s, path);
    if (t == "array") return array_schema(s, path);
    fail(path, "unknown type '" + t + "'");
  }

  Expr string_schema(const J& s, const std::string& path) {
    std::string pattern;
    if (s.contains("format") && s["format"].is_string()) {
      auto it = kFormatPatterns.find(s["format"].get<std::string>());
      if (it != kFormatPatterns.end()) pattern = it->second;
    }
    if (s.contains("pattern")) {
      if (!s["pattern"].is_string()) fail(path, "'pattern' must be a string");
      if (!pattern.empty()) fail(path, "'pattern' together with format '" + s["format"].get<std::string>() + "' is not supported");
      pattern = s["pattern"].get<std::string>();
    }
    const int min = count(s, "minLength", 0, path), max = count(s, "maxLength", -1, path);
    if (max != -1 && max < min) fail(path, "'maxLength' is below 'minLength'");
    Expr content;
    if (!pattern.empty()) {
      // The intersection of a regex with length bounds is not built: refuse rather than drop one.
      if (s.contains("minLength") || s.contains("maxLength")) {
        fail(path, "'pattern' (or format) together with 'minLength'/'maxLength' is not supported");
      }
      try {
        content = json_string_pattern(b_, str_, pattern);
      } catch (const Error& e) {
        fail(path, e.what());
      }
    } else {
      if (min == 0 && max == -1) return string_;
      content = b_.repeat(str_.character, min, max);
    }
    return b_.seq({b_.literal("\""), content, b_.literal("\"")});
  }

  struct Bounds {
    std::optional<double> lo, hi;
    bool lo_excl = false, hi_excl = false;
  };

  static Bounds bounds(const J& s, const std::string& path) {
    Bounds r;
    auto num = [&](const char* k) {
      if (!s[k].is_number()) fail(path, std::string("'") + k + "' must be a number");
      return s[k].get<double>();
    };
    if (s.contains("minimum")) r.lo = num("minimum");
    if (s.contains("maximum")) r.hi = num("maximum");
    if (s.contains("exclusiveMinimum")) {
      if (s["exclusiveMinimum"].is_boolean()) {  // draft 4: a flag on "minimum"
        r.lo_excl = s["exclusiveMinimum"].get<bool>() && r.lo;
      } else if (double x = num("exclusiveMinimum"); !r.lo || x >= *r.lo) {
        r.lo = x, r.lo_excl = true;
      }
    }
    if (s.contains("exclusiveMaximum")) {
      if (s["exclusiveMaximum"].is_boolean()) {
        r.hi_excl = s["exclusiveMaximum"].get<bool>() && r.hi;
      } else if (double x = num("exclusiveMaximum"); !r.hi || x <= *r.hi) {
        r.hi = x, r.hi_excl = true;
      }
    }
    return r;
  }

  Expr integer_schema(const J& s, const std::string& path) {
    const Bounds r = bounds(s, path);
    auto clamp = [](double x) { return x > 9.2e18 ? int64_t(9.2e18) : x < -9.2e18 ? int64_t(-9.2e18) : int64_t(x); };
    std::optional<int64_t> lo, hi;
    if (r.lo) lo = clamp(r.lo_excl ? std::floor(*r.lo) + 1 : std::ceil(*r.lo));
    if (r.hi) hi = clamp(r.hi_excl ? std::ceil(*r.hi) - 1 : std::floor(*r.hi));
    try {
      return json_integer(b_, lo, hi);
    } catch (const Error& e) {
      fail(path, e.what());
    }
  }

  Expr number_schema(const J& s, const std::string& path) {
    const Bounds r = bounds(s, path);
    try {
      return json_number(b_, r.lo, r.lo_excl, r.hi, r.hi_excl);
    } catch (const Error& e) {
      fail(path, e.what());
    }
  }

  Expr object_schema(const J& s, const std::string& path) {
    const J empty = J::object();
    const J& props = s.contains("properties") ? s["properties"] : empty;
    if (!props.is_object()) fail(path, "'properties' must be an object");
    std::set<std::string> required;
    if (s.contains("required")) {
      if (!s["required"].is_array()) fail(path, "'required' must be an array of strings");
      for (const J& k : s["required"]) {
        if (!k.is_string()) fail(path, "'required' must be an array of strings");
        if (!props.contains(k.get<std::string>())) {
          fail(path, "required property '" + k.get<std::string>() + "' is not declared in 'properties'");
        }
        required.insert(k.get<std::string>());
      }
    }
    const char* extra_key = s.contains("additionalProperties") ? "additionalProperties"
                          : s.contains("unevaluatedProperties") ? "unevaluatedProperties" : nullptr;
    if (props.empty()) {
      if (extra_key && s[extra_key] == false) return b_.seq({b_.literal("{"), ws_, b_.literal("}")});
      const Expr value = extra_key ? compile(s[extra_key], path + "/" + extra_key) : any_value();
      const Expr member = b_.seq({string_, ws_, b_.literal(":"), ws_, value, ws_});
      return container("{", rule("member", member), "}", 0, -1);
    }
    // Declared properties only, in order. head[i]: properties i.. when none was written yet;
    // tail[i]: the same after one was (so each is preceded by a comma). Both are rules, so
    // no property's grammar is copied.
    std::vector<std::pair<std::string, Expr>> members;
    for (auto it = props.begin(); it != props.end(); ++it) {
      const Expr value = compile(it.value(), path + "/properties/" + it.key());
      const Expr member = b_.seq({b_.literal(literal_of(J(it.key()), path)), ws_, b_.literal(":"), ws_, value, ws_});
      members.emplace_back(it.key(), rule("property " + it.key(), member));
    }
    const size_t n = members.size();
    Expr head = b_.empty(), tail = b_.empty();
    for (size_t i = n; i-- > 0;) {
      const bool req = required.count(members[i].first) > 0;
      const Expr with = b_.seq({b_.literal(","), ws_, members[i].second, tail});
      const Expr first = b_.seq({members[i].second, tail});
      const Expr new_tail = req ? with : b_.alt({with, tail});
      head = rule("head", req ? first : b_.alt({first, head}));
      tail = rule("tail", new_tail);
    }
    return b_.seq({b_.literal("{"), ws_, head, b_.literal("}")});
  }

  Expr array_schema(const J& s, const std::string& path) {
    const int min = count(s, "minItems", 0, path), max = count(s, "maxItems", -1, path);
    if (max != -1 && max < min) fail(path, "'maxItems' is below 'minItems'");
    const J* tuple = nullptr;
    const char* extra_key = "items";
    std::string tuple_key;
    if (s.contains("prefixItems")) {
      tuple = &s["prefixItems"], tuple_key = "prefixItems";
    } else if (s.contains("items") && s["items"].is_array()) {
      tuple = &s["items"], tuple_key = "items", extra_key = "additionalItems";
    }
    auto item_of = [&](const J& schema, const std::string& where) {
      return rule("item", b_.seq({compile(schema, where), ws_}));
    };
    if (tuple && !tuple->is_array()) fail(path, "'" + tuple_key + "' must be an array");
    const bool extra_allowed = !(s.contains(extra_key) && s[extra_key] == false);
    const std::string extra_path = path + "/" + extra_key;
    if (!tuple || tuple->empty()) {
      if (!extra_allowed) {
        if (min > 0) fail(path, "'minItems' asks for items that the schema forbids");
        return container("[", b_.empty(), "]", 0, 0);
      }
      const Expr item = s.contains(extra_key) ? item_of(s[extra_key], extra_path) : rule("item", b_.seq({any_value(), ws_}));
      return container("[", item, "]", min, max);
    }
    // A tuple: every listed item, then extra items if allowed and wanted.
    const int n = int(tuple->size());
    if (max != -1 && max < n) fail(path, "'maxItems' is below the number of '" + tuple_key + "'");
    if (!extra_allowed && min > n) fail(path, "'minItems' asks for more items than '" + tuple_key + "' allows");
    std::vector<Expr> parts = {b_.literal("["), ws_};
    for (int i = 0; i < n; ++i) {
      if (i) parts.insert(parts.end(), {b_.literal(","), ws_});
      parts.push_back(item_of((*tuple)[size_t(i)], path + "/" + tuple_key + "/" + std::to_string(i)));
    }
    if (extra_allowed && (max == -1 || max > n)) {
      const Expr extra = s.contains(extra_key) ? item_of(s[extra_key], extra_path) : rule("item", b_.seq({any_value(), ws_}));
      parts.push_back(b_.repeat(b_.seq({b_.literal(","), ws_, extra}), std::max(0, min - n), max == -1 ? -1 : max - n));
    }
    parts.push_back(b_.literal("]"));
    return b_.seq(parts);
  }

  Expr ref(const std::string& pointer, const std::string& path) {
    auto it = refs_.find(pointer);
    if (it != refs_.end()) return it->second;
    if (pointer.empty() || pointer[0] != '#') {
      fail(path, "'$ref' \"" + pointer + "\" is not supported: only local references (#/$defs/...) are");
    }
    const J* target = nullptr;
    try {
      target = &root_.at(J::json_pointer(pointer.substr(1)));
    } catch (const std::exception&) {
      fail(path, "'$ref' \"" + pointer + "\" does not point into this schema");
    }
    // Declared first, defined after: a schema that refers to itself finds the rule here.
    const Expr r = b_.declare("ref " + pointer);
    refs_.emplace(pointer, r);
    const int saved = depth_;
    depth_ = 0;  // a reference starts a fresh nesting count
    b_.define(r, compile(*target, pointer));
    depth_ = saved;
    return r;
  }

  GrammarBuilder& b_;
  const J& root_;
  JsonStringPieces str_;
  Expr ws_, string_, value_;
  std::map<std::string, Expr> refs_;
  int depth_ = 0;
};

}  // namespace

Expr json_schema(GrammarBuilder& b, const J& schema, const JsonGrammarOptions& options) {
  try {
    SchemaCompiler c(b, schema, options);
    return c.compile(schema, "#");
  } catch (const nlohmann::json::exception& e) {  // a keyword with a value of the wrong kind
    throw Error(std::string("json schema: ") + e.what());
  }
}

Expr json_schema(GrammarBuilder& b, const nlohmann::json& schema, const JsonGrammarOptions& options) {
  J ordered;
  try {
    ordered = J::parse(schema.dump());  // nlohmann::json has already sorted the keys
  } catch (const nlohmann::json::exception& e) {
    throw Error(std::string("json schema: ") + e.what());
  }
  return json_schema(b, ordered, options);
}

Expr json_object(GrammarBuilder& b, const JsonGrammarOptions& options) {
  return SchemaCompiler(b, J::object(), options).any_object();
}

Expr json_value(GrammarBuilder& b, const JsonGrammarOptions& options) {
  return SchemaCompiler(b, J::object(), options).any_value();
}

std::shared_ptr<const Grammar> json_schema_grammar(const J& schema, const JsonGrammarOptions& options) {
  GrammarBuilder b;
  return b.build(json_schema(b, schema, options));
}

}  // namespace dflash
