#include "tokenizer/normalizer.h"

#include <utf8proc.h>

#include <cstdlib>

#include "util/error.h"

namespace dflash::tok {

namespace {

bool is_ascii(char c) { return static_cast<uint8_t>(c) < 0x80; }

std::string utf8proc_nfc(std::string_view text) {
  utf8proc_uint8_t* out = nullptr;
  const utf8proc_ssize_t n =
      utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(text.data()),
                   static_cast<utf8proc_ssize_t>(text.size()), &out,
                   static_cast<utf8proc_option_t>(UTF8PROC_STABLE | UTF8PROC_COMPOSE));
  if (n < 0) throw Error(std::string("NFC normalization failed: ") + utf8proc_errmsg(n));
  std::string result(reinterpret_cast<const char*>(out), static_cast<size_t>(n));
  std::free(out);
  return result;
}

}  // namespace

std::string nfc(std::string_view text) {
  // Nothing below U+0300 composes, decomposes or reorders, and UTF-8 for such text has no byte
  // >= 0xCC. An ASCII character is a starter that nothing after it can reach across and that is
  // never the second half of a composition, so the text can be cut right before any ASCII
  // character: only the stretches around non-trivial characters go through utf8proc.
  std::string out;
  size_t done = 0;
  size_t i = 0;
  while (i < text.size()) {
    if (static_cast<uint8_t>(text[i]) < 0xCC) {
      ++i;
      continue;
    }
    size_t start = i;
    while (start > done && !is_ascii(text[start - 1])) --start;
    if (start > done) --start;  // the ASCII starter a mark may compose with
    size_t end = i;
    while (end < text.size() && !is_ascii(text[end])) ++end;
    if (out.empty()) out.reserve(text.size() + 16);
    out.append(text.substr(done, start - done));
    out += utf8proc_nfc(text.substr(start, end - start));
    done = i = end;
  }
  if (done == 0) return std::string(text);
  out.append(text.substr(done));
  return out;
}

void Normalizer::collect(const nlohmann::json& j, const std::string& origin,
                         std::vector<Step>& out) {
  if (j.is_null()) return;
  if (!j.is_object() || !j.contains("type") || !j["type"].is_string()) {
    throw file_error(origin, "normalizer must be an object with a \"type\"");
  }
  const std::string type = j["type"];
  if (type == "NFC") {
    out.push_back(Step::Nfc);
  } else if (type == "Sequence") {
    const auto& list = j.value("normalizers", nlohmann::json::array());
    if (!list.is_array()) throw file_error(origin, "normalizer Sequence without a list");
    for (const auto& n : list) collect(n, origin, out);
  } else {
    throw file_error(origin, "normalizer '" + type + "' is not supported (only NFC, Sequence)");
  }
}

Normalizer Normalizer::from_json(const nlohmann::json& j, const std::string& origin) {
  Normalizer n;
  collect(j, origin, n.steps_);
  return n;
}

std::string Normalizer::apply(std::string_view text) const {
  std::string s(text);
  for (Step step : steps_) {
    switch (step) {
      case Step::Nfc: s = nfc(s); break;
    }
  }
  return s;
}

}  // namespace dflash::tok
