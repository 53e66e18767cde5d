#pragma once
// Private state behind dflash::Tokenizer, shared by the loader and the encode/decode code.
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "tokenizer/added_tokens.h"
#include "tokenizer/bpe_model.h"
#include "tokenizer/normalizer.h"
#include "tokenizer/pre_tokenizer.h"
#include "tokenizer/tokenizer.h"

namespace dflash {
namespace tok {

struct TokenizerData {
  BpeModel model;
  Normalizer normalizer;
  PreTokenizer pre_tokenizer;
  std::vector<AddedToken> added;             // as listed in tokenizer.json
  std::unordered_map<int32_t, size_t> added_by_id;  // id -> index into added
  StringMap<int32_t> added_by_content;
  AddedTokenMatcher raw_matcher;         // normalized=false tokens, searched in the raw text
  AddedTokenMatcher normalized_matcher;  // normalized=true ones, searched after normalizing
  SpecialTokens special;
  std::string chat_template;
  int32_t vocab_size = 0;

  const AddedToken* added_token(int32_t id) const {
    const auto it = added_by_id.find(id);
    return it == added_by_id.end() ? nullptr : &added[it->second];
  }
  // A section of text between raw-matched added tokens.
  void encode_section(std::string_view text, bool parse_special, std::vector<int32_t>& out) const;
};

// The tokenizer.json part alone, from an already split document (also built from GGUF
// metadata); returns the post-processor's leading special token, if any.
std::optional<std::string> load_tokenizer_doc(TokenizerData& data, const TokenizerJsonDoc& doc,
                                              const std::string& origin);

// Parses both files into data (tokenizer_loader.cpp). config_json may be empty.
void load_tokenizer(TokenizerData& data, std::string_view tokenizer_json,
                    const std::string& origin, const std::string& config_json,
                    const std::string& config_origin);

}  // namespace tok

// The private Impl is the data; kept as a separate type so helpers need no friendship.
struct Tokenizer::Impl : tok::TokenizerData {};

}  // namespace dflash
