#pragma once
// A TokenConstraint that follows a Grammar: the tokens allowed next are those whose bytes the
// grammar can take from here; the stop ids (end of sequence, end of turn) exactly when the
// grammar's root can be complete here. When it is complete and nothing else can follow, only
// the stop ids remain, so generation ends right after the last byte the grammar asks for.
//
//   GrammarBuilder b;
//   auto g = b.build(json_schema(b, schema));
//   auto table = std::make_shared<TokenTable>(token_bytes);        // once per model
//   auto cache = std::make_shared<MaskCache>(g, table);            // once per grammar
//   GrammarConstraint c(g, table, cache, {eos_id, im_end_id});
#include <memory>
#include <string_view>
#include <vector>

#include "decoding/grammar/grammar_matcher.h"
#include "decoding/grammar/token_mask.h"
#include "decoding/token_constraint.h"

namespace dflash {

class GrammarConstraint : public TokenConstraint {
 public:
  // Throws dflash::Error when the cache was made for another grammar or table, or a stop id
  // is outside the table's vocabulary.
  GrammarConstraint(std::shared_ptr<const Grammar> grammar, std::shared_ptr<const TokenTable> table,
                    std::shared_ptr<MaskCache> cache, std::vector<int32_t> stop_ids);

  const uint64_t* allowed() override;
  bool accept(int32_t token) override;
  std::unique_ptr<TokenConstraint> clone() const override;

  // Moves past raw bytes that are not a whole token (what a token ran past a trigger with:
  // triggered_constraint.h); false (and no change) when the grammar cannot take them.
  bool accept_bytes(std::string_view bytes);

  bool finished() const { return finished_; }  // a stop id was accepted
  bool can_end() const { return matcher_.can_end(); }
  const GrammarMatcher& matcher() const { return matcher_; }

 private:
  bool is_stop(int32_t t) const;
  void set_stop_bits(bool on);

  std::shared_ptr<const TokenTable> table_;
  std::shared_ptr<MaskCache> cache_;
  std::vector<int32_t> stop_ids_;
  GrammarMatcher matcher_;
  bool finished_ = false;
  bool mask_valid_ = false;
  std::vector<uint64_t> mask_;
};

}  // namespace dflash
