// The one-job-at-a-time draft pass: what a drafter without a batched forward does.
#include "models/drafter.h"

#include "util/timer.h"

namespace dflash {

void Drafter::draft_batch(const std::vector<DraftJob*>& jobs) const {
  for (DraftJob* j : jobs) {
    const double t0 = now_seconds();
    add_context(*j->state, j->context, j->context_n);
    const double t1 = now_seconds();
    if (proposes_tokens()) propose_tokens(*j->state, j->first, j->B, j->temperature, j->uniforms, *j->tokens);
    else propose(*j->state, j->first, j->B, j->logits);
    j->context_s = t1 - t0;
    j->block_s = now_seconds() - t1;
  }
}

}  // namespace dflash
