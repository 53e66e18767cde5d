#include "server/engine.h"

#include <algorithm>
#include <cstdio>

#include "decoding/spec_report.h"
#include "decoding/speculative.h"
#include "models/dflash/dflash_draft.h"
#include "server/stop_strings.h"
#include "server/think_cap.h"
#include "util/error.h"
#include "util/peak_rss.h"
#include "util/timer.h"

namespace dflash::server {

namespace {

// Models without a template of their own still get a usable chat form.
const char* kChatMLTemplate =
    "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + "
    "'<|im_end|>' + '\\n' }}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}";

void add_stats(SpecStats& sum, const SpecStats& s) {
  sum.block_size = std::max(sum.block_size, s.block_size);
  sum.drafted += s.drafted;
  sum.accepted += s.accepted;
  sum.steps += s.steps;
  sum.plain_steps += s.plain_steps;
  sum.accept_lens.insert(sum.accept_lens.end(), s.accept_lens.begin(), s.accept_lens.end());
  if (sum.histogram.size() < s.histogram.size()) sum.histogram.resize(s.histogram.size(), 0);
  for (size_t i = 0; i < s.histogram.size(); ++i) sum.histogram[i] += s.histogram[i];
  sum.draft_s += s.draft_s;
  sum.verify_s += s.verify_s;
  sum.nonfinite_steps += s.nonfinite_steps;
  if (s.speculation.rfind("fallback:", 0) == 0) sum.speculation = s.speculation;
}

// As many slots as a quarter of the memory free now holds of full-context states, 2 to 4:
// a slot's state is reserved at its full context (its pages are mapped as it fills).
int default_parallel(const TargetModel& model, const DFlashDraft* draft, int ctx) {
  size_t per_slot = model.new_state(ctx)->bytes();
  if (draft) per_slot += draft->new_state(ctx)->bytes();
  const size_t avail = available_memory_bytes();
  if (per_slot == 0 || avail == 0) return 2;
  return int(std::clamp<size_t>(avail / 4 / per_slot, 2, 4));
}

}  // namespace

Engine::Engine(LoadedModels loaded, const EngineOptions& opt)
    : opt_(opt), tok_(std::move(loaded.tokenizer)), model_(std::move(loaded.target)), draft_(std::move(loaded.draft)),
      stop_ids_(std::move(loaded.stop_ids)) {
  if (!tok_) throw file_error(opt.model_dir, "missing tokenizer.json (the server needs the model's tokenizer)");
  const ModelConfig& cfg = model_->config();
  ctx_size_ = opt.ctx_size > 0 ? opt.ctx_size : std::min(cfg.max_position > 0 ? cfg.max_position : 4096, 8192);
  prompt_checkpoints_ = model_->new_state(1)->wants_checkpoints();
  const int n_slots = opt.parallel > 0 ? opt.parallel : default_parallel(*model_, draft_.get(), ctx_size_);
  if (n_slots > 1) {
    batcher_ = std::make_unique<StepBatcher>(*model_, opt.prefill_budget);
  }
  slots_.resize(size_t(n_slots));
  if (opt.cache_ram > 0) cache_ = std::make_unique<PromptCache>(opt.cache_ram);
  for (Slot& slot : slots_) {
    if (draft_) {
      SpecParams sp;
      sp.block_size = opt.block_size > 0 ? opt.block_size : draft_->config().block_size;
      sp.adaptive = opt.adaptive;
      block_size_ = sp.block_size;
      auto sg = std::make_unique<SpeculativeGenerator>(*model_, *draft_, ctx_size_, sp);
      slot.spec = sg.get();
      slot.gen = std::move(sg);
    } else {
      slot.gen = std::make_unique<Generator>(*model_, ctx_size_);
    }
    slot.gen->set_batcher(batcher_.get());
  }
  think_ = ThinkTokens::from(*tok_);
  if (think_.known()) think_close_ = think_close_tokens(*tok_);

  std::string source = tok_->chat_template();
  if (source.empty()) {
    std::fprintf(stderr, "dflash serve: %s has no chat template; using ChatML\n", opt.model_dir.c_str());
    source = kChatMLTemplate;
  }
  template_ = std::make_unique<ChatTemplate>(source);
  tool_format_ = tool_format_from_template(source);
}

Engine::~Engine() = default;

const ModelConfig& Engine::config() const { return model_->config(); }
int Engine::threads() const { return model_->backend().threads(); }

std::optional<std::string> Engine::bos_text() const {
  if (!tok_->special().bos) return std::nullopt;
  return tok_->token_bytes(*tok_->special().bos);
}

std::optional<std::string> Engine::eos_text() const {
  if (tok_->special().eos.empty()) return std::nullopt;
  return tok_->token_bytes(tok_->special().eos.front());
}

StructuredOutput& Engine::structured() {
  std::lock_guard<std::mutex> lock(structured_mu_);
  if (!structured_) structured_ = std::make_unique<StructuredOutput>(*tok_, model_->config().vocab, stop_ids_, think_);
  return *structured_;
}

void Engine::shut_down() {
  shut_down_.store(true);
  for (Slot& s : slots_) s.gen->cancel();
}

// Which free slot a prompt takes: the one whose cached context it continues furthest, when it
// reuses at least kMinReuse tokens of it or half of what the slot holds (a follow-up turn, an
// agent's shared system prompt); else the least recently used, so that a new conversation,
// which shares only the template's first few tokens (<|im_start|>user\n) with every slot, does
// not evict a live one.
constexpr size_t kMinReuse = 16;
Engine::Slot& Engine::acquire(const std::vector<int32_t>& prompt) {
  std::lock_guard<std::mutex> lk(slots_mu_);
  Slot *best = nullptr, *lru = nullptr;
  size_t best_common = 0, lru_common = 0;
  for (Slot& s : slots_) {
    if (s.busy) continue;
    const std::vector<int32_t>& had = s.gen->tokens();
    size_t common = 0;
    while (common < had.size() && common < prompt.size() && had[common] == prompt[common]) ++common;
    if (!lru || s.last_used < lru->last_used) {
      lru = &s;
      lru_common = common;
    }
    if (common > 0 && (common >= kMinReuse || common * 2 >= had.size()) && common > best_common) {
      best = &s;
      best_common = common;
    }
  }
  if (!best && lru && cache_) {
    // A new conversation for this slot: its present one goes to the prompt cache, and a
    // stored conversation that this prompt continues comes back in its place.
    cache_->put(lru->gen->save());
    if (const GeneratorSnapshot* snap = cache_->best_for(prompt, std::max(lru_common, kMinReuse - 1)))
      lru->gen->restore(*snap);
  }
  if (!best) best = lru;
  if (!best) throw Error("no free slot (the queue admits at most --parallel requests)");
  best->busy = true;
  best->last_used = ++use_clock_;
  return *best;
}

void Engine::release(Slot& s, int tokens) {
  std::lock_guard<std::mutex> lk(slots_mu_);
  s.busy = false;
  ++s.requests;
  s.tokens += uint64_t(tokens);
}

std::vector<SlotInfo> Engine::slot_info() const {
  std::lock_guard<std::mutex> lk(slots_mu_);
  std::vector<SlotInfo> out;
  for (const Slot& s : slots_) {
    SlotInfo i;
    i.busy = s.busy;
    i.requests = s.requests;
    i.tokens = s.tokens;
    // A busy slot's state changes under its own thread: only idle slots report what they hold.
    i.cached_tokens = s.busy ? -1 : s.gen->cached_length();
    out.push_back(i);
  }
  return out;
}

PromptCacheStats Engine::cache_stats() const { return cache_ ? cache_->stats() : PromptCacheStats{}; }

BatchStats Engine::batch_stats() const {
  if (batcher_) return batcher_->stats();
  BatchStats b;
  std::lock_guard<std::mutex> lk(slots_mu_);
  for (const Slot& s : slots_) b.active += s.busy ? 1 : 0;
  return b;
}

GenResult Engine::generate(const GenRequest& req, const DeltaSink& sink) {
  Slot& slot = acquire(req.prompt);
  int generated = 0;
  struct Release {
    Engine* e;
    Slot& s;
    int& n;
    ~Release() { e->release(s, n); }
  } release{this, slot, generated};
  StepBatcher::Slot in_batch(batcher_.get());
  GenResult r = generate_in(req, sink, *slot.gen, slot.spec);
  generated = r.completion_tokens();
  return r;
}

GenResult Engine::generate_in(const GenRequest& req, const DeltaSink& sink, Generator& gen, SpeculativeGenerator* spec) {
  GenResult r;
  r.prompt_tokens = int(req.prompt.size());
  if (spec) {
    r.spec.block_size = block_size_;
    r.spec.speculation = "on";
  }
  StopMatcher stop(req.stop);
  ReasoningSplitter split(*tok_, think_, req.chat, prompt_opens_think(req.prompt, think_));
  ThinkCap cap(req.think_cap, req.max_tokens, req.chat && think_.known());

  const double t0 = now_seconds();
  double t_first = 0, prefill_s = 0, mask_total = 0;
  int prefilled = 0;
  std::vector<int32_t> seg_prompt = req.prompt;
  bool stopped = false, done = false;
  std::vector<TokenLogprobs> unsent;  // logprobs of tokens whose text no chunk has carried yet
  auto deliver = [&](const Delta& raw, bool final) -> bool {
    Delta d;
    d.reasoning = raw.reasoning;
    d.content = stop.push(raw.content);
    if (final) d.content += stop.flush();
    if (stop.stopped()) stopped = true;
    r.reasoning += d.reasoning;
    r.content += d.content;
    if (d.empty() || !sink) return true;
    StreamDelta sd{std::move(d), {}};
    sd.logprobs.swap(unsent);
    return sink(sd);
  };

  if (shut_down_.load()) {
    r.disconnected = true;
    return r;
  }
  for (int seg = 0; !done; ++seg) {
    const int used = int(r.ids.size());
    GenerateParams gp;
    gp.sampling = req.sampling;
    gp.max_tokens = cap.budget(used);
    gp.horizon = req.max_tokens_given ? req.max_tokens - used : -1;
    gp.stop_ids = stop_ids_;
    gp.ignore_eos = req.ignore_eos;
    gp.chunk_size = opt_.chunk_size;
    gp.checkpoint_at = seg == 0 ? req.checkpoint_at : -1;
    gp.logprobs = req.logprobs;
    gp.constraint = req.constraint;
    gen.start(seg_prompt, gp);
    size_t logprobs_seen = 0;  // the generator's list restarts with each segment
    if (seg == 0) r.cached_tokens = gen.cached_tokens();
    for (bool more = gp.max_tokens > 0; more && !stopped;) {
      std::vector<int32_t> fresh;
      more = gen.step(fresh);
      if (!fresh.empty() && t_first == 0) t_first = now_seconds();
      Delta raw;
      for (int32_t id : fresh) {
        r.ids.push_back(id);
        raw.append(split.push(id));
      }
      if (req.logprobs >= 0) {
        const std::vector<TokenLogprobs>& lp = gen.logprobs();
        r.logprobs.insert(r.logprobs.end(), lp.begin() + ptrdiff_t(logprobs_seen), lp.end());
        unsent.insert(unsent.end(), lp.begin() + ptrdiff_t(logprobs_seen), lp.end());
        logprobs_seen = lp.size();
      }
      if (!deliver(raw, false) || shut_down_.load()) {
        r.disconnected = true;
        break;
      }
    }
    const Timings& tm = gen.timings();
    prefill_s += tm.prefill_s;
    mask_total += tm.mask_s;
    prefilled += tm.prompt_tokens - gen.cached_tokens();
    if (spec) add_stats(r.spec, spec->stats());
    if (r.disconnected || stopped) break;

    const FinishReason fr = gen.finish_reason();
    r.finish_reason = fr == FinishReason::Length ? "length" : "stop";
    done = true;
    const int now_used = int(r.ids.size());
    if (fr == FinishReason::Length && now_used - used == gp.max_tokens && cap.ended_at_cap(now_used)) {
      cap.disarm();
      std::vector<int32_t> forced;
      if (split.in_think()) {
        forced = think_close_;
        if (now_used + int(forced.size()) > req.max_tokens) break;
        r.think_capped = true;
        Delta raw;
        for (int32_t id : forced) {
          if (req.constraint) req.constraint->accept(id);  // the gate's answer starts here
          r.ids.push_back(id);
          raw.append(split.push(id));
        }
        if (!deliver(raw, false)) {
          r.disconnected = true;
          break;
        }
      }
      seg_prompt = gen.tokens();
      seg_prompt.insert(seg_prompt.end(), forced.begin(), forced.end());
      if (int(seg_prompt.size()) + 1 > ctx_size_ || int(r.ids.size()) >= req.max_tokens) break;
      done = false;
    }
  }
  if (!r.disconnected) {
    if (stopped) r.finish_reason = "stop";
    Delta tail = split.flush();
    if (!deliver(tail, true)) r.disconnected = true;
  }

  const double t_end = now_seconds();
  r.total_s = t_end - t0;
  r.ttft_s = t_first > 0 ? t_first - t0 : 0;
  const int n = r.completion_tokens();
  r.decode_tok_s = n > 1 && t_end > t_first ? (n - 1) / (t_end - t_first) : 0;
  r.prefill_tok_s = prefill_s > 0 ? prefilled / prefill_s : 0;

  Timings tm;
  tm.prompt_tokens = r.prompt_tokens;
  tm.generated_tokens = n;
  nlohmann::json base;
  if (spec) {
    base = spec_stats_json(r.spec, tm);
    base.erase("accept_lens");  // one entry per step: too long for every response
  } else {
    base = {{"drafted", 0}, {"accepted", 0}, {"accept_rate", 0.0}, {"accept_len", 0.0},
            {"block_size", 0}, {"speculation", "off"}};
  }
  base["tok_per_s"] = r.decode_tok_s;
  base["prefill_tok_per_s"] = r.prefill_tok_s;
  base["ttft_ms"] = r.ttft_s * 1e3;
  base["think_capped"] = r.think_capped;
  if (req.constraint) {
    // What the mask cost: in all, and per generated token beside the decode time per token.
    const double mask_s = mask_total;
    base["mask_ms"] = mask_s * 1e3;
    base["mask_ms_per_token"] = n > 0 ? mask_s * 1e3 / n : 0.0;
    base["decode_ms_per_token"] = n > 1 && t_end > t_first ? (t_end - t_first) * 1e3 / (n - 1) : 0.0;
  }
  r.dflash = base;
  return r;
}

}  // namespace dflash::server
