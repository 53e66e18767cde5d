// Fuzzes tokenizer loading and encoding (src/tokenizer/): tokenizer.json (streamed vocab and
// merges, normalizer, Split regex compiled by PCRE2, added tokens) and tokenizer_config.json
// (bos/eos/pad lookups), then encode, decode and streaming decode of a text. Both files ship
// with downloaded models and the text comes from clients, so neither may crash the engine.
//
// Input: tokenizer.json NUL tokenizer_config.json NUL text. JSON holds no raw NUL, so the text
// after the second NUL can be any bytes (invalid UTF-8 too). Fewer NULs: no config / no text.
#include <cstdint>
#include <string>
#include <vector>

#include "fuzz_input.h"
#include "tokenizer/tokenizer.h"
#include "util/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view in = fuzz::as_view(data, size);
  const std::string tokenizer_json(fuzz::take_until_nul(in));
  const std::string config_json(fuzz::take_until_nul(in));
  const std::string_view text = in;
  dflash::Tokenizer tok;
  try {
    tok = dflash::Tokenizer::from_json(tokenizer_json, config_json);
  } catch (const dflash::Error&) {
    return 0;  // a refused tokenizer: expected for most inputs
  }
  for (bool parse_special : {true, false}) {
    const std::vector<int32_t> ids = tok.encode(text, parse_special);
    for (int32_t id : ids) {
      if (id < 0 || id >= tok.vocab_size()) __builtin_trap();  // encode made up an id
      (void)tok.token_bytes(id);
      (void)tok.is_special(id);
    }
    (void)tok.decode(ids, /*skip_special=*/false);
    (void)tok.decode(ids, /*skip_special=*/true);
    dflash::StreamDecoder stream(tok);
    for (int32_t id : ids) (void)stream.push(id);
    (void)stream.flush();
    (void)tok.token_to_id(text);
  }
  return 0;
}
