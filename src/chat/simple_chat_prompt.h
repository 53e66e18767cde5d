#pragma once
// A prompt in the chat format without running the model's chat template, for the CLI's
// --chat and the benchmarks' prompts.
#include <string>

namespace dflash {

// A single user turn in the model's chat format (Qwen3-style <|im_start|> turns).
inline std::string simple_chat_prompt(const std::string& user, bool enable_thinking) {
  std::string s = "<|im_start|>user\n" + user + "<|im_end|>\n<|im_start|>assistant\n";
  if (!enable_thinking) s += "<think>\n\n</think>\n\n";
  return s;
}

}  // namespace dflash
