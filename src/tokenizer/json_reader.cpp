#include "tokenizer/json_reader.h"

#include "util/error.h"

namespace dflash::tok {
namespace {

using nlohmann::json;

// SAX handler: builds the tree like nlohmann's own DOM parser, except inside model.vocab and
// model.merges, whose entries are collected directly.
class Reader : public nlohmann::json_sax<json> {
 public:
  Reader(TokenizerJsonDoc& doc, const std::string& origin) : doc_(doc), origin_(origin) {}

  bool null() override { return value(json()); }
  bool boolean(bool v) override { return value(json(v)); }
  bool number_integer(number_integer_t v) override {
    if (mode_ == Mode::Vocab) return vocab_id(v);
    return value(json(v));
  }
  bool number_unsigned(number_unsigned_t v) override {
    if (mode_ == Mode::Vocab) return vocab_id(v > INT64_MAX ? -1 : static_cast<int64_t>(v));
    return value(json(v));
  }
  bool number_float(number_float_t v, const string_t&) override { return value(json(v)); }
  bool binary(binary_t&) override { return value(json()); }

  bool string(string_t& s) override {
    if (mode_ == Mode::Merges) {
      if (merge_depth_ == 2) {
        pair_.push_back(std::move(s));
        return true;
      }
      const size_t sp = s.find(' ');
      if (sp == std::string::npos || s.find(' ', sp + 1) != std::string::npos) {
        throw bad_merge("'" + s + "' is not two tokens separated by one space");
      }
      doc_.merges.emplace_back(s.substr(0, sp), s.substr(sp + 1));
      return true;
    }
    if (mode_ == Mode::Vocab) throw file_error(origin_, "vocab entry '" + key_ + "' is not an id");
    return value(json(std::move(s)));
  }

  bool key(string_t& k) override {
    key_ = std::move(k);
    return true;
  }

  bool start_object(std::size_t) override {
    if (mode_ == Mode::Merges) throw bad_merge("is neither \"a b\" nor [a, b]");
    if (mode_ == Mode::Vocab) throw file_error(origin_, "vocab entry '" + key_ + "' is not an id");
    if (in_model() && key_ == "vocab") {
      value(json::object());
      doc_.has_vocab = true;
      doc_.vocab.reserve(1 << 17);
      mode_ = Mode::Vocab;
      return true;
    }
    const bool is_model = stack_.size() == 1 && key_ == "model";
    json* obj = value(json::object()) ? last_ : nullptr;
    stack_.push_back(obj);
    if (is_model) model_ = obj;
    return true;
  }

  bool end_object() override {
    if (mode_ == Mode::Vocab) {
      mode_ = Mode::None;
      return true;
    }
    stack_.pop_back();
    return true;
  }

  bool start_array(std::size_t) override {
    if (mode_ == Mode::Vocab) throw file_error(origin_, "vocab entry '" + key_ + "' is not an id");
    if (mode_ == Mode::Merges) {
      if (merge_depth_ != 1) throw bad_merge("is neither \"a b\" nor [a, b]");
      merge_depth_ = 2;
      pair_.clear();
      return true;
    }
    if (in_model() && key_ == "merges") {
      value(json::array());
      doc_.has_merges = true;
      doc_.merges.reserve(1 << 17);
      mode_ = Mode::Merges;
      merge_depth_ = 1;
      return true;
    }
    json* arr = value(json::array()) ? last_ : nullptr;
    stack_.push_back(arr);
    return true;
  }

  bool end_array() override {
    if (mode_ == Mode::Merges) {
      if (merge_depth_ == 2) {
        if (pair_.size() != 2) throw bad_merge("is neither \"a b\" nor [a, b]");
        doc_.merges.emplace_back(std::move(pair_[0]), std::move(pair_[1]));
        merge_depth_ = 1;
      } else {
        mode_ = Mode::None;
      }
      return true;
    }
    stack_.pop_back();
    return true;
  }

  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception& e) override {
    throw file_error(origin_, std::string("malformed JSON: ") + e.what());
  }

 private:
  enum class Mode { None, Vocab, Merges };

  bool in_model() const { return model_ && !stack_.empty() && stack_.back() == model_; }

  // Places v in the current container; last_ points at it afterwards.
  bool value(json v) {
    if (mode_ == Mode::Merges) throw bad_merge("is neither \"a b\" nor [a, b]");
    if (mode_ == Mode::Vocab) throw file_error(origin_, "vocab entry '" + key_ + "' is not an id");
    if (stack_.empty()) {
      doc_.tree = std::move(v);
      last_ = &doc_.tree;
      return true;
    }
    json* top = stack_.back();
    if (top->is_array()) {
      top->push_back(std::move(v));
      last_ = &top->back();
    } else {
      json& slot = (*top)[key_];
      slot = std::move(v);
      last_ = &slot;
    }
    return true;
  }

  bool vocab_id(int64_t id) {
    doc_.vocab.emplace_back(std::move(key_), id);
    return true;
  }

  Error bad_merge(const std::string& what) const {
    return file_error(origin_, "merge " + std::to_string(doc_.merges.size()) + " " + what);
  }

  TokenizerJsonDoc& doc_;
  const std::string& origin_;
  std::vector<json*> stack_;
  json* model_ = nullptr;
  json* last_ = nullptr;
  std::string key_;
  Mode mode_ = Mode::None;
  int merge_depth_ = 0;
  std::vector<std::string> pair_;
};

}  // namespace

TokenizerJsonDoc read_tokenizer_json(std::string_view text, const std::string& origin) {
  TokenizerJsonDoc doc;
  Reader reader(doc, origin);
  json::sax_parse(text.data(), text.data() + text.size(), &reader);
  return doc;
}

}  // namespace dflash::tok
