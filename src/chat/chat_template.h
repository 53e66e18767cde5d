#pragma once
// Hugging Face chat templates: a Jinja2 interpreter whose output is byte-identical to
// transformers' apply_chat_template (jinja2 ImmutableSandboxedEnvironment with trim_blocks,
// lstrip_blocks and loop controls; HF's tojson, raise_exception and strftime_now).
#include <ctime>
#include <memory>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

namespace dflash {

class ChatTemplate {
 public:
  // Parses once; throws dflash::Error("template syntax error on line N: ...").
  explicit ChatTemplate(std::string source);

  // context: {"messages": [...], "add_generation_prompt": bool, "tools": [...], "bos_token": ...,
  // plus any extra keyword arguments}. Throws dflash::Error; a template's
  // raise_exception(msg) becomes an Error whose what() is exactly msg.
  // Thread-safe: renders share nothing but the parsed template.
  std::string render(const nlohmann::ordered_json& context) const;

  // Pins the clock strftime_now() reads, as seconds since the epoch rendered in UTC;
  // nullopt (the default) uses the local time at render.
  void set_fixed_time(std::optional<std::time_t> t) { fixed_time_ = t; }

  const std::string& source() const { return source_; }

 private:
  struct Impl;
  std::string source_;
  std::shared_ptr<const Impl> impl_;
  std::optional<std::time_t> fixed_time_;
};

// The template a tokenizer_config.json names: "chat_template" as a string, or the entry called
// `name` of a list of {"name", "template"}. Throws dflash::Error when there is none.
std::string chat_template_from_config(const nlohmann::ordered_json& tokenizer_config,
                                      const std::string& name = "default");

// Python's datetime.strftime for a broken-down time (handles %f, %z, %Z like a naive datetime).
std::string python_strftime(const std::string& fmt, const std::tm& tm, int microseconds = 0);

}  // namespace dflash
