#include "decoding/batch_spec_gate.h"

namespace dflash {

BatchSpecGate::BatchSpecGate(double window_s, int window_passes, int exploit_windows)
    : window_s_(window_s), window_passes_(window_passes), exploit_windows_(exploit_windows) {}

void BatchSpecGate::start_window(double now) {
  window_t0_ = now;
  window_tokens0_ = tokens_.load(std::memory_order_relaxed);
  passes_ = 0;
}

void BatchSpecGate::after_pass(int active, double now) {
  if (active != active_) {
    // Goodputs of different batch sizes do not compare: back to this size's last decision, or
    // a measurement from the start.
    active_ = active;
    auto it = by_active_.find(active);
    if (it != by_active_.end()) {
      phase_ = Phase::Exploit;
      exploited_ = 0;
      allowed_.store(it->second.allowed);
      goodput_on_ = it->second.on;
      goodput_off_ = it->second.off;
    } else {
      phase_ = Phase::MeasureOn;
      allowed_.store(true);
    }
    start_window(now);
    return;
  }
  if (active <= 1) return;
  ++passes_;
  const double elapsed = now - window_t0_;
  if (passes_ < window_passes_ || elapsed < window_s_) return;
  const double goodput = double(tokens_.load(std::memory_order_relaxed) - window_tokens0_) / elapsed;
  switch (phase_) {
    case Phase::MeasureOn:
      goodput_on_ = goodput;
      phase_ = Phase::MeasureOff;
      allowed_.store(false);
      break;
    case Phase::MeasureOff:
      goodput_off_ = goodput;
      phase_ = Phase::Exploit;
      exploited_ = 0;
      ++decisions_;
      // Drafting must clearly pay to stay on (2%, as a slot's controller asks); ties go to plain.
      allowed_.store(goodput_on_ > goodput_off_ * 1.02);
      by_active_[active] = Decision{allowed_.load(), goodput_on_, goodput_off_};
      break;
    case Phase::Exploit:
      if (++exploited_ >= exploit_windows_) {
        phase_ = Phase::MeasureOn;
        allowed_.store(true);
      }
      break;
  }
  start_window(now);
}

}  // namespace dflash
