// JSON Schema -> grammar: valid instances accepted (in several whitespace styles), invalid ones
// rejected, unsupported keywords refused by name.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "decoding/grammar/grammar_matcher.h"
#include "decoding/grammar/json_schema_grammar.h"
#include "util/error.h"

namespace {

using dflash::GrammarBuilder;
using dflash::GrammarMatcher;
using J = nlohmann::ordered_json;

std::shared_ptr<const dflash::Grammar> compile(const std::string& schema) {
  return dflash::json_schema_grammar(J::parse(schema));
}

bool accepts(const std::shared_ptr<const dflash::Grammar>& g, const std::string& text) {
  GrammarMatcher m(g);
  return m.accept_bytes(text) && m.can_end();
}

// Every accepted text must also be JSON: the grammar never allows what a parser rejects.
void expect_valid(const std::string& schema, const std::vector<std::string>& good, const std::vector<std::string>& bad) {
  auto g = compile(schema);
  for (const std::string& s : good) {
    EXPECT_TRUE(accepts(g, s)) << "schema " << schema << "\nshould accept: " << s;
    J parsed;
    EXPECT_NO_THROW(parsed = J::parse(s)) << s;
  }
  for (const std::string& s : bad) EXPECT_FALSE(accepts(g, s)) << "schema " << schema << "\nshould reject: " << s;
}

void expect_refused(const std::string& schema, const std::string& keyword) {
  try {
    compile(schema);
    ADD_FAILURE() << "accepted: " << schema;
  } catch (const dflash::Error& e) {
    EXPECT_NE(std::string(e.what()).find(keyword), std::string::npos) << e.what();
  }
}

TEST(GrammarJsonSchema, ObjectRequiredOptionalNoExtraKeys) {
  expect_valid(R"({"type": "object", "properties": {"name": {"type": "string"}, "age": {"type": "integer"},
                   "email": {"type": "string"}}, "required": ["name", "age"], "additionalProperties": false})",
               {R"({"name":"Bo","age":3})", R"({"name": "Bo", "age": 3, "email": "b@x.org"})",
                "{\n  \"name\": \"Bo\",\n  \"age\": 3\n}", "{\n    \"name\" : \"Bo\" ,\n    \"age\" : -7\n}",
                "{\"name\":\"\",\"age\":0,\"email\":\"\"}"},
               {R"({"age":3})", R"({"name":"Bo"})", R"({"name":1,"age":3})", R"({"name":"Bo","age":3,"x":1})",
                R"({"name":"Bo","age":3,})", R"({"name":"Bo","age":3.5})", R"({"name":"Bo","age":"3"})", "{}",
                R"({"name":"Bo","age":3} )", R"( {"name":"Bo","age":3})"});
}

TEST(GrammarJsonSchema, ObjectAllOptionalAndEmpty) {
  expect_valid(R"({"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "boolean"}}})",
               {"{}", "{ }", R"({"a":1})", R"({"b":true})", R"({"a": 1, "b": false})"},
               {R"({,"b":true})", R"({"a":1,})", R"({"c":1})", R"({"b":true,"a":1})"});
  expect_valid(R"({"type": "object", "additionalProperties": false})", {"{}", "{\n}"}, {R"({"a":1})"});
}

TEST(GrammarJsonSchema, MapFromAdditionalProperties) {
  expect_valid(R"({"type": "object", "additionalProperties": {"type": "integer"}})",
               {"{}", R"({"a":1,"b":-2})", R"({"x y": 10})"}, {R"({"a":"x"})", R"({"a":1,})", "[]"});
}

TEST(GrammarJsonSchema, EnumAndConst) {
  expect_valid(R"({"type": "string", "enum": ["red", "green", "blue"]})", {R"("red")", R"("blue")"},
               {R"("purple")", R"("re")", "red", "1"});
  expect_valid(R"({"enum": ["a", 1, null, true]})", {R"("a")", "1", "null", "true"}, {"false", "2"});
  expect_valid(R"({"type": "integer", "enum": ["a", 1, 2]})", {"1", "2"}, {R"("a")"});
  expect_valid(R"({"const": {"k": [1, "é"]}})", {R"({"k":[1,"é"]})"}, {R"({"k":[1]})"});
}

TEST(GrammarJsonSchema, ArraysWithBounds) {
  expect_valid(R"({"type": "array", "items": {"type": "integer"}, "minItems": 1, "maxItems": 3})",
               {"[1]", "[1, 2, 3]", "[\n  1,\n  2\n]", "[ 1 ]"}, {"[]", "[1,2,3,4]", "[\"a\"]", "[1,]", "[,1]"});
  expect_valid(R"({"type": "array", "items": {"type": "string"}})", {"[]", R"(["a","b","c","d","e"])"}, {"[1]"});
  expect_valid(R"({"type": "array", "items": false})", {"[]"}, {"[1]"});
  expect_valid(R"({"type": "array", "prefixItems": [{"type": "string"}, {"type": "integer"}], "items": false})",
               {R"(["a", 1])"}, {R"(["a"])", R"(["a", 1, 2])", R"([1, "a"])"});
  expect_valid(R"({"type": "array", "prefixItems": [{"type": "string"}], "items": {"type": "integer"}, "maxItems": 3})",
               {R"(["a"])", R"(["a", 1, 2])"}, {R"(["a", 1, 2, 3])", R"(["a", "b"])"});
}

TEST(GrammarJsonSchema, StringLengthsCountCodePoints) {
  expect_valid(R"({"type": "string", "minLength": 2, "maxLength": 4})",
               {R"("ab")", R"("abcd")", "\"é€😀\"", R"("a\n")", R"("\u00e9\"")"},
               {R"("a")", R"("abcde")", R"("")", "\"é€😀xy\""});
}

TEST(GrammarJsonSchema, StringEscapesAndUtf8) {
  expect_valid(R"({"type": "string"})",
               {R"("")", R"("tab\tquote\"slash\/\\")", R"("\u00E9\u4e2d")", "\"日本語 🤖\"", "\"\x7f\""},
               {"\"a\nb\"", "\"\x01\"", R"("\ud800")", R"("\x")", "\"\xC0\x80\"", "\"\xED\xA0\x80\"",
                "\"\xF4\x90\x80\x80\"", "\"\xE2\x82\"", R"("abc)"});
}

TEST(GrammarJsonSchema, Patterns) {
  expect_valid(R"({"type": "string", "pattern": "^[A-Z]{3}-\\d{2,3}$"})", {R"("ABC-12")", R"("XYZ-123")"},
               {R"("ABC-1234")", R"("abc-12")", R"("ABC12")", R"("xABC-12")"});
  // Unanchored: anything around.
  expect_valid(R"({"type": "string", "pattern": "foo"})", {R"("foo")", R"("a foo b")"}, {R"("fo")", R"("bar")"});
  expect_valid(R"({"type": "string", "pattern": "^(cat|dog)s?$"})", {R"("cat")", R"("dogs")"}, {R"("cow")", R"("cats!")"});
  expect_valid(R"({"type": "string", "pattern": "^[^\"\\s]+$"})", {R"("abc")"}, {R"("a b")", R"("a\"b")", R"("")"});
  expect_valid(R"({"type": "string", "pattern": "^a.c$"})", {R"("abc")", R"("a\"c")", "\"aéc\""}, {R"("a\nc")", R"("ac")"});
  expect_valid(R"({"type": "string", "pattern": "^\\$\\d+(\\.\\d\\d)?$"})", {R"("$5")", R"("$10.50")"}, {R"("$1.5")"});
  expect_refused(R"({"type": "string", "pattern": "^(?=a)b$"})", "lookahead");
  expect_refused(R"({"type": "string", "pattern": "(a)\\1"})", "backreference");
  expect_refused(R"({"type": "string", "pattern": "\\bword"})", "\\b");
  expect_refused(R"({"type": "string", "pattern": "^a$", "maxLength": 3})", "maxLength");
  expect_refused(R"({"type": "string", "pattern": "^(a?)*$"})", "empty string");
  expect_refused(R"({"type": "string", "pattern": "^[a-"})", "unclosed");
  expect_refused(R"({"type": "string", "pattern": "^[é-ü]$"})", "non-ASCII");
}

TEST(GrammarJsonSchema, Formats) {
  expect_valid(R"({"type": "string", "format": "date-time"})", {R"("2024-02-29T13:45:00Z")", R"("2024-01-01T00:00:00.123+02:00")"},
               {R"("2024-13-01T00:00:00Z")", R"("yesterday")"});
  expect_valid(R"({"type": "string", "format": "uuid"})", {R"("123e4567-e89b-12d3-a456-426614174000")"}, {R"("123")"});
  expect_valid(R"({"type": "string", "format": "email"})", {R"("anything")"}, {});  // an annotation
}

TEST(GrammarJsonSchema, IntegerBoundsAreExact) {
  struct Case {
    const char* schema;
    long lo, hi;
  };
  for (const Case& c : {Case{R"({"type": "integer", "minimum": 1, "maximum": 100})", 1, 100},
                        Case{R"({"type": "integer", "minimum": -20, "maximum": -5})", -20, -5},
                        Case{R"({"type": "integer", "exclusiveMinimum": 0, "exclusiveMaximum": 250})", 1, 249},
                        Case{R"({"type": "integer", "minimum": -37, "maximum": 205})", -37, 205},
                        Case{R"({"type": "integer", "minimum": 0})", 0, 1000000},
                        Case{R"({"type": "integer", "minimum": 7, "exclusiveMinimum": true, "maximum": 9.5})", 8, 9}}) {
    auto g = compile(c.schema);
    for (long v = -400; v <= 400; ++v) {
      const bool in = v >= c.lo && v <= c.hi;
      EXPECT_EQ(accepts(g, std::to_string(v)), in) << c.schema << " value " << v;
    }
    EXPECT_FALSE(accepts(g, "1.5")) << c.schema;
    EXPECT_FALSE(accepts(g, "-0")) << c.schema;
    EXPECT_FALSE(accepts(g, "007")) << c.schema;
  }
  expect_refused(R"({"type": "integer", "minimum": 5, "maximum": 4})", "no integer");
  // Ranges over the full 18-digit span stay small (the range splitting is linear in digits).
  EXPECT_LT(compile(R"({"type": "integer", "minimum": 0})")->symbol_count(), 1000u);
  EXPECT_LT(compile(R"({"type": "integer", "minimum": -123456789012345, "maximum": 987654321098765})")->symbol_count(), 5000u);
}

TEST(GrammarJsonSchema, NumberBoundsAreExact) {
  struct Case {
    const char* schema;
    double lo, hi;
    bool lo_excl, hi_excl;
  };
  for (const Case& c : {Case{R"({"type": "number", "minimum": 0, "maximum": 1})", 0, 1, false, false},
                        Case{R"({"type": "number", "exclusiveMinimum": -2, "exclusiveMaximum": 3})", -2, 3, true, true},
                        Case{R"({"type": "number", "minimum": -3, "exclusiveMaximum": -1})", -3, -1, false, true},
                        Case{R"({"type": "number", "exclusiveMinimum": 0})", 0, 1e9, true, false}}) {
    auto g = compile(c.schema);
    for (int q = -20; q <= 20; ++q) {
      for (const char* frac : {"", ".0", ".00", ".25", ".5", ".75", ".05", ".001"}) {
        const double whole = std::abs(q / 4);
        const std::string text = (q < 0 ? "-" : "") + std::to_string(long(whole)) + frac;
        const double v = std::stod(text);
        // "-0", "-0.0": equal to 0 but never produced (the grammar writes zero unsigned).
        const bool negative_zero = text[0] == '-' && v == 0;
        const bool in = !negative_zero && (c.lo_excl ? v > c.lo : v >= c.lo) && (c.hi_excl ? v < c.hi : v <= c.hi);
        EXPECT_EQ(accepts(g, text), in) << c.schema << " value " << text;
      }
    }
  }
  expect_valid(R"({"type": "number"})", {"0", "-1.5", "3e10", "2.5E-3", "1e+2"}, {"01", "1.", ".5", "+1", "1e", "--1"});
  expect_refused(R"({"type": "number", "maximum": 0.5})", "whole number");
}

TEST(GrammarJsonSchema, TypeArraysNullableAnyOf) {
  expect_valid(R"({"type": ["string", "null"]})", {R"("x")", "null"}, {"1", "nul"});
  expect_valid(R"({"type": "integer", "nullable": true})", {"1", "null"}, {R"("1")"});
  expect_valid(R"({"type": "boolean"})", {"true", "false"}, {"True", "1"});
  expect_valid(R"({"anyOf": [{"type": "integer"}, {"type": "object", "properties": {"k": {"type": "boolean"}},
                   "required": ["k"], "additionalProperties": false}]})",
               {"12", R"({"k": true})"}, {R"({"k": 1})", R"("12")", "{}"});
  expect_valid(R"({"oneOf": [{"const": "a"}, {"const": "b"}]})", {R"("a")", R"("b")"}, {R"("c")"});
}

TEST(GrammarJsonSchema, RecursiveRefs) {
  const std::string tree = R"({"$defs": {"node": {"type": "object", "properties": {"value": {"type": "integer"},
      "children": {"type": "array", "items": {"$ref": "#/$defs/node"}}}, "required": ["value", "children"]}},
      "$ref": "#/$defs/node"})";
  expect_valid(tree, {R"({"value": 1, "children": []})", R"({"value":1,"children":[{"value":2,"children":[{"value":3,"children":[]}]}]})"},
               {R"({"value": 1})", R"({"value": 1, "children": [{"value": 2}]})"});
  // draft-07 "definitions", and "#" (the root itself)
  expect_valid(R"({"definitions": {"id": {"type": "integer"}}, "type": "object",
                   "properties": {"id": {"$ref": "#/definitions/id"}, "next": {"anyOf": [{"$ref": "#"}, {"type": "null"}]}},
                   "required": ["id", "next"]})",
               {R"({"id": 1, "next": {"id": 2, "next": null}})"}, {R"({"id": 1, "next": {"id": "2", "next": null}})"});
  expect_refused(R"({"$ref": "https://example.com/schema"})", "only local");
  expect_refused(R"({"$ref": "#/$defs/missing"})", "does not point");
}

TEST(GrammarJsonSchema, AnyValueAndJsonObject) {
  for (const char* schema : {"{}", "true"}) {
    expect_valid(schema, {"1", R"("s")", "null", R"({"a": [1, {"b": null}], "c": -2.5e3})", "[]", "[[[]]]"},
                 {"{", R"({"a" 1})", "[1,]", "nan", "'x'"});
  }
  GrammarBuilder b;
  auto g = b.build(dflash::json_object(b));
  EXPECT_TRUE(accepts(g, R"({"a": {"b": [true]}})"));
  EXPECT_TRUE(accepts(g, "{}"));
  EXPECT_FALSE(accepts(g, "[]"));
  EXPECT_FALSE(accepts(g, "1"));
}

TEST(GrammarJsonSchema, PydanticStyleAnnotations) {
  // pydantic v1's allOf wrapper, titles, defaults, descriptions, an Optional field.
  expect_valid(R"({"title": "Order", "type": "object", "$defs": {"Color": {"title": "Color", "enum": ["red", "blue"], "type": "string"}},
                   "properties": {"color": {"allOf": [{"$ref": "#/$defs/Color"}], "description": "which"},
                                  "note": {"anyOf": [{"type": "string"}, {"type": "null"}], "default": null, "title": "Note"}},
                   "required": ["color"], "x-vendor": 1})",
               {R"({"color": "red"})", R"({"color": "blue", "note": null})", R"({"color": "blue", "note": "hi"})"},
               {R"({"color": "green"})", R"({"note": "hi"})"});
}

TEST(GrammarJsonSchema, WhitespaceIsBounded) {
  auto g = compile(R"({"type": "array", "items": {"type": "integer"}})");
  EXPECT_TRUE(accepts(g, "[\n" + std::string(16, ' ') + "1\n]"));
  EXPECT_TRUE(accepts(g, "[\t1,\t2]"));
  EXPECT_FALSE(accepts(g, "[" + std::string(100, ' ') + "1]"));
  EXPECT_FALSE(accepts(g, "[\n\n\n\n1]"));
  GrammarMatcher m(g);
  EXPECT_FALSE(m.accept_bytes("[" + std::string(200, ' ')));  // a model cannot spin on spaces
}

TEST(GrammarJsonSchema, UnsupportedKeywordsAreNamed) {
  expect_refused(R"({"type": "object", "patternProperties": {"^a": {}}})", "patternProperties");
  expect_refused(R"({"type": "object", "minProperties": 1})", "minProperties");
  expect_refused(R"({"type": "integer", "multipleOf": 5})", "multipleOf");
  expect_refused(R"({"not": {"type": "string"}})", "'not'");
  expect_refused(R"({"if": {}, "then": {}})", "'if'");
  expect_refused(R"({"type": "array", "uniqueItems": true})", "uniqueItems");
  expect_refused(R"({"type": "string", "frobnicate": 1})", "frobnicate");
  expect_refused(R"({"allOf": [{"type": "string"}, {"minLength": 1}]})", "allOf");
  expect_refused(R"({"type": "object", "properties": {"a": {}}, "required": ["b"]})", "'b'");
  expect_refused(R"({"anyOf": [{"type": "string"}], "minLength": 2})", "minLength");
  expect_refused("false", "false");
  expect_refused(R"({"type": "object", "properties": {"deep": {"type": "array", "items": {"type": "strin"}}}})",
                 "#/properties/deep/items");
  EXPECT_NO_THROW(compile(R"({"type": "array", "uniqueItems": false, "items": {"type": "string"}})"));
  // Keyword values of the wrong kind are user errors too, not crashes.
  EXPECT_THROW(compile(R"({"type": "integer", "nullable": "yes"})"), dflash::Error);
  EXPECT_THROW(compile(R"({"type": "string", "minLength": -1})"), dflash::Error);
  EXPECT_THROW(compile(R"({"type": "object", "required": "a"})"), dflash::Error);
  EXPECT_THROW(compile(R"({"type": 5})"), dflash::Error);
  EXPECT_THROW(compile("[1]"), dflash::Error);
}

TEST(GrammarJsonSchema, ComposesIntoAToolCall) {
  GrammarBuilder b;
  auto call = [&](const std::string& name, const J& params) {
    return b.seq({b.literal("<tool_call>\n{\"name\": \"" + name + "\", \"arguments\": "), dflash::json_schema(b, params),
                  b.literal("}\n</tool_call>")});
  };
  auto one = b.alt({call("get_weather", J::parse(R"({"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]})")),
                    call("get_time", J::parse(R"({"type": "object", "properties": {}})"))});
  auto g = b.build(b.seq({one, b.repeat(b.seq({b.literal("\n"), one}), 0, 3)}));
  EXPECT_TRUE(accepts(g, "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\"}}\n</tool_call>"));
  EXPECT_TRUE(accepts(g, "<tool_call>\n{\"name\": \"get_time\", \"arguments\": {}}\n</tool_call>\n"
                         "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Rome\"}}\n</tool_call>"));
  EXPECT_FALSE(accepts(g, "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {}}\n</tool_call>"));
  EXPECT_FALSE(accepts(g, "<tool_call>\n{\"name\": \"get_news\", \"arguments\": {}}\n</tool_call>"));
}

TEST(GrammarJsonSchema, KeepsSchemaPropertyOrder) {
  // ordered_json keeps "zeta" before "alpha"; the grammar follows it.
  expect_valid(R"({"type": "object", "properties": {"zeta": {"type": "integer"}, "alpha": {"type": "integer"}},
                   "required": ["zeta", "alpha"]})",
               {R"({"zeta": 1, "alpha": 2})"}, {R"({"alpha": 2, "zeta": 1})"});
}

}  // namespace
