#pragma once
// Pieces of a family's forward_batch that do not depend on the family (models/target_model.h):
// checking a whole batch before any state changes, and copying the tapped layers' rows out.
#include <cstddef>
#include <functional>
#include <span>
#include <vector>

#include "models/target_model.h"

namespace dflash {

// Throws dflash::Error unless every sequence is one of this model's states (`ours`), has a
// non-negative row count that fits its capacity, appears once, and holds only token ids below
// `vocab`. Returns the batch's total row count.
size_t check_batch(std::span<SequenceRows> batch, int vocab, const std::function<bool(const SequenceState*)>& ours);

// After layer `layer`: each sequence that taps it gets its rows of x ([rows][hidden], the
// sequences' rows stacked in batch order) in its capture buffer.
void capture_layer(std::span<SequenceRows> batch, int layer, const float* x, int hidden);

// Buffers batch_logits gathers into (a model's own: one forward at a time).
struct BatchLogitsBuffers {
  std::vector<float> hidden, logits;
};

// After the last layer: every sequence's logit rows (ForwardArgs::logits_from .. n) through
// `head` (the family's final norm and LM head, [rows][hidden] -> [rows][vocab]) in one call,
// so that the head's weights, a sixth of a small model's bytes, are read once per pass and not
// once per sequence; then each sequence's rows are copied to its own logits. A row's logits do
// not depend on the rows beside it (batch invariance), so they are the bits a call of its own
// gives. A batch with one sequence writes straight into its buffer.
void batch_logits(std::span<SequenceRows> batch, const float* x, int hidden, int vocab,
                  const std::function<void(const float*, int, float*)>& head, BatchLogitsBuffers& buf);

}  // namespace dflash
