// Templates that crashed or hung the process: each must now fail quickly with a dflash::Error
// that names the limit it hit, while ordinary templates still render.
#include <gtest/gtest.h>

#include <string>

#include "template_test_helpers.h"

namespace dflash {
namespace {

using test::error_of;
using test::json;
using test::render;

std::string repeat(const std::string& s, int n) {
  std::string out;
  for (int i = 0; i < n; ++i) out += s;
  return out;
}

// `head`, then `n` times `link`, then `tail`: a chain the parser nests one level per link.
std::string chain(const std::string& head, const std::string& link, int n, const std::string& tail = "") {
  return "{{ " + head + repeat(link, n) + tail + " }}";
}

void expect_too_deep(const std::string& src, const std::string& what) {
  std::string err = error_of(src);
  EXPECT_NE(err.find("line 1"), std::string::npos) << what << ": " << err;
  EXPECT_NE(err.find("limit of 256 levels"), std::string::npos) << what << ": " << err;
}

TEST(ChatLimits, LongOperatorChainsAreRefusedWhileParsing) {
  const int n = 50000;
  expect_too_deep(chain("1", " + 1", n), "+");
  expect_too_deep(chain("1", " * 1", n), "*");
  expect_too_deep(chain("1", " ** 1", n), "**");
  expect_too_deep(chain("x", " and x", n), "and");
  expect_too_deep(chain("x", " or x", n), "or");
  expect_too_deep(chain("x", ".attr", n), ".attr");
  expect_too_deep(chain("x", "[0]", n), "[0]");
  expect_too_deep(chain("f", "()", n), "calls");
  expect_too_deep(chain("x", "|string", 30000), "|string");
  expect_too_deep(chain("1", " if x else 1", n), "if-else");
  expect_too_deep(chain("", "not ", n, "x"), "not");
  expect_too_deep(chain("", "- ", n, "1"), "unary minus");
  expect_too_deep("{% filter " + repeat("upper|", n) + "upper %}x{% endfilter %}", "filter block");
}

TEST(ChatLimits, DeepNestingIsRefusedWhileParsing) {
  const int n = 50000;
  expect_too_deep(chain(repeat("(", n), "", 0, "1" + repeat(")", n)), "parentheses");
  expect_too_deep(chain(repeat("[", n), "", 0, repeat("]", n)), "brackets");
  expect_too_deep(chain(repeat("{'a': ", n), "", 0, "1" + repeat("}", n)), "dicts");
  expect_too_deep(chain(repeat("f(", n), "", 0, repeat(")", n)), "call arguments");
  expect_too_deep(repeat("{% if x %}", n) + repeat("{% endif %}", n), "if blocks");
  expect_too_deep(repeat("{% for x in y %}", n) + repeat("{% endfor %}", n), "for blocks");
  // The error names the line where the limit was crossed.
  std::string err = error_of("\n\n{{ 1" + repeat(" + 1", 300) + " }}");
  EXPECT_NE(err.find("line 3"), std::string::npos) << err;
}

TEST(ChatLimits, LongFlatSequencesAndModerateNestingStillRender) {
  const int n = 50000;
  // ~ and comparison chains are flat lists of operands, not nested.
  EXPECT_EQ(render(chain("'a'", " ~ 'a'", n - 1)), std::string(n, 'a'));
  EXPECT_EQ(render(chain("1", " < 2", n)), "False");
  EXPECT_EQ(render("{{ [" + repeat("1, ", n) + "1]|length }}"), std::to_string(n + 1));
  EXPECT_EQ(render(repeat("{% if true %}a{% endif %}", n)), std::string(n, 'a'));
  EXPECT_EQ(render(chain("0", " + 1", 200)), "200");
  EXPECT_EQ(render(chain(repeat("(", 60), "", 0, "7" + repeat(")", 60))), "7");
  EXPECT_EQ(render(repeat("{% if true %}", 100) + "x" + repeat("{% endif %}", 100)), "x");
}

}  // namespace
}  // namespace dflash
