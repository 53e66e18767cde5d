#pragma once
// JSON Schema -> grammar, for the schemas real clients send (OpenAI strict mode, pydantic,
// zod). The result is a handle in the caller's GrammarBuilder, so it composes: a forced tool
// call is seq({literal("<tool_call>\n{\"name\": \"f\", \"arguments\": "), json_schema(b, params),
// literal("}\n</tool_call>")}).
//
// Supported: type (and type arrays), enum, const, properties/required/additionalProperties
// (false, true or a schema), items/prefixItems/minItems/maxItems, minLength/maxLength,
// pattern (json_string_grammar.h), format date-time/date/time/uuid, minimum/maximum/
// exclusiveMinimum/exclusiveMaximum (integers: exactly; numbers: whole bounds exactly),
// anyOf/oneOf (as alternatives), allOf with one schema, nullable, local $ref ("#",
// "#/$defs/...", "#/definitions/...", recursion included), {} and true (any value).
// Annotations are ignored: title, description, default, examples, $schema, $id, $comment,
// deprecated, readOnly, writeOnly, discriminator, x-* and the formats not listed above (JSON
// Schema treats format as an annotation by default). Any other keyword throws dflash::Error
// naming it and where it is, since ignoring it could let the model produce invalid output.
//
// Objects: the declared properties in the schema's order (pass nlohmann::ordered_json to keep
// it; nlohmann::json sorts keys), required ones always, optional ones may be left out, and no
// other keys (valid whatever additionalProperties says). With no declared properties and an
// additionalProperties schema (or none), a map of any keys.
//
// Whitespace between tokens: up to `max_spaces` spaces/tabs, then optionally one newline and
// up to `max_indent` spaces/tabs, so both {"a": 1} and pretty-printed output fit but a model
// cannot loop on whitespace. No whitespace before or after the value itself.
#include <memory>

#include <nlohmann/json.hpp>

#include "decoding/grammar/grammar.h"

namespace dflash {

struct JsonGrammarOptions {
  int max_spaces = 4;   // spaces/tabs before an optional newline
  int max_indent = 64;  // spaces/tabs after the newline (16 levels of 4)
  bool newlines = true;
};

// One JSON value valid under `schema`.
GrammarBuilder::Expr json_schema(GrammarBuilder& b, const nlohmann::ordered_json& schema,
                                 const JsonGrammarOptions& options = {});
GrammarBuilder::Expr json_schema(GrammarBuilder& b, const nlohmann::json& schema,
                                 const JsonGrammarOptions& options = {});
// Any JSON object (response_format {"type": "json_object"}), any JSON value.
GrammarBuilder::Expr json_object(GrammarBuilder& b, const JsonGrammarOptions& options = {});
GrammarBuilder::Expr json_value(GrammarBuilder& b, const JsonGrammarOptions& options = {});

// A whole grammar whose root is one such value.
std::shared_ptr<const Grammar> json_schema_grammar(const nlohmann::ordered_json& schema,
                                                   const JsonGrammarOptions& options = {});

}  // namespace dflash
