#include "decoding/grammar/json_number_grammar.h"

#include <cmath>
#include <string>
#include <vector>

#include "util/error.h"

namespace dflash {

using Expr = GrammarBuilder::Expr;

namespace {

constexpr uint64_t kMaxMagnitude = 999999999999999999ull;  // kMaxIntegerDigits nines

Expr digit(GrammarBuilder& b) { return b.byte_range('0', '9'); }

bool all_of(const std::string& s, char c) { return s.find_first_not_of(c) == std::string::npos; }

// Digit strings of one length between lo and hi (same length, lo <= hi), leading zeros
// allowed. The first digit splits the range into a low edge (lo's first digit, then the rest
// from lo's rest up), a free middle and a high edge; an edge whose rest is all 0s (low) or
// all 9s (high) joins the middle. Only the edges recurse, and only one way each, so the size
// is linear in the length.
Expr fixed_width_range(GrammarBuilder& b, const std::string& lo, const std::string& hi) {
  if (lo == hi) return b.literal(lo);
  if (all_of(lo, '0') && all_of(hi, '9')) return b.repeat(digit(b), int(lo.size()), int(lo.size()));
  if (lo.size() == 1) return b.byte_range(uint8_t(lo[0]), uint8_t(hi[0]));
  const std::string lo_rest = lo.substr(1), hi_rest = hi.substr(1);
  if (lo[0] == hi[0]) return b.seq({b.literal(lo.substr(0, 1)), fixed_width_range(b, lo_rest, hi_rest)});
  const size_t m = lo_rest.size();
  std::vector<Expr> options;
  char first = lo[0], last = hi[0];
  if (!all_of(lo_rest, '0')) {
    options.push_back(b.seq({b.literal(lo.substr(0, 1)), fixed_width_range(b, lo_rest, std::string(m, '9'))}));
    ++first;
  }
  if (!all_of(hi_rest, '9')) {
    options.push_back(b.seq({b.literal(hi.substr(0, 1)), fixed_width_range(b, std::string(m, '0'), hi_rest)}));
    --last;
  }
  if (first <= last) {
    options.push_back(b.seq({b.byte_range(uint8_t(first), uint8_t(last)), b.repeat(digit(b), int(m), int(m))}));
  }
  return b.alt(options);
}

// Non-negative integers in [lo, hi] without leading zeros: the numbers as long as lo from lo
// up, every length strictly between in one piece ([1-9] then digits), the numbers as long as
// hi up to hi.
Expr unsigned_range(GrammarBuilder& b, uint64_t lo, uint64_t hi) {
  const std::string l = std::to_string(lo), h = std::to_string(hi);
  if (l.size() == h.size()) return fixed_width_range(b, l, h);
  std::vector<Expr> options;
  options.push_back(fixed_width_range(b, l, std::string(l.size(), '9')));
  const int between_min = int(l.size()), between_max = int(h.size()) - 2;  // digits after the first
  if (between_min <= between_max) {
    options.push_back(b.seq({b.byte_range('1', '9'), b.repeat(digit(b), between_min, between_max)}));
  }
  options.push_back(fixed_width_range(b, "1" + std::string(h.size() - 1, '0'), h));
  return b.alt(options);
}

Expr fraction(GrammarBuilder& b, Expr digits_class) {
  return b.seq({b.literal("."), b.repeat(digits_class, 1, kMaxFractionDigits)});
}

// "." then digits with at least one that is not zero.
Expr nonzero_fraction(GrammarBuilder& b) {
  return b.seq({b.literal("."), b.repeat(b.literal("0"), 0, kMaxFractionDigits - 1), b.byte_range('1', '9'),
                b.repeat(digit(b), 0, kMaxFractionDigits - 1)});
}

// Decimals m >= 0 (no sign) with a <= m (a < m when a_excl) and m <= z (m < z when z_excl),
// a and z whole. Returns false when there are none.
bool magnitude_range(GrammarBuilder& b, uint64_t a, bool a_excl, uint64_t z, bool z_excl, std::vector<Expr>& out) {
  if (a > z) return false;
  const size_t before = out.size();
  const Expr any_fraction = b.optional(fraction(b, digit(b)));
  // Whole parts a (or a + 1) .. z - 1: any fraction stays below z.
  const uint64_t first = a_excl ? a + 1 : a;
  if (z > 0 && first <= z - 1) out.push_back(b.seq({unsigned_range(b, first, z - 1), any_fraction}));
  // a itself, exclusive: only with a fraction that is not zero.
  if (a_excl && a < z) out.push_back(b.seq({b.literal(std::to_string(a)), nonzero_fraction(b)}));
  // z itself, inclusive: only with a fraction of zeros.
  if (!z_excl && (a < z || !a_excl)) {
    out.push_back(b.seq({b.literal(std::to_string(z)), b.optional(fraction(b, b.literal("0")))}));
  }
  return out.size() > before;
}

}  // namespace

Expr json_integer(GrammarBuilder& b, std::optional<int64_t> lo, std::optional<int64_t> hi) {
  if (!lo && !hi) {  // the common case, in its simplest form
    return b.alt({b.literal("0"), b.seq({b.optional(b.literal("-")), b.byte_range('1', '9'),
                                         b.repeat(digit(b), 0, kMaxIntegerDigits - 1)})});
  }
  const int64_t cap = int64_t(kMaxMagnitude);
  const int64_t l = lo ? std::max(*lo, -cap) : -cap;
  const int64_t h = hi ? std::min(*hi, cap) : cap;
  if (l > h) throw Error("json schema: no integer satisfies the minimum/maximum");
  std::vector<Expr> options;
  if (h >= 0) options.push_back(unsigned_range(b, uint64_t(std::max<int64_t>(l, 0)), uint64_t(h)));
  if (l < 0) {  // -(magnitudes from max(1, -h) to -l)
    const uint64_t first = uint64_t(h < 0 ? -h : 1), last = uint64_t(-l);
    options.push_back(b.seq({b.literal("-"), unsigned_range(b, first, last)}));
  }
  return b.alt(options);
}

Expr json_number(GrammarBuilder& b, std::optional<double> lo, bool lo_exclusive, std::optional<double> hi,
                 bool hi_exclusive) {
  if (!lo && !hi) {
    const Expr integer = b.alt({b.literal("0"), b.seq({b.byte_range('1', '9'), b.repeat(digit(b), 0, kMaxIntegerDigits - 1)})});
    const Expr exponent = b.seq({b.byte_class(ByteSet().add_chars("eE")), b.optional(b.byte_class(ByteSet().add_chars("+-"))),
                                 b.repeat(digit(b), 1, 3)});
    return b.seq({b.optional(b.literal("-")), integer, b.optional(fraction(b, digit(b))), b.optional(exponent)});
  }
  const double cap = double(kMaxMagnitude);
  for (const auto& bound : {lo, hi}) {
    if (bound && (!std::isfinite(*bound) || std::floor(*bound) != *bound)) {
      throw Error("json schema: a number's minimum/maximum must be a whole number to be enforced (got " +
                  std::to_string(*bound) + "); use \"type\": \"integer\" or whole bounds");
    }
  }
  // Outside the digit limit a bound changes nothing: clamp it (inclusive at the limit).
  double l = lo ? *lo : -cap, h = hi ? *hi : cap;
  bool l_excl = lo && lo_exclusive, h_excl = hi && hi_exclusive;
  if (l < -cap) l = -cap, l_excl = false;
  if (h > cap) h = cap, h_excl = false;
  std::vector<Expr> options;
  // x >= 0: magnitudes from max(l, 0) to h.
  if (h >= 0) {
    const bool from_zero = l < 0;
    magnitude_range(b, uint64_t(from_zero ? 0 : l), !from_zero && l_excl, uint64_t(h), h_excl, options);
  }
  // x < 0, x = -m with m > 0: -h <= m <= -l.
  if (l < 0) {
    std::vector<Expr> negative;
    const bool from_zero = h >= 0;  // m > 0 then
    if (magnitude_range(b, uint64_t(from_zero ? 0 : -h), from_zero || h_excl, uint64_t(-l), l_excl, negative)) {
      options.push_back(b.seq({b.literal("-"), b.alt(negative)}));
    }
  }
  if (options.empty()) throw Error("json schema: no number satisfies the minimum/maximum");
  return b.alt(options);
}

}  // namespace dflash
