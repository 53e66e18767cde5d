#pragma once
// Hugging Face tokenizer.json (byte-level BPE) reproduced id-for-id: added tokens are matched
// first, then NFC, the Split pre-tokenizer regex (PCRE2), ByteLevel and BPE merges.
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace dflash {

struct SpecialTokens {
  std::optional<int32_t> bos;     // tokenizer_config bos_token (none for Qwen3)
  std::vector<int32_t> eos;       // eos_token from tokenizer_config (may be extended by the model)
  std::optional<int32_t> pad;
  bool add_bos = false;           // tokenizer_config add_bos_token
};

struct VocabSpec;

class Tokenizer {
 public:
  // tokenizer_config_json may be empty (then no bos/eos/chat template are known).
  static Tokenizer from_json(const std::string& tokenizer_json,
                             const std::string& tokenizer_config_json,
                             const std::string& origin = "tokenizer.json");
  // Reads DIR/tokenizer.json and, when present, DIR/tokenizer_config.json.
  static Tokenizer from_folder(const std::string& dir);
  // From a GGUF file's tokenizer.ggml.* metadata (gguf_vocab.h).
  static Tokenizer from_vocab(const VocabSpec& spec, const std::string& origin);

  Tokenizer();
  ~Tokenizer();
  Tokenizer(Tokenizer&&) noexcept;
  Tokenizer& operator=(Tokenizer&&) noexcept;

  // parse_special=false treats added/special token text as plain text (HF split_special_tokens).
  std::vector<int32_t> encode(std::string_view text, bool parse_special = true) const;
  std::string decode(const std::vector<int32_t>& ids, bool skip_special = false) const;
  // The raw bytes a token stands for (added tokens: their content). Empty for unknown ids.
  std::string token_bytes(int32_t id) const;
  std::optional<int32_t> token_to_id(std::string_view token) const;
  bool is_special(int32_t id) const;
  int32_t vocab_size() const;  // 1 + the largest id known (vocab and added tokens)

  const SpecialTokens& special() const;
  // tokenizer_config.json "chat_template" (string form, or the "default" entry of the list form).
  const std::string& chat_template() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Turns a stream of ids into UTF-8 text pieces; holds back an incomplete multi-byte sequence
// until the token that completes it arrives.
class StreamDecoder {
 public:
  explicit StreamDecoder(const Tokenizer& tok, bool skip_special = false)
      : tok_(tok), skip_special_(skip_special) {}
  std::string push(int32_t id);
  std::string flush();  // whatever is held back, invalid bytes replaced by U+FFFD

 private:
  const Tokenizer& tok_;
  bool skip_special_;
  std::string pending_;
};

}  // namespace dflash
