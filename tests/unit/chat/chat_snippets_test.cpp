// Every snippet the oracle test checks against jinja2 must also parse and render here without
// crashing (errors are fine: many snippets are meant to fail). Run under a sanitizer this
// covers most of the interpreter.
#include <gtest/gtest.h>

#include <fstream>
#include <string>
#include <vector>

#include "chat/chat_template.h"
#include "util/error.h"

namespace dflash {
namespace {

std::vector<std::string> load_snippets() {
  std::ifstream in(std::string(DFLASH_SOURCE_DIR) + "/tests/oracle/chat_snippets.txt");
  std::vector<std::string> out;
  std::string line;
  const std::string newline_mark = "\xe2\x8f\x8e";  // ⏎
  while (std::getline(in, line)) {
    if (line.empty() || line.rfind("##", 0) == 0) continue;
    for (size_t p = line.find(newline_mark); p != std::string::npos; p = line.find(newline_mark, p))
      line.replace(p, newline_mark.size(), "\n");
    out.push_back(line);
  }
  return out;
}

TEST(ChatSnippets, AllRenderOrFailCleanly) {
  auto snippets = load_snippets();
  ASSERT_GT(snippets.size(), 100u);
  auto ctx = nlohmann::ordered_json::parse(R"({
    "d": {"a": 1, "items": 2, "b": [1, 2]}, "l": [3, 1, 2], "s": "h\u00e9llo w\u00f6rld", "n": null,
    "f": 1.5, "t": true, "msgs": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}]})");
  size_t rendered = 0;
  for (const auto& src : snippets) {
    try {
      ChatTemplate t(src);
      t.set_fixed_time(0);
      t.render(ctx);
      ++rendered;
    } catch (const Error&) {
    }
  }
  EXPECT_GT(rendered, snippets.size() / 2);
}

}  // namespace
}  // namespace dflash
