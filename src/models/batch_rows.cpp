#include "models/batch_rows.h"

#include <cstring>
#include <string>

#include "util/error.h"

namespace dflash {

size_t check_batch(std::span<SequenceRows> batch, int vocab, const std::function<bool(const SequenceState*)>& ours) {
  size_t N = 0;
  for (const SequenceRows& s : batch) {
    if (!s.state || !ours(s.state)) throw Error("forward: a sequence state that this model did not make");
    if (s.rows.n < 0) throw Error("forward: a negative row count");
    if (s.state->length() + s.rows.n > s.state->capacity())
      throw Error("context full: " + std::to_string(s.state->length() + s.rows.n) +
                  " tokens exceed the context size " + std::to_string(s.state->capacity()));
    for (const SequenceRows& o : batch)
      if (&o != &s && o.state == s.state) throw Error("forward: a sequence appears twice in one batch");
    for (int i = 0; i < s.rows.n; ++i)
      if (s.rows.tokens[i] < 0 || s.rows.tokens[i] >= vocab)
        throw Error("token id " + std::to_string(s.rows.tokens[i]) + " is outside the vocabulary (size " +
                    std::to_string(vocab) + ")");
    N += size_t(s.rows.n);
  }
  return N;
}

void capture_layer(std::span<SequenceRows> batch, int layer, const float* x, int hidden) {
  const size_t H = size_t(hidden);
  size_t r = 0;
  for (const SequenceRows& s : batch) {
    const ForwardArgs& a = s.rows;
    const size_t n_cap = a.capture_layers ? a.capture_layers->size() : 0;
    for (size_t t = 0; t < n_cap; ++t)
      if ((*a.capture_layers)[t] == layer)
        for (int i = 0; i < a.n; ++i)
          std::memcpy(a.capture + (size_t(i) * n_cap + t) * H, x + (r + size_t(i)) * H, sizeof(float) * H);
    r += size_t(a.n);
  }
}

void batch_logits(std::span<SequenceRows> batch, const float* x, int hidden, int vocab,
                  const std::function<void(const float*, int, float*)>& head, BatchLogitsBuffers& buf) {
  const size_t H = size_t(hidden), V = size_t(vocab);
  auto from_of = [](const ForwardArgs& a) { return a.logits_from < 0 ? a.n - 1 : a.logits_from; };
  size_t rows = 0, with_logits = 0;
  for (const SequenceRows& s : batch)
    if (s.rows.logits && s.rows.n > 0 && from_of(s.rows) < s.rows.n) {
      rows += size_t(s.rows.n - from_of(s.rows));
      ++with_logits;
    }
  if (rows == 0) return;
  if (with_logits == 1) {
    size_t r = 0;
    for (const SequenceRows& s : batch) {
      const ForwardArgs& a = s.rows;
      const int from = from_of(a);
      if (a.logits && a.n > 0 && from < a.n) head(x + (r + size_t(from)) * H, a.n - from, a.logits);
      r += size_t(a.n);
    }
    return;
  }
  buf.hidden.resize(rows * H);
  buf.logits.resize(rows * V);
  size_t r = 0, g = 0;
  for (const SequenceRows& s : batch) {
    const ForwardArgs& a = s.rows;
    const int from = from_of(a);
    if (a.logits && a.n > 0 && from < a.n) {
      const size_t k = size_t(a.n - from);
      std::memcpy(buf.hidden.data() + g * H, x + (r + size_t(from)) * H, sizeof(float) * k * H);
      g += k;
    }
    r += size_t(a.n);
  }
  head(buf.hidden.data(), int(rows), buf.logits.data());
  g = 0;
  for (const SequenceRows& s : batch) {
    const ForwardArgs& a = s.rows;
    const int from = from_of(a);
    if (a.logits && a.n > 0 && from < a.n) {
      const size_t k = size_t(a.n - from);
      std::memcpy(a.logits, buf.logits.data() + g * V, sizeof(float) * k * V);
      g += k;
    }
  }
}

}  // namespace dflash
