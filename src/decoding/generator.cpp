#include "decoding/generator.h"

#include <algorithm>

#include "util/error.h"
#include "util/timer.h"

namespace dflash {

const char* finish_reason_name(FinishReason r) {
  switch (r) {
    case FinishReason::Stop: return "stop";
    case FinishReason::Length: return "length";
    case FinishReason::Cancelled: return "cancelled";
    default: return "none";
  }
}

Generator::Generator(const TargetModel& model, int ctx_size) : model_(model), state_(model.new_state(ctx_size)) {}

void Generator::start(const std::vector<int32_t>& prompt, const GenerateParams& params) {
  if (prompt.empty()) throw Error("the prompt is empty");
  if (params.max_tokens < 0) throw Error("max_tokens must not be negative");
  if (int64_t(prompt.size()) + 1 > state_->capacity())
    throw Error("the prompt has " + std::to_string(prompt.size()) + " tokens, more than the context size of " +
                std::to_string(state_->capacity()) + " allows");
  for (int32_t t : prompt)
    if (t < 0 || t >= model_.config().vocab)
      throw Error("prompt token id " + std::to_string(t) + " is outside the vocabulary (size " +
                  std::to_string(model_.config().vocab) + ")");
  params_ = params;
  params_.chunk_size = std::max(1, params.chunk_size);
  sampler_ = Sampler(params.sampling);
  // Reuse the cached prefix this context already holds (a follow-up turn of a conversation),
  // as far back as the state can return to.
  size_t common = 0;
  const size_t cached = size_t(state_->length());
  while (common < cached && common < tokens_.size() && common < prompt.size() - 1 && tokens_[common] == prompt[common]) ++common;
  state_->rollback(state_->rollback_point(int(common)));
  cached_tokens_ = state_->length();
  tokens_ = prompt;
  n_prompt_ = int(prompt.size());
  n_generated_ = 0;
  logprobs_.clear();
  started_ = true;
  prefilled_ = false;
  finish_ = FinishReason::None;
  timings_ = Timings{};
  timings_.prompt_tokens = n_prompt_;
  cancelled_.store(false);
  t_start_ = now_seconds();
}

int Generator::checkpoint_row() const {
  if (!state_->wants_checkpoints()) return n_prompt_;
  return params_.checkpoint_at > 0 && params_.checkpoint_at < n_prompt_ ? params_.checkpoint_at : n_prompt_ - 1;
}

void Generator::prefill() {
  const int vocab = model_.config().vocab;
  logits_.resize(size_t(vocab));
  const double t0 = now_seconds();
  int pos = state_->length();
  // The chunk that reaches the prompt checkpoint stops there; batch invariance keeps the bits.
  const int stop = checkpoint_row();
  while (pos < n_prompt_) {
    const int n = std::min(prefill_chunk(), (pos < stop ? stop : n_prompt_) - pos);
    ForwardArgs a;
    a.tokens = tokens_.data() + pos;
    a.n = n;
    a.logits_from = pos + n == n_prompt_ ? n - 1 : n;  // logits only for the prompt's last row
    a.logits = logits_.data();
    run_forward(a);
    if (batcher_) batcher_->add_tokens(n, /*prompt=*/true);  // prompt rows read are the batch's work too (batch_pricing.h)
    pos += n;
    if (pos == stop && stop < n_prompt_) state_->keep_checkpoint();
  }
  timings_.prefill_s = now_seconds() - t0;
  prefilled_ = true;
}

const uint64_t* Generator::timed_mask(TokenConstraint& c) {
  const double t0 = now_seconds();
  const uint64_t* bits = c.allowed();
  timings_.mask_s += now_seconds() - t0;
  return bits;
}

bool Generator::timed_accept(TokenConstraint& c, int32_t t) {
  const double t0 = now_seconds();
  const bool ok = c.accept(t);
  timings_.mask_s += now_seconds() - t0;
  return ok;
}

std::unique_ptr<GeneratorSnapshot> Generator::save() const {
  const int n = std::min(state_->snapshot_point(), int(tokens_.size()));
  if (n <= 0) return nullptr;
  auto s = std::make_unique<GeneratorSnapshot>();
  s->target = state_->snapshot(n);
  if (!s->target) return nullptr;
  s->tokens.assign(tokens_.begin(), tokens_.begin() + n);
  return s;
}

bool Generator::restore(const GeneratorSnapshot& s) {
  if (!s.target || int(s.tokens.size()) != s.target->length || !state_->restore(*s.target)) return false;
  tokens_ = s.tokens;
  return true;
}

void Generator::run_forward(const ForwardArgs& a) {
  if (batcher_) batcher_->forward(*state_, a);
  else model_.forward(*state_, a);
}

double Generator::run_compute(const std::function<void()>& f) {
  double spent = 0;
  auto timed = [&] {
    const double t0 = now_seconds();
    f();
    spent = now_seconds() - t0;
  };
  if (batcher_) batcher_->compute(timed);
  else timed();
  return spent;
}

bool Generator::is_stop(int32_t t) const {
  if (params_.ignore_eos) return false;
  return std::find(params_.stop_ids.begin(), params_.stop_ids.end(), t) != params_.stop_ids.end();
}

bool Generator::emit(int32_t t, const float* row, std::vector<int32_t>& out, bool constraint_moved) {
  if (params_.constraint && !constraint_moved) timed_accept(*params_.constraint, t);
  if (params_.logprobs >= 0) logprobs_.push_back(token_logprobs(row, model_.config().vocab, t, params_.logprobs));
  tokens_.push_back(t);
  out.push_back(t);
  ++n_generated_;
  if (batcher_) batcher_->add_tokens(1);
  timings_.generated_tokens = n_generated_;
  if (n_generated_ == 1) {
    t_first_ = now_seconds();
    timings_.ttft_s = t_first_ - t_start_;
  } else {
    timings_.decode_s = now_seconds() - t_first_;
  }
  if (is_stop(t)) {
    finish_ = FinishReason::Stop;
    return true;
  }
  if (n_generated_ >= params_.max_tokens) {
    finish_ = FinishReason::Length;
    return true;
  }
  return false;
}

void Generator::force_tokens(const std::vector<int32_t>& ids) {
  for (int32_t t : ids) {
    if (params_.constraint) timed_accept(*params_.constraint, t);
    tokens_.push_back(t);
    ++n_generated_;
  }
  timings_.generated_tokens = n_generated_;
  if (n_generated_ >= params_.max_tokens) finish_ = FinishReason::Length;
}

bool Generator::may_step() {
  if (!started_ || finish_ != FinishReason::None) return false;
  if (cancelled_.load()) {
    finish_ = FinishReason::Cancelled;
    return false;
  }
  if (params_.max_tokens == 0) {
    finish_ = FinishReason::Length;
    return false;
  }
  return true;
}

bool Generator::step(std::vector<int32_t>& out) {
  if (!may_step()) return false;
  if (!prefilled_) {
    prefill();
  } else {
    if (int(tokens_.size()) > state_->capacity()) {
      finish_ = FinishReason::Length;  // context full
      return false;
    }
    ForwardArgs a;
    a.tokens = tokens_.data() + state_->length();
    a.n = pending_rows();
    a.logits = logits_.data();
    run_forward(a);
  }
  const int32_t t =
      sampler_.sample(logits_.data(), model_.config().vocab, tokens_, uint64_t(n_generated_), allowed_now());
  return !emit(t, logits_.data(), out);
}

}  // namespace dflash
