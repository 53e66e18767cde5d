#pragma once
// A small byte-level tokenizer.json built in code: byte b has id b, a few merges on top, and
// added tokens from 400. Tests change fields of the JSON to probe one feature at a time.
#include <string>

#include <nlohmann/json.hpp>

#include "tokenizer/byte_level.h"

namespace tiny {

using nlohmann::json;

// Vocab text of raw bytes.
inline std::string t(const std::string& bytes) { return dflash::tok::byte_level_encode(bytes); }

inline json tokenizer_json(bool string_merges = false) {
  json vocab = json::object();
  for (int b = 0; b < 256; ++b) vocab[t(std::string(1, static_cast<char>(b)))] = b;
  const char* merged[][2] = {{"h", "e"}, {"l", "l"}, {"he", "ll"}, {"hell", "o"}, {" ", "h"},
                             {"a", "b"}, {" h", "ello"}};
  vocab[t("he")] = 256;
  vocab[t("ll")] = 257;
  vocab[t("hell")] = 258;
  vocab[t("hello")] = 259;
  vocab[t(" h")] = 260;
  vocab[t("ab")] = 261;
  vocab[t("ello")] = 262;  // reachable only whole (ignore_merges), no merge builds it
  vocab[t(" hello")] = 263;
  vocab[t("abc")] = 264;   // likewise
  json merges = json::array();
  for (const auto& m : merged) {
    if (string_merges) {
      merges.push_back(t(m[0]) + " " + t(m[1]));
    } else {
      merges.push_back(json::array({t(m[0]), t(m[1])}));
    }
  }
  auto added = [](int id, const char* content, bool special) {
    return json{{"id", id},        {"content", content}, {"single_word", false},
                {"lstrip", false}, {"rstrip", false},     {"normalized", false},
                {"special", special}};
  };
  json added_tokens = json::array({added(400, "<|end|>", true), added(401, "<think>", false),
                                   added(402, "[MASK]", false), added(403, "ony", false),
                                   added(404, "<s>", true), added(405, "xy!", false),
                                   added(406, "xy", false)});
  added_tokens[2]["lstrip"] = true;
  added_tokens[2]["rstrip"] = true;
  added_tokens[3]["single_word"] = true;
  return json{
      {"version", "1.0"},
      {"truncation", nullptr},
      {"padding", nullptr},
      {"added_tokens", added_tokens},
      {"normalizer", {{"type", "NFC"}}},
      {"pre_tokenizer",
       {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", true},
        {"use_regex", true}}},
      {"post_processor", {{"type", "ByteLevel"}, {"trim_offsets", false}}},
      {"decoder", {{"type", "ByteLevel"}}},
      {"model",
       {{"type", "BPE"},
        {"dropout", nullptr},
        {"unk_token", nullptr},
        {"continuing_subword_prefix", ""},
        {"end_of_word_suffix", ""},
        {"fuse_unk", false},
        {"byte_fallback", false},
        {"ignore_merges", false},
        {"vocab", vocab},
        {"merges", merges}}}};
}

inline json config_json() {
  return json{{"bos_token", {{"__type", "AddedToken"}, {"content", "<s>"}}},
              {"eos_token", "<|end|>"},
              {"pad_token", nullptr},
              {"add_bos_token", true},
              {"chat_template", json::array({{{"name", "tool_use"}, {"template", "T"}},
                                             {{"name", "default"}, {"template", "D"}}})}};
}

}  // namespace tiny
