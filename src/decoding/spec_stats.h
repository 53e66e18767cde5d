#pragma once
// What a speculative request reports: enough for a user to see whether speculation paid.
#include <string>
#include <vector>

namespace dflash {

struct SpecStats {
  int block_size = 0;             // the largest block asked for
  long drafted = 0, accepted = 0; // draft tokens proposed / accepted by the target
  long steps = 0;                 // speculative steps (draft + verify)
  long plain_steps = 0;           // steps decoded without drafting (controller chose 0)
  std::vector<int> accept_lens;   // accepted draft tokens a per speculative step, in order
  std::vector<long> histogram;    // histogram of a + 1 over 0..block_size
  double draft_s = 0, verify_s = 0;
  std::string speculation = "on"; // on | off | fallback:<reason>
  long nonfinite_steps = 0;

  double accept_rate() const { return drafted ? double(accepted) / double(drafted) : 0.0; }
  double accept_len() const {  // tau: tokens emitted per speculative step
    return steps ? double(accepted + steps) / double(steps) : 0.0;
  }
};

}  // namespace dflash
