#pragma once
// A byte-level BPE vocabulary as GGUF carries it (tokenizer.ggml.*), independent of the file
// format so the tokenizer does not depend on formats/.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace dflash {

// GGUF token types (llama.cpp's llama_token_type numbering).
enum class VocabTokenType : int32_t { Undefined = 0, Normal = 1, Unknown = 2, Control = 3, UserDefined = 4, Unused = 5, Byte = 6 };

struct VocabSpec {
  std::string model;  // tokenizer.ggml.model: only "gpt2" (byte-level BPE)
  std::string pre;    // tokenizer.ggml.pre: "qwen2", "qwen35", "llama-bpe" (and its alias "llama3")
  std::vector<std::string> tokens;    // ByteLevel text, as in tokenizer.json's vocab
  std::vector<int32_t> token_types;   // empty: all normal
  std::vector<std::string> merges;    // "left right", in rank order
  std::optional<int32_t> bos, eos, eot, pad;
  std::optional<bool> add_bos;
  std::string chat_template;
};

// The pre-tokenizer regex and normalizer of a GGUF pre name, as tokenizer.json would spell them;
// false for a name this build does not reproduce.
bool vocab_pre_tokenizer(const std::string& pre, std::string& regex, bool& nfc, bool& ignore_merges);
// The GGUF pre name for a tokenizer.json Split regex + normalizer (empty when none matches).
std::string vocab_pre_name(const std::string& regex, bool nfc);

}  // namespace dflash
