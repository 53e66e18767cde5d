#pragma once
// The loaded model pair and its slots: one generator (sequence state, draft state) per slot.
// Up to `parallel` requests generate at once, each in a slot of its own; their passes go
// through one StepBatcher (continuous batching), and a request takes the free slot whose
// cached context shares the longest prefix with its prompt (a follow-up turn reuses it).
// Callers hold the queue's turn (request_queue.h), which admits at most `parallel`.
#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "chat/chat_template.h"
#include "decoding/generator.h"
#include "decoding/spec_stats.h"
#include "decoding/step_batcher.h"
#include "server/prompt_cache.h"
#include "server/reasoning.h"
#include "server/structured_output.h"
#include "server/tool_calls.h"
#include "tokenizer/tokenizer.h"

#include "models/dflash/dflash_draft.h"
#include "models/model_pair.h"
#include "models/target_model.h"

namespace dflash {
class SpeculativeGenerator;
}  // namespace dflash

namespace dflash::server {

struct EngineOptions {
  std::string model_dir, draft_dir;  // for reports; draft_dir empty: plain decoding
  std::string weights = "native";  // the checkpoint's own dtype, as llama.cpp
  int ctx_size = 0;                  // 0: the model's max_position, at most 8192
  int threads = 0;                   // 0: all cores (the backend load_pair made has them)
  int block_size = 0;                // 0: the draft's own
  bool adaptive = true;
  int chunk_size = 512;
  int parallel = 1;                  // slots; 0: chosen from memory (2..4)
  int prefill_budget = 64;           // prompt rows per pass beside other slots (step_batcher.h)
  size_t cache_ram = size_t(2048) << 20;  // the prompt cache's budget in bytes (0: none)
};

// What /metrics shows of one slot.
struct SlotInfo {
  bool busy = false;
  int cached_tokens = 0;             // positions its state holds
  uint64_t requests = 0, tokens = 0;
};

// What the command line loaded (load_pair: it owns the model-finding rules); the engine
// takes it over.
using LoadedModels = ModelPair;

struct GenRequest {
  std::vector<int32_t> prompt;
  SamplingParams sampling;
  int max_tokens = 256;              // already clamped to the context
  bool max_tokens_given = false;     // by the client (else the context's room): a known horizon
  std::vector<std::string> stop;
  bool chat = false;                 // split reasoning from the answer, apply the think cap
  int think_cap = 0;                 // 0: none
  bool ignore_eos = false;
  int checkpoint_at = -1;            // GenerateParams::checkpoint_at for the prompt
  int logprobs = -1;                 // GenerateParams::logprobs: -1 none, else alternatives
  // Structured output or a forced tool call (GenerateParams::constraint); null: none.
  std::shared_ptr<TokenConstraint> constraint;
  // tool_choice "required" or a named function: the call the output must be (enforced by
  // `constraint`, built from it by structured_output.h; the answer is parsed as with "auto").
  std::optional<ForcedToolCall> forced_tool_call;
};

struct GenResult {
  std::string content, reasoning;
  std::vector<int32_t> ids;          // every generated id, forced ones included
  // With GenRequest::logprobs >= 0: one entry per id the model chose, in order; ids forced
  // after a think cap have none.
  std::vector<TokenLogprobs> logprobs;
  std::string finish_reason = "stop";
  bool disconnected = false, think_capped = false;
  int prompt_tokens = 0, cached_tokens = 0;
  double ttft_s = 0, decode_tok_s = 0, prefill_tok_s = 0, total_s = 0;
  SpecStats spec;                    // summed over segments
  nlohmann::ordered_json dflash;     // the response's "dflash" object
  int completion_tokens() const { return int(ids.size()); }
};

// What a stream's next chunk carries: new text, and the logprobs of every token chosen
// since the previous chunk. A token whose text is held back (an unfinished UTF-8 character,
// a possible stop string) has its entry in the chunk that releases the text; entries left
// when generation ends (a stop string's tokens, an end-of-sequence token without text) are
// the stream's to put in its last chunk.
struct StreamDelta {
  Delta text;
  std::vector<TokenLogprobs> logprobs;
};

// Receives each step's new text; returns false when the client has gone.
using DeltaSink = std::function<bool(const StreamDelta&)>;

class Engine {
 public:
  Engine(LoadedModels loaded, const EngineOptions& opt);  // throws dflash::Error
  ~Engine();

  const Tokenizer& tokenizer() const { return *tok_; }
  const ChatTemplate& chat_template() const { return *template_; }
  const ModelConfig& config() const;
  int ctx_size() const { return ctx_size_; }
  bool has_draft() const { return draft_ != nullptr; }
  // Whether the model's state keeps prompt checkpoints (a recurrent state), so that the
  // server should say where to keep them (GenRequest::checkpoint_at).
  bool prompt_checkpoints() const { return prompt_checkpoints_; }
  int block_size() const { return block_size_; }
  int parallel() const { return int(slots_.size()); }
  std::vector<SlotInfo> slot_info() const;
  BatchStats batch_stats() const;
  PromptCacheStats cache_stats() const;
  const std::string& model_dir() const { return opt_.model_dir; }
  const std::string& draft_dir() const { return opt_.draft_dir; }
  const std::string& weights() const { return opt_.weights; }
  int threads() const;
  const ThinkTokens& think_tokens() const { return think_; }
  // The tool-call form the chat template writes (tool_calls.h).
  ToolFormat tool_format() const { return tool_format_; }
  // Text forms of the tokenizer's bos/eos for the template context (none: nullopt).
  std::optional<std::string> bos_text() const;
  std::optional<std::string> eos_text() const;

  // Builds response_format's and forced tool calls' constraints (made at first use: its token
  // table costs ~0.1-0.2 s on a 150k vocabulary). Callers hold the server's handler thread.
  StructuredOutput& structured();

  GenResult generate(const GenRequest& req, const DeltaSink& sink);
  // Thread-safe, for shutdown: the running generation ends within a step, later ones at once.
  void shut_down();
  // How many requests wait for a slot (the server's queue): while any do, a slot that finishes
  // early is taken at once, and drafting is priced by the batch's goodput alone (batch_pricing.h).
  void set_queued(std::function<int()> queued) {
    if (batcher_) batcher_->set_queued(std::move(queued));
  }

 private:
  EngineOptions opt_;
  std::unique_ptr<Tokenizer> tok_;
  std::unique_ptr<ChatTemplate> template_;
  std::unique_ptr<TargetModel> model_;
  std::unique_ptr<DFlashDraft> draft_;
  struct Slot {
    std::unique_ptr<Generator> gen;
    SpeculativeGenerator* spec = nullptr;  // gen, when there is a draft
    bool busy = false;
    uint64_t last_used = 0, requests = 0, tokens = 0;
  };
  Slot& acquire(const std::vector<int32_t>& prompt);
  // One request in a slot's generator (spec: the same generator when it speculates).
  GenResult generate_in(const GenRequest& req, const DeltaSink& sink, Generator& gen, SpeculativeGenerator* spec);
  void release(Slot& s, int tokens);
  std::unique_ptr<StepBatcher> batcher_;  // null with one slot
  std::unique_ptr<PromptCache> cache_;    // null with --cache-ram 0
  std::vector<Slot> slots_;
  mutable std::mutex slots_mu_;
  uint64_t use_clock_ = 0;
  std::vector<int32_t> stop_ids_;
  ThinkTokens think_;
  std::vector<int32_t> think_close_;
  int ctx_size_ = 0, block_size_ = 0;
  bool prompt_checkpoints_ = false;
  ToolFormat tool_format_ = ToolFormat::None;
  std::mutex structured_mu_;
  std::unique_ptr<StructuredOutput> structured_;
  std::atomic<bool> shut_down_{false};
};

}  // namespace dflash::server
