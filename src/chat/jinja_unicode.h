#pragma once
// Python str semantics work on code points while we store UTF-8; these helpers bridge the two
// with Python's own character classes (str.isspace, str.isprintable, case mappings).
#include <string>
#include <string_view>

namespace dflash::jinja {

std::u32string utf8_decode(std::string_view s);
std::string utf8_encode(std::u32string_view s);
void utf8_append(std::string& out, char32_t cp);
size_t utf8_length(std::string_view s);
bool is_ascii(std::string_view s);

// Python's str.isspace(), which is also what the \s of Python's re module matches.
bool py_isspace(char32_t c);
bool py_isprintable(char32_t c);
bool py_isalpha(char32_t c);
bool py_isdigit(char32_t c);
bool py_isdecimal(char32_t c);
bool py_isalnum(char32_t c);
bool py_islower(char32_t c);
bool py_isupper(char32_t c);
bool py_iscased(char32_t c);
// Line boundaries of str.splitlines().
bool py_islinebreak(char32_t c);
bool py_is_identifier_start(char32_t c);
bool py_is_identifier_char(char32_t c);

// Full case mappings can expand one character into several ("ß".upper() == "SS").
void py_append_upper(std::u32string& out, char32_t c);
void py_append_lower(std::u32string& out, char32_t c);
void py_append_title(std::u32string& out, char32_t c);

std::string py_upper(std::string_view s);
std::string py_lower(std::string_view s);
std::string py_capitalize(std::string_view s);
std::string py_str_title(std::string_view s);  // str.title(), not the jinja filter
std::string py_swapcase(std::string_view s);

}  // namespace dflash::jinja
