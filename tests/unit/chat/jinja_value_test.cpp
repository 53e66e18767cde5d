#include <gtest/gtest.h>

#include "chat/jinja_value.h"

namespace dflash::jinja {
namespace {

TEST(JinjaValue, FloatReprMatchesPython) {
  EXPECT_EQ(float_repr(1.0), "1.0");
  EXPECT_EQ(float_repr(0.1 + 0.2), "0.30000000000000004");
  EXPECT_EQ(float_repr(1e16), "1e+16");
  EXPECT_EQ(float_repr(1e15), "1000000000000000.0");
  EXPECT_EQ(float_repr(0.0001), "0.0001");
  EXPECT_EQ(float_repr(0.00001), "1e-05");
  EXPECT_EQ(float_repr(-2.5e-7), "-2.5e-07");
  EXPECT_EQ(float_repr(123.456), "123.456");
  EXPECT_EQ(float_repr(-0.0), "-0.0");
}

TEST(JinjaValue, StrAndReprFollowPython) {
  EXPECT_EQ(to_str(Value()), "");
  EXPECT_EQ(to_str(Value(nullptr)), "None");
  EXPECT_EQ(to_str(Value(true)), "True");
  EXPECT_EQ(to_str(Value(int64_t{-3})), "-3");
  Value list = Value::make_list({Value("it's"), Value(1), Value(nullptr), Value(2.0)});
  EXPECT_EQ(to_str(list), "[\"it's\", 1, None, 2.0]");
  EXPECT_EQ(to_str(Value::make_tuple({Value(1)})), "(1,)");
  EXPECT_EQ(repr_string("a'b\"c\n\x01"), "'a\\'b\"c\\n\\x01'");
  EXPECT_EQ(repr_string("\xc3\xa9\xe2\x80\x8b"), "'\xc3\xa9\\u200b'");  // é kept, zero-width space escaped
}

TEST(JinjaValue, TruthinessAndEquality) {
  EXPECT_FALSE(truthy(Value()));
  EXPECT_FALSE(truthy(Value("")));
  EXPECT_FALSE(truthy(Value::make_list()));
  EXPECT_TRUE(truthy(Value::make_list({}, ListKind::Generator)));  // generators are always true
  EXPECT_TRUE(py_equal(Value(1), Value(1.0)));
  EXPECT_TRUE(py_equal(Value(true), Value(1)));
  EXPECT_FALSE(py_equal(Value("1"), Value(1)));
  EXPECT_FALSE(py_equal(Value::make_list({Value(1)}), Value::make_tuple({Value(1)})));
  EXPECT_TRUE(py_less(Value("a"), Value("b")));
  EXPECT_THROW(py_less(Value(1), Value("a")), Error);
}

TEST(JinjaValue, JsonKeepsInsertionOrderAndPythonSeparators) {
  auto j = nlohmann::ordered_json::parse(R"({"b": 1, "a": [true, null, 1.5, "\u00e9\n"], "c": {}})");
  Value v = from_json(j);
  JsonOptions opt;
  EXPECT_EQ(to_json(v, opt), "{\"b\": 1, \"a\": [true, null, 1.5, \"\xc3\xa9\\n\"], \"c\": {}}");
  opt.indent = "  ";
  opt.item_sep = ",";
  EXPECT_EQ(to_json(Value::make_list({Value(1), Value::make_list()}), opt), "[\n  1,\n  []\n]");
  JsonOptions ascii;
  ascii.ensure_ascii = true;
  EXPECT_EQ(to_json(Value("\xc3\xa9\xf0\x9f\x98\x80"), ascii), "\"\\u00e9\\ud83d\\ude00\"");
  EXPECT_THROW(to_json(Value(), opt), Error);
}

TEST(JinjaValue, LenAndIterationCountCodePoints) {
  EXPECT_EQ(py_len(Value("h\xc3\xa9llo")), 5);
  EXPECT_EQ(iterate(Value("h\xc3\xa9")).size(), 2u);
  Value gen = Value::make_list({Value(1), Value(2)}, ListKind::Generator);
  EXPECT_EQ(iterate(gen).size(), 2u);
  EXPECT_EQ(iterate(gen).size(), 0u);  // a generator runs once
  EXPECT_THROW(py_len(gen), Error);
}

}  // namespace
}  // namespace dflash::jinja
