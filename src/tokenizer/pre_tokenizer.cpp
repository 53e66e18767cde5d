#include "tokenizer/pre_tokenizer.h"

#include "tokenizer/byte_level.h"
#include "util/error.h"

namespace dflash::tok {
namespace {

SplitBehavior parse_behavior(const std::string& s, const std::string& origin) {
  if (s == "Removed") return SplitBehavior::Removed;
  if (s == "Isolated") return SplitBehavior::Isolated;
  if (s == "MergedWithPrevious") return SplitBehavior::MergedWithPrevious;
  if (s == "MergedWithNext") return SplitBehavior::MergedWithNext;
  if (s == "Contiguous") return SplitBehavior::Contiguous;
  throw file_error(origin, "Split behavior '" + s + "' is not known");
}

// Hugging Face's SplitDelimiterBehavior applied on the fly: spans arrive in order, each flagged
// as a match or not, and a merged piece is only emitted once nothing more can join it.
class BehaviorStream {
 public:
  BehaviorStream(std::string_view text, SplitBehavior behavior,
                 const std::function<void(std::string_view)>& emit)
      : text_(text), behavior_(behavior), emit_(emit) {}

  void span(size_t start, size_t end, bool is_match) {
    // Empty spans (empty regex matches) still count: they end pieces, as in Hugging Face.
    switch (behavior_) {
      case SplitBehavior::Isolated:
        out(start, end);
        break;
      case SplitBehavior::Removed:
        if (!is_match) out(start, end);
        break;
      case SplitBehavior::Contiguous:
        if (has_pending_ && is_match == previous_match_) {
          pending_end_ = end;
        } else {
          restart(start, end);
        }
        break;
      case SplitBehavior::MergedWithPrevious:
        if (has_pending_ && is_match && !previous_match_) {
          pending_end_ = end;
        } else {
          restart(start, end);
        }
        break;
      case SplitBehavior::MergedWithNext:
        // A match joins the piece after it, unless that piece is a match too.
        if (has_pending_ && previous_match_ && !is_match) {
          pending_end_ = end;
          flush();
        } else {
          restart(start, end);
        }
        break;
    }
    previous_match_ = is_match;
  }

  void finish() { flush(); }

 private:
  void out(size_t start, size_t end) {
    if (end > start) emit_(text_.substr(start, end - start));
  }
  void flush() {
    if (has_pending_) out(pending_start_, pending_end_);
    has_pending_ = false;
  }
  void restart(size_t start, size_t end) {
    flush();
    has_pending_ = true;
    pending_start_ = start;
    pending_end_ = end;
  }

  std::string_view text_;
  SplitBehavior behavior_;
  const std::function<void(std::string_view)>& emit_;
  bool has_pending_ = false, previous_match_ = false;
  size_t pending_start_ = 0, pending_end_ = 0;
};

}  // namespace

void SplitStep::split(std::string_view text,
                      const std::function<void(std::string_view)>& emit) const {
  if (text.empty()) return;
  BehaviorStream stream(text, behavior_, emit);
  size_t prev = 0;
  auto on_match = [&](size_t start, size_t end) {
    if (prev != start) stream.span(prev, start, invert_);
    stream.span(start, end, !invert_);
    prev = end;
  };
  if (regex_) {
    regex_->for_each_match(text, on_match);
  } else if (!literal_.empty()) {
    for (size_t at = text.find(literal_); at != std::string_view::npos;
         at = text.find(literal_, at + literal_.size())) {
      on_match(at, at + literal_.size());
    }
  }
  if (prev != text.size()) stream.span(prev, text.size(), invert_);
  stream.finish();
}

void PreTokenizer::add_json(const nlohmann::json& j, const std::string& origin) {
  if (!j.is_object() || !j.contains("type") || !j["type"].is_string()) {
    throw file_error(origin, "pre_tokenizer must be an object with a \"type\"");
  }
  const std::string type = j["type"];
  if (saw_byte_level_) {
    throw file_error(origin, "pre_tokenizer '" + type +
                                 "' after ByteLevel is not supported (ByteLevel must be last)");
  }
  if (type == "Sequence") {
    const auto& list = j.value("pretokenizers", nlohmann::json::array());
    if (!list.is_array()) throw file_error(origin, "pre_tokenizer Sequence without a list");
    for (const auto& p : list) add_json(p, origin);
  } else if (type == "Split") {
    const auto& pat = j.value("pattern", nlohmann::json::object());
    const SplitBehavior behavior = parse_behavior(j.value("behavior", "Isolated"), origin);
    const bool invert = j.value("invert", false);
    if (pat.contains("Regex") && pat["Regex"].is_string()) {
      steps_.push_back({std::make_unique<SplitStep>(
          std::make_unique<Regex>(pat["Regex"].get<std::string>(), origin), behavior, invert)});
    } else if (pat.contains("String") && pat["String"].is_string()) {
      steps_.push_back(
          {std::make_unique<SplitStep>(pat["String"].get<std::string>(), behavior, invert)});
    } else {
      throw file_error(origin, "Split pre_tokenizer needs a pattern {\"Regex\"} or {\"String\"}");
    }
  } else if (type == "ByteLevel") {
    saw_byte_level_ = true;
    if (j.value("add_prefix_space", false)) steps_.push_back({nullptr});
    if (j.value("use_regex", true)) {
      steps_.push_back({std::make_unique<SplitStep>(
          std::make_unique<Regex>(kGpt2SplitPattern, origin), SplitBehavior::Isolated, false)});
    }
  } else {
    throw file_error(origin, "pre_tokenizer '" + type +
                                 "' is not supported (only Split and ByteLevel, in a Sequence)");
  }
}

PreTokenizer PreTokenizer::from_json(const nlohmann::json& j, const std::string& origin) {
  PreTokenizer p;
  if (!j.is_null()) p.add_json(j, origin);
  if (!p.saw_byte_level_) {
    throw file_error(origin,
                     "pre_tokenizer has no ByteLevel step: only byte-level BPE is supported");
  }
  return p;
}

void PreTokenizer::run(size_t step, std::string_view piece,
                       const std::function<void(std::string_view)>& emit) const {
  if (step == steps_.size()) {
    emit(piece);
    return;
  }
  const Step& st = steps_[step];
  if (st.split) {
    st.split->split(piece, [&](std::string_view sub) { run(step + 1, sub, emit); });
  } else if (piece.front() == ' ') {
    run(step + 1, piece, emit);
  } else {
    const std::string prefixed = " " + std::string(piece);
    run(step + 1, prefixed, emit);
  }
}

void PreTokenizer::split(std::string_view text,
                         const std::function<void(std::string_view)>& emit) const {
  if (!text.empty()) run(0, text, emit);
}

}  // namespace dflash::tok
