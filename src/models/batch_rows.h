#pragma once
// Pieces of a family's forward_batch that do not depend on the family (models/target_model.h):
// checking a whole batch before any state changes, and copying the tapped layers' rows out.
#include <cstddef>
#include <functional>
#include <span>

#include "models/target_model.h"

namespace dflash {

// Throws dflash::Error unless every sequence is one of this model's states (`ours`), has a
// non-negative row count that fits its capacity, appears once, and holds only token ids below
// `vocab`. Returns the batch's total row count.
size_t check_batch(std::span<SequenceRows> batch, int vocab, const std::function<bool(const SequenceState*)>& ours);

// After layer `layer`: each sequence that taps it gets its rows of x ([rows][hidden], the
// sequences' rows stacked in batch order) in its capture buffer.
void capture_layer(std::span<SequenceRows> batch, int layer, const float* x, int hidden);

}  // namespace dflash
