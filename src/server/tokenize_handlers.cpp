// /tokenize and /detokenize in llama.cpp's shapes.
#include <cstdint>

#include "server/server_impl.h"

namespace dflash::server {

namespace {

// Pieces of a multi-byte character are sent as bytes (as llama.cpp does).
bool valid_utf8(const std::string& s) {
  for (size_t i = 0; i < s.size();) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    const size_t n = c < 0x80 ? 1 : (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3 : (c & 0xF8) == 0xF0 ? 4 : 0;
    if (n == 0 || i + n > s.size()) return false;
    for (size_t k = 1; k < n; ++k)
      if ((static_cast<unsigned char>(s[i + k]) & 0xC0) != 0x80) return false;
    i += n;
  }
  return true;
}

}  // namespace

void HttpServer::handle_tokenize(const httplib::Request& req, httplib::Response& res) {
  Engine& e = ready_engine();
  const ojson b = parse_body(req.body);
  if (!b.contains("content") || !b["content"].is_string())
    throw bad_param("content", "'content' must be a string");
  auto flag = [&](const char* key, bool dflt) {
    if (!b.contains(key) || b[key].is_null()) return dflt;
    if (!b[key].is_boolean()) throw bad_param(key, std::string("'") + key + "' must be a boolean");
    return b[key].get<bool>();
  };
  const bool add_special = flag("add_special", false), parse_special = flag("parse_special", true);
  const bool with_pieces = flag("with_pieces", false);
  const Tokenizer& tok = e.tokenizer();
  std::vector<int32_t> ids;
  if (add_special && tok.special().add_bos && tok.special().bos) ids.push_back(*tok.special().bos);
  const std::vector<int32_t> rest = tok.encode(b["content"].get<std::string>(), parse_special);
  ids.insert(ids.end(), rest.begin(), rest.end());
  ojson tokens = ojson::array();
  for (int32_t id : ids) {
    if (!with_pieces) {
      tokens.push_back(id);
      continue;
    }
    const std::string piece = tok.token_bytes(id);
    ojson p = ojson::array();
    if (valid_utf8(piece)) p = piece;
    else for (unsigned char c : piece) p.push_back(int(c));  // part of a multi-byte character
    tokens.push_back({{"id", id}, {"piece", p}});
  }
  send_json(res, 200, {{"tokens", tokens}});
}

void HttpServer::handle_detokenize(const httplib::Request& req, httplib::Response& res) {
  Engine& e = ready_engine();
  const ojson b = parse_body(req.body);
  if (!b.contains("tokens") || !b["tokens"].is_array()) throw bad_param("tokens", "'tokens' must be an array of token ids");
  const int vocab = e.tokenizer().vocab_size();
  std::vector<int32_t> ids;
  for (const ojson& x : b["tokens"]) {
    if (!x.is_number_integer() && !x.is_number_unsigned()) throw bad_param("tokens", "'tokens' must hold integers only");
    const int64_t id = x.is_number_unsigned() && x.get<uint64_t>() > uint64_t(INT32_MAX) ? -1 : x.get<int64_t>();
    if (id < 0 || id >= vocab)
      throw bad_param("tokens", "token id " + x.dump() + " is outside the vocabulary (size " + std::to_string(vocab) + ")");
    ids.push_back(int32_t(id));
  }
  send_json(res, 200, {{"content", e.tokenizer().decode(ids)}});
}

}  // namespace dflash::server
