#pragma once
// Splits template source into data and tag tokens the way jinja2's lexer does with
// trim_blocks=True and lstrip_blocks=True (Hugging Face's settings), including the exact
// whitespace rules of `-`/`+` markers, newline normalisation and the dropped final newline.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace dflash::jinja {

enum class Tok : uint8_t {
  Data,
  VarBegin,
  VarEnd,
  BlockBegin,
  BlockEnd,
  Name,
  String,
  Int,
  Float,
  Op,  // value holds the operator text: "+", "//", "==", "(", ...
  Eof,
};

struct Token {
  Tok type;
  std::string value;  // data, name, decoded string literal or operator
  int64_t int_value = 0;
  double float_value = 0;
  int line = 1;
};

struct LexOptions {
  bool trim_blocks = true;
  bool lstrip_blocks = true;
};

// Throws dflash::Error("template syntax error on line N: ...") on malformed input.
std::vector<Token> lex(std::string_view source, const LexOptions& opt = {});

[[noreturn]] void syntax_error(int line, const std::string& msg);

}  // namespace dflash::jinja
