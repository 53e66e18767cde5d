#pragma once
// JSON numbers, optionally within bounds that the grammar enforces exactly.
//
// Every number the grammar allows has a bounded length, so a model cannot run on digits
// forever: at most kMaxIntegerDigits digits before the point, kMaxFractionDigits after it,
// and exponents of up to 3 digits (only where there are no bounds).
#include <cstdint>
#include <optional>

#include "decoding/grammar/grammar.h"

namespace dflash {

constexpr int kMaxIntegerDigits = 18;   // |integer part| <= 999,999,999,999,999,999
constexpr int kMaxFractionDigits = 16;

// Integers in [lo, hi] (no bound: the digit limit), in canonical form: no leading zeros,
// no "-0", no fraction or exponent. Throws dflash::Error when the range is empty.
GrammarBuilder::Expr json_integer(GrammarBuilder& b, std::optional<int64_t> lo, std::optional<int64_t> hi);

// Numbers x with lo <= x (lo < x when lo_exclusive) and x <= hi (x < hi when hi_exclusive).
// Bounds must be whole numbers (a fractional bound throws dflash::Error: the grammar could
// not enforce it exactly). Without bounds, any JSON number including exponents; with bounds,
// plain decimals only (every one of which is checked against the bounds by the grammar).
GrammarBuilder::Expr json_number(GrammarBuilder& b, std::optional<double> lo, bool lo_exclusive,
                                 std::optional<double> hi, bool hi_exclusive);

}  // namespace dflash
