#pragma once
// Python str algorithms over UTF-8 text, indexing by code point as Python does.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace dflash::jinja {

struct SliceRange {
  int64_t start, stop, step, count;
};
// PySlice_AdjustIndices: resolves optional/negative bounds against a length.
SliceRange adjust_slice(int64_t len, std::optional<int64_t> start, std::optional<int64_t> stop,
                        std::optional<int64_t> step);

std::string str_slice(std::string_view s, const SliceRange& r);
std::string str_at(std::string_view s, int64_t index);  // one code point; index already wrapped

// chars == nullopt strips whitespace.
std::string py_strip(std::string_view s, const std::optional<std::string>& chars, bool left, bool right);
std::vector<std::string> py_split(std::string_view s, const std::optional<std::string>& sep,
                                  int64_t maxsplit);
std::vector<std::string> py_rsplit(std::string_view s, const std::optional<std::string>& sep,
                                   int64_t maxsplit);
std::vector<std::string> py_splitlines(std::string_view s, bool keepends);
std::string py_replace(std::string_view s, std::string_view old, std::string_view repl, int64_t count);
// Code-point index of sub within s[start:end], or -1.
int64_t py_find(std::string_view s, std::string_view sub, std::optional<int64_t> start,
                std::optional<int64_t> end, bool reverse);
int64_t py_count(std::string_view s, std::string_view sub, std::optional<int64_t> start,
                 std::optional<int64_t> end);
std::string py_repeat(std::string_view s, int64_t n);
std::string py_pad(std::string_view s, int64_t width, char32_t fill, char align);  // '<' '>' '^'
std::string py_center(std::string_view s, int64_t width, char32_t fill);
std::string html_escape(std::string_view s);

}  // namespace dflash::jinja
