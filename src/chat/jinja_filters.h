#pragma once
// Shared by the filter files: each defines a table of its filters, and find_filter
// (jinja_filters.cpp) looks a name up in all of them.
#include <span>
#include <string>

#include "chat/jinja_builtins.h"

namespace dflash::jinja {

struct NamedFilter {
  const char* name;
  FilterFn fn;
};

std::span<const NamedFilter> string_filters();  // jinja_filters_string.cpp
std::span<const NamedFilter> list_filters();    // jinja_filters_list.cpp
std::span<const NamedFilter> number_filters();  // jinja_filters_number.cpp

// jinja2's soft_str: filters that take text apply str() to whatever they are given.
inline std::string soft_str(const Value& v) { return to_str(v); }

}  // namespace dflash::jinja
