// GGUF tokenizer.ggml.* -> the same internal tables tokenizer.json builds. GGUF keeps only a
// pre-tokenizer *name*; each name is mapped to the regex and normalizer of the Hugging Face
// tokenizer it was converted from, so ids match tokenizer.json's.
#include "tokenizer/gguf_vocab.h"

#include "tokenizer/tokenizer_impl.h"
#include "util/error.h"

namespace dflash {

namespace {

constexpr const char* kQwen2Regex =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
// Qwen3.5's: letters may carry combining marks, which the punctuation run then excludes
// (llama.cpp's LLAMA_VOCAB_PRE_TYPE_QWEN35, "original regex from tokenizer.json").
constexpr const char* kQwen35Regex =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr const char* kLlama3Regex =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

}  // namespace

bool vocab_pre_tokenizer(const std::string& pre, std::string& regex, bool& nfc, bool& ignore_merges) {
  if (pre == "qwen2") {
    regex = kQwen2Regex, nfc = true, ignore_merges = false;
    return true;
  }
  if (pre == "qwen35") {
    regex = kQwen35Regex, nfc = true, ignore_merges = false;
    return true;
  }
  if (pre == "llama-bpe" || pre == "llama3") {
    regex = kLlama3Regex, nfc = false, ignore_merges = true;
    return true;
  }
  return false;
}

std::string vocab_pre_name(const std::string& regex, bool nfc) {
  if (regex == kQwen2Regex && nfc) return "qwen2";
  if (regex == kQwen35Regex && nfc) return "qwen35";
  if (regex == kLlama3Regex && !nfc) return "llama-bpe";
  return "";
}

Tokenizer Tokenizer::from_vocab(const VocabSpec& spec, const std::string& origin) {
  using nlohmann::json;
  if (spec.model != "gpt2")
    throw file_error(origin, "tokenizer.ggml.model '" + spec.model + "' is not supported (only gpt2, byte-level BPE)");
  std::string regex;
  bool nfc = false, ignore_merges = false;
  if (!vocab_pre_tokenizer(spec.pre, regex, nfc, ignore_merges))
    throw file_error(origin, "tokenizer.ggml.pre '" + spec.pre + "' is not supported (supported: qwen2, qwen35, llama-bpe)");
  if (!spec.token_types.empty() && spec.token_types.size() != spec.tokens.size())
    throw file_error(origin, "tokenizer.ggml.token_type has " + std::to_string(spec.token_types.size()) +
                                 " entries for " + std::to_string(spec.tokens.size()) + " tokens");
  tok::TokenizerJsonDoc doc;
  doc.has_vocab = doc.has_merges = true;
  json added = json::array();
  for (size_t id = 0; id < spec.tokens.size(); ++id) {
    const auto type = spec.token_types.empty() ? VocabTokenType::Normal : VocabTokenType(spec.token_types[id]);
    switch (type) {
      case VocabTokenType::Unused: break;  // padding rows of the embedding ([PAD...]): never produced
      case VocabTokenType::Control:
      case VocabTokenType::UserDefined:
        // tokenizer.json lists these as added tokens, outside model.vocab.
        added.push_back({{"id", id}, {"content", spec.tokens[id]}, {"special", type == VocabTokenType::Control},
                         {"normalized", false}, {"single_word", false}, {"lstrip", false}, {"rstrip", false}});
        break;
      default: doc.vocab.emplace_back(spec.tokens[id], int64_t(id));
    }
  }
  doc.merges.reserve(spec.merges.size());
  for (const auto& m : spec.merges) {
    const size_t sp = m.find(' ');
    if (sp == std::string::npos || sp == 0 || sp + 1 >= m.size() || m.find(' ', sp + 1) != std::string::npos)
      throw file_error(origin, "tokenizer.ggml.merges entry '" + m + "' is not 'left right'");
    doc.merges.emplace_back(m.substr(0, sp), m.substr(sp + 1));
  }
  doc.tree = {
      {"model", {{"type", "BPE"}, {"ignore_merges", ignore_merges}, {"fuse_unk", false}, {"byte_fallback", false}}},
      {"normalizer", nfc ? json{{"type", "NFC"}} : json()},
      {"pre_tokenizer",
       {{"type", "Sequence"},
        {"pretokenizers",
         json::array({{{"type", "Split"}, {"pattern", {{"Regex", regex}}}, {"behavior", "Isolated"}, {"invert", false}},
                      {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", false}}})}}},
      {"decoder", {{"type", "ByteLevel"}}},
      {"added_tokens", added},
  };
  Tokenizer t;
  tok::load_tokenizer_doc(*t.impl_, doc, origin);
  const int32_t n = int32_t(spec.tokens.size());
  auto check = [&](const std::optional<int32_t>& id, const char* key) {
    if (id && (*id < 0 || *id >= n))
      throw file_error(origin, std::string(key) + " " + std::to_string(*id) + " is outside the " + std::to_string(n) + " tokens");
    return id;
  };
  SpecialTokens& sp = t.impl_->special;
  sp.bos = check(spec.bos, "tokenizer.ggml.bos_token_id");
  if (auto e = check(spec.eos, "tokenizer.ggml.eos_token_id")) sp.eos.push_back(*e);
  if (auto e = check(spec.eot, "tokenizer.ggml.eot_token_id"); e && (sp.eos.empty() || sp.eos[0] != *e)) sp.eos.push_back(*e);
  sp.pad = check(spec.pad, "tokenizer.ggml.padding_token_id");
  sp.add_bos = spec.add_bos.value_or(false) && sp.bos.has_value();
  t.impl_->chat_template = spec.chat_template;
  return t;
}

}  // namespace dflash
