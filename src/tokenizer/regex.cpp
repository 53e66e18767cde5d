#include "tokenizer/regex.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <optional>

#include "tokenizer/utf8.h"
#include "util/error.h"

namespace dflash::tok {
namespace {

// Unicode White_Space, which is what Oniguruma's \s means (PCRE2's \s adds U+180E).
constexpr std::string_view kWhiteSpace =
    R"(\t-\r\x{20}\x{85}\x{A0}\x{1680}\x{2000}-\x{200A}\x{2028}\x{2029}\x{202F}\x{205F}\x{3000})";
// Oniguruma's Unicode \w (PCRE2's is only \p{L}\p{N}_).
constexpr std::string_view kWordChars =
    R"(\p{Alphabetic}\p{M}\p{Nd}\p{Pc}\x{B2}\x{B3}\x{B9}\x{BC}-\x{BE})";
constexpr std::string_view kHexDigits = "0-9A-Fa-f";

bool is_hex(char c) {
  return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

// Per-thread match state: the compiled code is shared, match data and JIT stack are not.
struct MatchState {
  pcre2_match_data* data = nullptr;
  pcre2_match_context* context = nullptr;
  pcre2_jit_stack* stack = nullptr;

  MatchState() {
    data = pcre2_match_data_create(1, nullptr);  // only the whole match is read
    context = pcre2_match_context_create(nullptr);
    // Long runs of one class (a 100 kB line of '=') backtrack deeply; give JIT room.
    stack = pcre2_jit_stack_create(64 * 1024, 8 * 1024 * 1024, nullptr);
    if (context && stack) pcre2_jit_stack_assign(context, nullptr, stack);
  }
  ~MatchState() {
    pcre2_jit_stack_free(stack);
    pcre2_match_context_free(context);
    pcre2_match_data_free(data);
  }
};

MatchState& match_state() {
  thread_local MatchState state;
  return state;
}

std::string pcre2_message(int code) {
  PCRE2_UCHAR buf[256];
  pcre2_get_error_message(code, buf, sizeof buf);
  return reinterpret_cast<const char*>(buf);
}

}  // namespace

std::string oniguruma_to_pcre2(std::string_view p, const std::string& origin) {
  std::string out;
  out.reserve(p.size() + 64);
  bool in_class = false;
  auto unsupported = [&](const std::string& what) {
    return file_error(origin, "pre_tokenizer regex " + what + " is not supported: " +
                                  std::string(p));
  };
  size_t i = 0;
  while (i < p.size()) {
    const char c = p[i];
    if (c == '\\' && i + 1 < p.size()) {
      const char e = p[i + 1];
      auto set = [&](std::string_view chars, bool negate) {
        if (in_class) {
          if (negate) throw unsupported(std::string("\\") + e + " inside a character class");
          out += chars;
        } else {
          out += negate ? "[^" : "[";
          out += chars;
          out += ']';
        }
      };
      switch (e) {
        case 's': set(kWhiteSpace, false); break;
        case 'S': set(kWhiteSpace, true); break;
        case 'w': set(kWordChars, false); break;
        case 'W': set(kWordChars, true); break;
        case 'h': set(kHexDigits, false); break;
        case 'H': set(kHexDigits, true); break;
        case 'u':
          if (i + 5 < p.size() && is_hex(p[i + 2]) && is_hex(p[i + 3]) && is_hex(p[i + 4]) &&
              is_hex(p[i + 5])) {
            out += "\\x{";
            out += p.substr(i + 2, 4);
            out += '}';
            i += 6;
            continue;
          }
          throw unsupported("escape \\u without four hex digits");
        default:
          out += p.substr(i, 2);
      }
      i += 2;
      continue;
    }
    if (in_class) {
      if (c == '[') {
        if (i + 1 < p.size() && p[i + 1] == ':') {  // POSIX bracket such as [:alpha:]
          const size_t close = p.find(":]", i + 2);
          if (close == std::string_view::npos) throw unsupported("unterminated POSIX class");
          out += p.substr(i, close + 2 - i);
          i = close + 2;
          continue;
        }
        throw unsupported("nested character class");
      }
      if (c == '&' && i + 1 < p.size() && p[i + 1] == '&') {
        throw unsupported("character-class intersection &&");
      }
      if (c == ']') in_class = false;
      out += c;
      ++i;
      continue;
    }
    if (c == '[') {
      in_class = true;
      out += c;
      ++i;
      if (i < p.size() && p[i] == '^') out += p[i++];
      if (i < p.size() && p[i] == ']') out += "\\]", ++i;  // a leading ']' is literal
      continue;
    }
    out += c;
    ++i;
  }
  return out;
}

Regex::Regex(std::string_view pattern, const std::string& origin) : origin_(origin) {
  const std::string converted = oniguruma_to_pcre2(pattern, origin);
  pcre2_compile_context* cc = pcre2_compile_context_create(nullptr);
  pcre2_set_newline(cc, PCRE2_NEWLINE_LF);  // Ruby syntax: only \n ends a line
  int err = 0;
  PCRE2_SIZE err_off = 0;
  // MULTILINE: in Ruby syntax ^ and $ always match at line breaks.
  pcre2_code* code =
      pcre2_compile(reinterpret_cast<PCRE2_SPTR>(converted.data()), converted.size(),
                    PCRE2_UTF | PCRE2_UCP | PCRE2_MULTILINE, &err, &err_off, cc);
  pcre2_compile_context_free(cc);
  if (!code) {
    throw file_error(origin, "cannot compile pre_tokenizer regex '" + std::string(pattern) +
                                 "': " + pcre2_message(err) + " at offset " +
                                 std::to_string(err_off));
  }
  code_ = code;
  jit_ = pcre2_jit_compile(code, PCRE2_JIT_COMPLETE) == 0;
}

Regex::~Regex() { pcre2_code_free(static_cast<pcre2_code*>(code_)); }

void Regex::for_each_match(std::string_view text,
                           const std::function<void(size_t, size_t)>& on_match) const {
  auto* code = static_cast<pcre2_code*>(code_);
  MatchState& st = match_state();
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  const size_t n = text.size();
  size_t search_from = 0;
  std::optional<size_t> last_match_end;
  while (search_from <= n) {
    int rc;
    if (jit_) {
      rc = pcre2_jit_match(code, subject, n, search_from, 0, st.data, st.context);
      if (rc == PCRE2_ERROR_JIT_STACKLIMIT) {
        rc = pcre2_match(code, subject, n, search_from, PCRE2_NO_JIT | PCRE2_NO_UTF_CHECK,
                         st.data, st.context);
      }
    } else {
      rc = pcre2_match(code, subject, n, search_from, PCRE2_NO_UTF_CHECK, st.data, st.context);
    }
    if (rc == PCRE2_ERROR_NOMATCH) return;
    if (rc < 0) {
      throw file_error(origin_, "pre_tokenizer regex failed on a " + std::to_string(n) +
                                    "-byte text: " + pcre2_message(rc));
    }
    const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(st.data);
    const size_t start = ov[0], end = ov[1];
    if (start == end && last_match_end == end) {
      // Step over one character, as onig's FindMatches does after a repeated empty match.
      if (search_from >= n) return;
      search_from += utf8_step(text, search_from).len;
      continue;
    }
    search_from = end;
    last_match_end = end;
    on_match(start, end);
  }
}

}  // namespace dflash::tok
