#include "server/json_body.h"

#include <vector>

#include "server/api_error.h"

namespace dflash::server {

namespace {

using ojson = nlohmann::ordered_json;

// nlohmann's own DOM builder behind a SAX layer that knows where it is: the parser itself is
// iterative, so stopping it at the first too-deep container means no deep value ever exists.
class GuardedSax {
 public:
  GuardedSax(ojson& out, int max_depth) : dom_(out, false), max_depth_(max_depth) {}

  bool null() { return value() && dom_.null(); }
  bool boolean(bool b) { return value() && dom_.boolean(b); }
  bool number_integer(ojson::number_integer_t v) { return value() && dom_.number_integer(v); }
  bool number_unsigned(ojson::number_unsigned_t v) { return value() && dom_.number_unsigned(v); }
  bool number_float(ojson::number_float_t v, const ojson::string_t& s) { return value() && dom_.number_float(v, s); }
  bool string(ojson::string_t& s) { return value() && dom_.string(s); }
  bool binary(ojson::binary_t& b) { return value() && dom_.binary(b); }
  bool start_object(std::size_t n) { return open(true) && dom_.start_object(n); }
  bool start_array(std::size_t n) { return open(false) && dom_.start_array(n); }
  bool end_object() { path_.pop_back(); return dom_.end_object(); }
  bool end_array() { path_.pop_back(); return dom_.end_array(); }
  bool key(ojson::string_t& k) {
    path_.back().key = k;
    return dom_.key(k);
  }
  bool parse_error(std::size_t pos, const std::string& token, const nlohmann::detail::exception& ex) {
    if (ex.id == 406) {  // out_of_range: "number overflow parsing '1e400'"
      const std::string field = where();
      throw ApiError(400,
                     "the number " + clip(token) + (field.empty() ? std::string() : " in '" + field + "'") +
                         " is outside the range of a double",
                     "invalid_request_error", field, "number_out_of_range");
    }
    error_ = ex.what();
    return false;
  }

  const std::string& error() const { return error_; }

 private:
  struct Frame {
    bool object;
    std::string key;
    long index = -1;  // arrays: the element being read
  };

  // Every value (containers too) advances its array's index before it is read.
  bool value() {
    if (!path_.empty() && !path_.back().object) ++path_.back().index;
    return true;
  }

  bool open(bool object) {
    value();
    if (int(path_.size()) >= max_depth_) {
      const std::string field = where();
      throw ApiError(400,
                     "the request JSON nests deeper than " + std::to_string(max_depth_) + " levels" +
                         (field.empty() ? std::string() : " (at '" + field + "')"),
                     "invalid_request_error", field, "json_too_deep");
    }
    path_.push_back({object, "", -1});
    return true;
  }

  // The path of the value being read, as clients write it: tools[0].function.parameters.
  std::string where() const {
    std::string out;
    for (const Frame& f : path_) {
      if (f.object && !f.key.empty()) out += (out.empty() ? "" : ".") + f.key;
      else if (!f.object && f.index >= 0) out += "[" + std::to_string(f.index) + "]";
    }
    return out.size() > 200 ? out.substr(0, 200) + "..." : out;
  }

  static std::string clip(const std::string& s) { return s.size() > 40 ? s.substr(0, 40) + "..." : s; }

  nlohmann::detail::json_sax_dom_parser<ojson> dom_;
  std::vector<Frame> path_;
  int max_depth_;
  std::string error_;
};

}  // namespace

ojson parse_json_body(const std::string& body, int max_depth) {
  ojson j;
  GuardedSax sax(j, max_depth);
  if (!ojson::sax_parse(body, &sax, ojson::input_format_t::json, true)) {
    const std::string& what = sax.error();
    if (what.find("UTF-8") != std::string::npos || what.find("utf-8") != std::string::npos)
      throw ApiError(400, "the request body is not valid UTF-8", "invalid_request_error", "", "invalid_utf8");
    throw ApiError(400, "malformed JSON in the request body: " + what, "invalid_request_error", "", "invalid_json");
  }
  return j;
}

}  // namespace dflash::server
