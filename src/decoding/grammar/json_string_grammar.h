#pragma once
// The inside of JSON strings: one character of string content as it appears in JSON text
// (escapes, UTF-8), and a compiler from a JSON Schema "pattern" (an ECMA-262 regex) to the
// JSON-encoded content of the strings it matches.
//
// UTF-8 policy: raw bytes must form well-formed UTF-8 (no overlong forms, no surrogates,
// nothing above U+10FFFF), control characters below 0x20 only as escapes, and \u escapes
// may not name surrogates: each escape or UTF-8 sequence is then exactly one code point, which
// is what minLength/maxLength count, and no lone surrogate can be produced.
#include <string_view>

#include "decoding/grammar/grammar.h"

namespace dflash {

// Made once per builder and shared, so every string of a grammar uses the same rules.
struct JsonStringPieces {
  explicit JsonStringPieces(GrammarBuilder& b);
  GrammarBuilder::Expr character;            // one character of content, JSON-encoded
  GrammarBuilder::Expr utf8_non_ascii;       // one code point >= U+0080 as raw UTF-8
  GrammarBuilder::Expr utf8_non_ascii_no_line_separators;  // the same without U+2028/U+2029
};

// The JSON-encoded content (no quotes) of the strings `pattern` matches, as JSON Schema
// means it: unanchored unless the pattern starts with ^ / ends with $. Supported: literals,
// escapes (\d \w \s \D \W \S \n \t \xHH \uHHHH and escaped punctuation), classes with ranges
// and negation, ".", groups ((...), (?:...), (?<name>...)), "|", the quantifiers ? * + {m}
// {m,} {m,n} (lazy or not), and ^ / $ at the ends of the top-level branches. Anything else
// (lookaround, backreferences, \b, Unicode properties, non-ASCII ranges) throws dflash::Error
// naming it. Where a construct would admit characters that cannot be told apart cheaply
// (\S, negated classes next to non-ASCII characters), only the ASCII ones are produced: a
// narrower but always valid language.
GrammarBuilder::Expr json_string_pattern(GrammarBuilder& b, const JsonStringPieces& pieces, std::string_view pattern);

}  // namespace dflash
