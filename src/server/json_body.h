#pragma once
// Request bodies parsed into JSON with the limits a server needs before anything recursive
// touches the value: a nesting depth bound (copying, dumping and template conversion recurse
// once per level, so 25,000 levels of '[' overflowed the stack) and numbers outside double's
// range answered as a 400 naming the field (nlohmann reports them as out_of_range, which is
// not a parse error and used to escape as a 500).
#include <string>

#include <nlohmann/json.hpp>

namespace dflash::server {

// Far above what real requests nest (a tool's JSON schema rarely passes 20 levels), far below
// what the stack holds even under AddressSanitizer.
constexpr int kMaxJsonDepth = 256;

// The parsed value of any JSON type; ApiError 400 for malformed JSON (code invalid_json),
// invalid UTF-8 (invalid_utf8), nesting deeper than max_depth (json_too_deep) and numbers
// out of range (number_out_of_range, with the field's path as param).
nlohmann::ordered_json parse_json_body(const std::string& body, int max_depth = kMaxJsonDepth);

}  // namespace dflash::server
