#pragma once
// What one sequence keeps between forward passes of a model: today the KV cache of its
// attention layers (models/kv_cache.h); for a hybrid family also the recurrent state of its
// linear-attention layers. Decoding and the server hold sequences only through this interface:
// they never see a KV cache, so a family whose state cannot be rolled back by lowering a
// length (a recurrent state) plugs in without changing them.
//
// Rolling back: after a verify forward of B rows, the speculative loop keeps the rows of the
// accepted prefix and drops the rest (rollback). A KV cache can return to any length. A
// recurrent state can return only to lengths it kept a snapshot of: the model keeps one per
// row of the last forward called with ForwardArgs::rollback_rows (the verified rows), so any
// accepted prefix of a verify block is reachable; and it keeps one checkpoint where the
// generator asks for it (the end of a prompt less its last row), so a follow-up request that
// extends the conversation reuses the prompt. rollback_point() says how far back a state can
// go, which is also what a follow-up request can reuse of the previous prompt.
//
// Several sequences go through one forward pass as a batch of (state, rows) pairs
// (models/target_model.h); each state belongs to the model that made it.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace dflash {

// A copy of a state at one length, in host memory, for a prompt cache that outlives the
// state (the server's --cache-ram). `layout` names the geometry it was taken from; a state
// restores only a snapshot of its own layout.
struct StateSnapshot {
  std::string layout;
  int length = 0;
  std::vector<uint8_t> kv;        // attention rows [0, length), the family's own order
  std::vector<float> recurrent;   // a hybrid's linear-layer states at `length`
  // Whether a restored state can roll back to any shorter length (a KV cache), or only to
  // `length` itself (a recurrent state: a later prompt must extend all of it).
  bool any_prefix = false;
  size_t bytes() const { return kv.size() + recurrent.size() * sizeof(float); }
};

class SequenceState {
 public:
  virtual ~SequenceState() = default;
  // Positions held: the rows [0, length()) have gone through the model.
  virtual int length() const = 0;
  // The most positions this state can hold (the context size it was made with).
  virtual int capacity() const = 0;
  // The greatest length <= min(n, length()) this state can roll back to: that bound itself
  // for a KV cache; for a recurrent state, the greatest of its length, the rows of its last
  // verify block and its checkpoint that is <= the bound, else 0 (start over).
  virtual int rollback_point(int n) const = 0;
  // Keeps positions [0, n) and drops the rest; n must be rollback_point(n). Lengths above
  // length() are ignored.
  virtual void rollback(int n) = 0;
  // Bytes of memory this state holds (for capacity planning and /metrics).
  virtual size_t bytes() const = 0;
  // Whether keep_checkpoint() does anything: a state that can return only to lengths it kept
  // (a recurrent state). The generator then stops a prompt's prefill one row short of its end
  // to keep one there (the last row still goes through, for its logits).
  virtual bool wants_checkpoints() const { return false; }
  // Keeps the state at the current length reachable by rollback until the state rolls back
  // below it.
  virtual void keep_checkpoint() {}

  // The greatest length a snapshot can be taken at, the one most useful to a later request:
  // a KV cache's length; a recurrent state's checkpoint (where the next turn's prompt parts
  // from this one), else the length of its base states. 0: nothing worth keeping.
  virtual int snapshot_point() const { return 0; }
  // The state at length n (n == snapshot_point(), or any length a KV cache holds); null when
  // this state cannot give one there.
  virtual std::unique_ptr<StateSnapshot> snapshot(int n) const { return nullptr; }
  // Becomes the snapshot's state (length, rows, recurrent states); false, unchanged, when the
  // snapshot is of another layout or longer than this state's capacity.
  virtual bool restore(const StateSnapshot& s) { return false; }
};

}  // namespace dflash
