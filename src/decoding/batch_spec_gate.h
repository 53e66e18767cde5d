#pragma once
// Whether the slots of a batch may speculate, decided by measured goodput: tokens emitted per
// second by the whole batch. A draft pass of one slot holds up every other slot's next pass,
// and a verify block adds rows to a pass the others share, so a draft that pays for one
// stream can lower the aggregate of several. Each slot's own SpecController still chooses its
// block size from its own measurements; this gate only says whether drafting is allowed at all.
//
// It alternates measurement windows with speculation allowed and not (each at least
// window_passes passes and window_s seconds, with the same number of slots active throughout:
// a window in which a slot joins or leaves starts over), keeps the better setting for
// exploit_windows windows, then measures again, so a change of text or of load is followed.
// The decision is kept per number of active slots: when a slot joins or leaves, the gate goes
// back to what it last decided for the new number (a server's slots come and go all the
// time), and measures only a number it has not seen.
// With one active slot it stands aside (allowed): the slot's controller decides alone.
// Outputs never depend on it (speculation is lossless); only speed and the drafted counts do.
#include <atomic>
#include <cstdint>
#include <map>

namespace dflash {

class BatchSpecGate {
 public:
  BatchSpecGate(double window_s = 0.5, int window_passes = 12, int exploit_windows = 8);

  bool allowed() const { return allowed_.load(std::memory_order_relaxed); }
  // Tokens emitted by any slot (thread-safe).
  void add_tokens(int n) { tokens_.fetch_add(uint64_t(n), std::memory_order_relaxed); }
  // After every pass, by one thread at a time: the slots active now and the time.
  void after_pass(int active, double now);

  // For /metrics and tests: the goodputs of the latest measurement (tokens/s; 0: none yet).
  double goodput_on() const { return goodput_on_; }
  double goodput_off() const { return goodput_off_; }
  uint64_t decisions() const { return decisions_; }

 private:
  enum class Phase { MeasureOn, MeasureOff, Exploit };
  struct Decision {
    bool allowed = true;
    double on = 0, off = 0;
  };
  void start_window(double now);

  const double window_s_;
  const int window_passes_, exploit_windows_;
  std::atomic<bool> allowed_{true};
  std::atomic<uint64_t> tokens_{0};
  Phase phase_ = Phase::MeasureOn;
  int active_ = 0, passes_ = 0, exploited_ = 0;
  double window_t0_ = 0;
  uint64_t window_tokens0_ = 0;
  double goodput_on_ = 0, goodput_off_ = 0;
  uint64_t decisions_ = 0;
  std::map<int, Decision> by_active_;
};

}  // namespace dflash
