// Qwen3.5's chat template needs more of Jinja than Qwen3's: macros used as expressions, the loop's
// neighbours, the items/trim/string/safe/tojson filters, the mapping/iterable/string/undefined
// tests, `~`, namespace() written from inside a macro, raise_exception. Each is checked here on
// its own, then the Qwen3.5-style template of tests/oracle (which the oracle test compares with
// jinja2 over a corpus) is checked for the prompts the server depends on.
#include <gtest/gtest.h>

#include "template_test_helpers.h"

namespace dflash {
namespace {

using test::error_of;
using test::json;
using test::render;
using test::source_file;

TEST(Qwen35Features, MacroWithDefaultsReturnsItsOutputAsAString) {
  const std::string m = "{% macro m(x, n=2, flag=false) %} {{ x ~ n }}{% if flag %}!{% endif %} {% endmacro %}";
  EXPECT_EQ(render(m + "[{{ m(1) }}][{{ m(1, 3) }}][{{ m('a', flag=true) }}]"), "[ 12 ][ 13 ][ a2! ]");
  // The result is a string: filters, methods, `in`, `~` and tests apply to it.
  EXPECT_EQ(render(m + "{% set s = m(' x ')|trim %}[{{ s }}]{{ s.startswith('x') }}{{ s is string }}"
                       "{{ 'x2' in m('x') }}{{ (m(1) ~ m(2))|length }}"),
            "[x 2]TrueTrueTrue8");
  EXPECT_NE(error_of("{% macro m(a) %}{% endmacro %}{{ m(1, 2) }}"), "<no error>");
}

TEST(Qwen35Features, MacroUpdatesANamespaceOfTheTemplate) {
  // render_content counts images in an outer namespace while it renders.
  EXPECT_EQ(render("{% set count = namespace(value=0) %}"
                   "{% macro img(counting) %}{% if counting %}{% set count.value = count.value + 1 %}{% endif %}"
                   "Picture {{ count.value }} {% endmacro %}"
                   "{{ img(true) }}{{ img(false) }}{{ img(true) }}= {{ count.value }}"),
            "Picture 1 Picture 1 Picture 2 = 2");
  EXPECT_EQ(render("{% set ns = namespace(multi=true, last=3) %}{% for i in [5, 6] %}{% set ns.last = i %}"
                   "{% set ns.multi = false %}{% endfor %}{{ ns.last }}{{ ns.multi }}"),
            "6False");
}

TEST(Qwen35Features, LoopNeighboursAreUndefinedAtTheEnds) {
  json ctx = {{"ms", {{{"role", "user"}}, {{"role", "tool"}}, {{"role", "tool"}}, {{"role", "assistant"}}}}};
  // How the template groups consecutive tool results into one user turn.
  EXPECT_EQ(render("{% for m in ms %}{% if m.role == 'tool' %}"
                   "{% if loop.previtem and loop.previtem.role != 'tool' %}<{% endif %}t"
                   "{% if not loop.last and loop.nextitem.role != 'tool' %}>{% elif loop.last %}.{% endif %}"
                   "{% else %}{{ m.role[0] }}{% endif %}{% endfor %}",
                   ctx),
            "u<tt>a");
  EXPECT_EQ(render("{% for x in [1, 2] %}{{ loop.previtem is undefined }}{{ loop.nextitem is defined }}"
                   "[{{ loop.previtem }}|{{ loop.nextitem }}]{% endfor %}"),
            "TrueTrue[|2]FalseFalse[1|]");
  EXPECT_NE(error_of("{% for m in ms %}{{ loop.previtem.role }}{% endfor %}", ctx).find("no previous item"),
            std::string::npos);
}

TEST(Qwen35Features, FiltersOfTheToolCallFormat) {
  // One <parameter> per argument: mappings and lists as JSON, the rest through |string.
  json ctx = {{"args", {{"d", {{"k", {1, nullptr}}}}, {"l", {"x", true}}, {"s", "q\"\xc3\xa9"},
                        {"n", nullptr}, {"b", false}, {"f", 1e-7}, {"i", -3}}}};
  EXPECT_EQ(render("{% for k, v in args|items %}{{ k }}="
                   "{{ v|tojson|safe if v is mapping or (v is sequence and v is not string) else v|string }};"
                   "{% endfor %}",
                   ctx),
            "d={\"k\": [1, null]};l=[\"x\", true];s=q\"\xc3\xa9;n=None;b=False;f=1e-07;i=-3;");
  EXPECT_EQ(render("{{ nothing|items|list }}{{ {'a': 1}|items|list }}"), "[][('a', 1)]");
  EXPECT_NE(error_of("{{ 'ab'|items|list }}").find("mapping"), std::string::npos);
  EXPECT_EQ(render("[{{ '\\n  a b \\t'|trim }}][{{ none|trim }}][{{ ('<'|safe) ~ 1 }}][{{ 1 ~ none ~ true }}]"),
            "[a b][None][<1][1NoneTrue]");
}

TEST(Qwen35Features, TestsOfContentKinds) {
  json ctx = {{"s", "x"}, {"l", {1}}, {"d", {{"a", 1}}}, {"n", nullptr}};
  EXPECT_EQ(render("{{ s is string }}{{ l is string }}{{ d is mapping }}{{ l is mapping }}{{ l is iterable }}"
                   "{{ s is iterable }}{{ d is iterable }}{{ n is iterable }}{{ n is undefined }}{{ x is undefined }}",
                   ctx),
            "TrueFalseTrueFalseTrueTrueTrueFalseFalseTrue");
  // enable_thinking must be the boolean false to turn thinking off (`is false` is identity).
  EXPECT_EQ(render("{{ 0 is false }}{{ 'false' is false }}{{ none is false }}{{ false is false }}"),
            "FalseFalseFalseTrue");
}

TEST(Qwen35Features, RaiseExceptionFromAMacro) {
  EXPECT_EQ(error_of("{% macro m(c) %}{% if c is mapping %}{{ raise_exception('Unexpected ' ~ 'content type.') }}"
                     "{% endif %}{% endmacro %}{{ m({'a': 1}) }}"),
            "Unexpected content type.");
}

// The Qwen3.5-style template the oracle test checks against jinja2.
std::string qwen35() { return source_file("tests/oracle/chat_templates/qwen3.5.jinja"); }

json user(const std::string& text) { return {{"role", "user"}, {"content", text}}; }

TEST(Qwen35Template, ThinkingIsOnUnlessEnableThinkingIsFalse) {
  const std::string src = qwen35();
  ASSERT_FALSE(src.empty());
  ChatTemplate t(src);
  json ctx = {{"messages", {user("Hi")}}, {"add_generation_prompt", true}};
  const std::string head = "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n";
  EXPECT_EQ(t.render(ctx), head + "<think>\n");
  ctx["enable_thinking"] = true;
  EXPECT_EQ(t.render(ctx), head + "<think>\n");
  ctx["enable_thinking"] = false;
  EXPECT_EQ(t.render(ctx), head + "<think>\n\n</think>\n\n");
}

TEST(Qwen35Template, ReasoningIsKeptOnlyAfterTheLastUserQuery) {
  ChatTemplate t(qwen35());
  json call = {{"type", "function"}, {"function", {{"name", "get_weather"}, {"arguments", {{"city", "Paris"}}}}}};
  json ctx = {{"messages",
               {user("Q1"),
                {{"role", "assistant"}, {"content", "A1"}, {"reasoning_content", "old thought"}},
                user("Q2"),
                {{"role", "assistant"}, {"content", "<think>\nfresh\n</think>\n\nChecking."}, {"tool_calls", {call}}},
                {{"role", "tool"}, {"content", "sunny"}},
                {{"role", "tool"}, {"content", "21C"}}}},
              {"add_generation_prompt", true}};
  EXPECT_EQ(t.render(ctx),
            "<|im_start|>user\nQ1<|im_end|>\n"
            "<|im_start|>assistant\nA1<|im_end|>\n"
            "<|im_start|>user\nQ2<|im_end|>\n"
            "<|im_start|>assistant\n<think>\nfresh\n</think>\n\nChecking.\n\n"
            "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n</function>\n</tool_call>"
            "<|im_end|>\n"
            "<|im_start|>user\n<tool_response>\nsunny\n</tool_response>\n<tool_response>\n21C\n</tool_response>"
            "<|im_end|>\n"
            "<|im_start|>assistant\n<think>\n");
}

TEST(Qwen35Template, ToolsGoIntoTheSystemTurn) {
  ChatTemplate t(qwen35());
  json tool = {{"type", "function"}, {"function", {{"name", "f"}, {"description", "d\xc3\xa9"}}}};
  json ctx = {{"messages", {{{"role", "system"}, {"content", " Be brief. "}}, user("x")}}, {"tools", {tool}}};
  const std::string out = t.render(ctx);
  EXPECT_EQ(out.rfind("<|im_start|>system\n# Tools\n\nYou have access to the following functions:\n\n<tools>\n"
                      "{\"type\": \"function\", \"function\": {\"name\": \"f\", \"description\": \"d\xc3\xa9\"}}\n</tools>",
                      0),
            0u)
      << out;
  EXPECT_NE(out.find("</IMPORTANT>\n\nBe brief.<|im_end|>\n<|im_start|>user\nx<|im_end|>\n"), std::string::npos) << out;
}

TEST(Qwen35Template, RefusesWhatTheRealOneRefuses) {
  ChatTemplate t(qwen35());
  auto error = [&](const json& messages) {
    try {
      t.render(json{{"messages", messages}});
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("<no error>");
  };
  EXPECT_EQ(error(json::array()), "No messages provided.");
  EXPECT_EQ(error({{{"role", "tool"}, {"content", "r"}}}), "No user query found in messages.");
  EXPECT_EQ(error({user("x"), {{"role", "system"}, {"content", "late"}}}), "System message must be at the beginning.");
  EXPECT_EQ(error({{{"role", "system"}, {"content", {{{"type", "image"}}}}}, user("x")}),
            "System message cannot contain images.");
  EXPECT_EQ(error({{{"role", "user"}, {"content", 7}}}), "Unexpected content type.");
  EXPECT_EQ(error({user("x"), {{"role", "critic"}, {"content", "?"}}}), "Unexpected message role.");
}

}  // namespace
}  // namespace dflash
