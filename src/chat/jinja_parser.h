#pragma once
// Builds the node tree from tokens with jinja2's grammar and operator precedence.
#include <string_view>

#include "chat/jinja_ast.h"
#include "chat/jinja_lexer.h"

namespace dflash::jinja {

// Throws dflash::Error("template syntax error on line N: ...").
Body parse(std::string_view source, const LexOptions& opt = {});

}  // namespace dflash::jinja
