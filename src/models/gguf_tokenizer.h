#pragma once
// Tokenizers from llama.cpp GGUF files (tokenizer.ggml.*), whatever the model family.
#include <cstdint>
#include <optional>
#include <string>

#include "formats/gguf.h"
#include "models/model_config.h"
#include "tokenizer/gguf_vocab.h"
#include "tokenizer/tokenizer.h"

namespace dflash {

// A token id stored under `key`; nullopt when absent; throws for a value out of range.
std::optional<int32_t> gguf_token_id(const GgufFile& f, const std::string& key);
VocabSpec gguf_vocab_spec(const GgufFile& f);
Tokenizer load_gguf_tokenizer(const std::string& path);
// The inverse: a folder's tokenizer.json (with the config's eos/bos) as tokenizer.ggml.*, one
// token per embedding row (unused rows padded with [PAD] tokens).
void write_gguf_tokenizer(GgufWriter& w, const std::string& dir, const ModelConfig& c);

}  // namespace dflash
