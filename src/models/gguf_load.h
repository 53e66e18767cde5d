#pragma once
// Targets (qwen3, qwen2, llama) and their tokenizers from llama.cpp GGUF files.
#include <memory>
#include <string>

#include "formats/gguf.h"
#include "models/model_config.h"
#include "models/transformer.h"
#include "tokenizer/gguf_vocab.h"
#include "tokenizer/tokenizer.h"

namespace dflash {

// Hyper-parameters from <arch>.* metadata; vocab from token_embd's row count.
ModelConfig gguf_model_config(const GgufFile& f);
std::unique_ptr<Transformer> load_gguf_transformer(const std::string& path, LoadOptions& opt);

VocabSpec gguf_vocab_spec(const GgufFile& f);
Tokenizer load_gguf_tokenizer(const std::string& path);

// llama.cpp's converter reorders the q/k rows of llama-architecture models inside each head
// (rotate-half pairs (i, i+hd/2) become adjacent rows (2i, 2i+1)) because its llama RoPE is
// the interleaved kind; qwen2/qwen3 keep Hugging Face's order. Maps a Hugging Face row to
// the GGUF row.
inline int64_t llama_qk_gguf_row(int64_t hf_row, int64_t head_dim) {
  const int64_t h = hf_row / head_dim, w = hf_row % head_dim, half = head_dim / 2;
  return h * head_dim + 2 * (w % half) + w / half;
}

}  // namespace dflash
