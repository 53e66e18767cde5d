#include <gtest/gtest.h>

#include "chat/jinja_lexer.h"
#include "util/error.h"

namespace dflash::jinja {
namespace {

std::string data_of(const std::string& src) {
  std::string out;
  for (const auto& t : lex(src))
    if (t.type == Tok::Data) out += t.value;
  return out;
}

std::vector<Tok> types(const std::string& src) {
  std::vector<Tok> out;
  for (const auto& t : lex(src)) out.push_back(t.type);
  return out;
}

TEST(JinjaLexer, SplitsDataAndTags) {
  auto toks = lex("a{{ x }}b{% if y %}c{% endif %}");
  std::vector<Tok> want = {Tok::Data, Tok::VarBegin, Tok::Name, Tok::VarEnd, Tok::Data,
                           Tok::BlockBegin, Tok::Name, Tok::Name, Tok::BlockEnd, Tok::Data,
                           Tok::BlockBegin, Tok::Name, Tok::BlockEnd, Tok::Eof};
  ASSERT_EQ(types("a{{ x }}b{% if y %}c{% endif %}"), want);
  EXPECT_EQ(toks[0].value, "a");
  EXPECT_EQ(toks[2].value, "x");
}

TEST(JinjaLexer, TrimBlocksDropsOneNewlineAfterBlockTags) {
  EXPECT_EQ(data_of("{% if x %}\nA\n{% endif %}\n\nB"), "A\n\nB");
  // Print tags keep the newline that follows them.
  EXPECT_EQ(data_of("{{ x }}\nA"), "\nA");
  // So do tags closed with +%}.
  EXPECT_EQ(data_of("{% if x +%}\nA"), "\nA");
}

TEST(JinjaLexer, LstripBlocksRemovesIndentBeforeBlockTagsOnly) {
  EXPECT_EQ(data_of("A\n    {% if x %}B"), "A\nB");
  EXPECT_EQ(data_of("A\n    {{ x }}B"), "A\n    B");
  EXPECT_EQ(data_of("A\n  x {% if x %}B"), "A\n  x B");
  EXPECT_EQ(data_of("A\n    {%+ if x %}B"), "A\n    B");
  EXPECT_EQ(data_of("   {% if x %}"), "");  // the start of the template counts as a line start
}

TEST(JinjaLexer, MinusMarkersStripAllAdjacentWhitespace) {
  EXPECT_EQ(data_of("A \n\t {%- if x -%} \n\n B"), "AB");
  EXPECT_EQ(data_of("A \n {{- x -}} \n B"), "AB");
  EXPECT_EQ(data_of("A \n {#- c -#} \n B"), "AB");
}

TEST(JinjaLexer, CommentsAreDroppedAndTrimmed) {
  EXPECT_EQ(data_of("A{# comment {{ x }} #}\nB"), "AB");
  EXPECT_EQ(data_of("A\n  {# c #}\nB"), "A\nB");
}

TEST(JinjaLexer, NormalisesNewlinesAndDropsOneTrailingNewline) {
  EXPECT_EQ(data_of("a\r\nb\rc\n"), "a\nb\nc");
  EXPECT_EQ(data_of("a\n\n"), "a\n");
}

TEST(JinjaLexer, RawBlocksKeepTheirText) {
  EXPECT_EQ(data_of("{% raw %}{{ x }}{% endraw %}"), "{{ x }}");
}

TEST(JinjaLexer, LiteralsAndOperators) {
  auto toks = lex("{{ 'a\\n\\u00e9' 12 0x1F 1_000 2.5e3 // ** != }}");
  ASSERT_GE(toks.size(), 10u);
  EXPECT_EQ(toks[1].type, Tok::String);
  EXPECT_EQ(toks[1].value, "a\n\xc3\xa9");
  EXPECT_EQ(toks[2].int_value, 12);
  EXPECT_EQ(toks[3].int_value, 31);
  EXPECT_EQ(toks[4].int_value, 1000);
  EXPECT_EQ(toks[5].type, Tok::Float);
  EXPECT_DOUBLE_EQ(toks[5].float_value, 2500.0);
  EXPECT_EQ(toks[6].value, "//");
  EXPECT_EQ(toks[7].value, "**");
  EXPECT_EQ(toks[8].value, "!=");
}

TEST(JinjaLexer, CountsLines) {
  auto toks = lex("a\nb\n{{ x }}\n{% if\n y %}");
  int name_line = 0, y_line = 0;
  for (const auto& t : toks) {
    if (t.type == Tok::Name && t.value == "x") name_line = t.line;
    if (t.type == Tok::Name && t.value == "y") y_line = t.line;
  }
  EXPECT_EQ(name_line, 3);
  EXPECT_EQ(y_line, 5);
}

TEST(JinjaLexer, ErrorsNameTheLine) {
  try {
    lex("ok\n{{ 1 ! 2 }}");
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("line 2"), std::string::npos) << e.what();
  }
  EXPECT_THROW(lex("{{ (1 ] }}"), Error);
  EXPECT_THROW(lex("{# never closed"), Error);
}

}  // namespace
}  // namespace dflash::jinja
