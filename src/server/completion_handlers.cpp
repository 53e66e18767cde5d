// The generation endpoints: /v1/chat/completions and /v1/completions, plain and streamed.
#include <algorithm>
#include <cstdio>
#include <ctime>
#include <utility>

#include "server/logprobs_json.h"
#include "server/server_impl.h"
#include "util/error.h"
#include "util/timer.h"

namespace dflash::server {

namespace {

std::string sse(const ojson& j) { return "data: " + dump(j) + "\n\n"; }

// The choice's logprobs object for `entries` (null when the request did not ask): chat's
// shape or legacy completions' (whose text_offset continues from `offset`).
ojson logprobs_for(const Job& job, const Tokenizer& tok, const std::vector<TokenLogprobs>& entries, long long& offset) {
  if (job.gen.logprobs < 0) return nullptr;
  return job.chat ? chat_logprobs_json(tok, entries) : completion_logprobs_json(tok, entries, offset);
}

// Choice i of a request: its sampling seed is the request's seed + i.
GenRequest choice_request(const Job& job, int i) {
  GenRequest g = job.gen;
  g.sampling.seed += uint64_t(i);
  // Each choice walks its own copy of the constraint from the start.
  if (job.gen.constraint) g.constraint = job.gen.constraint->clone();
  return g;
}

// Choice i's tool-call parse options: call ids unique across the choices.
ToolCallOptions choice_tools(const Job& job, int i) {
  ToolCallOptions o = *job.tools;
  if (i > 0) o.id_base += "_" + std::to_string(i);
  return o;
}

// n > 1: the response's top-level "dflash" object, the first choice's with the counters
// summed over the choices (each choice carries its own object too).
ojson merged_dflash(const std::vector<GenResult>& rs) {
  ojson m = rs.at(0).dflash;
  SpecStats sum;
  long decoded = 0;
  double decode_s = 0;
  bool capped = false;
  for (const GenResult& r : rs) {
    const SpecStats& s = r.spec;
    sum.drafted += s.drafted;
    sum.accepted += s.accepted;
    sum.steps += s.steps;
    sum.plain_steps += s.plain_steps;
    sum.nonfinite_steps += s.nonfinite_steps;
    sum.draft_s += s.draft_s;
    sum.verify_s += s.verify_s;
    if (sum.histogram.size() < s.histogram.size()) sum.histogram.resize(s.histogram.size(), 0);
    for (size_t i = 0; i < s.histogram.size(); ++i) sum.histogram[i] += s.histogram[i];
    if (r.dflash.is_object() && r.dflash.value("speculation", std::string()).rfind("fallback:", 0) == 0)
      m["speculation"] = r.dflash["speculation"];
    if (r.decode_tok_s > 0) {
      decoded += r.completion_tokens() - 1;
      decode_s += (r.completion_tokens() - 1) / r.decode_tok_s;
    }
    capped = capped || r.think_capped;
  }
  auto set = [&](const char* key, const ojson& v) {
    if (m.contains(key)) m[key] = v;
  };
  set("drafted", sum.drafted);
  set("accepted", sum.accepted);
  set("accept_rate", sum.accept_rate());
  set("accept_len", sum.accept_len());
  set("steps", sum.steps);
  set("plain_steps", sum.plain_steps);
  set("histogram", sum.histogram);
  set("draft_ms", sum.draft_s * 1e3);
  set("verify_ms", sum.verify_s * 1e3);
  set("nonfinite_steps", sum.nonfinite_steps);
  set("tok_per_s", decode_s > 0 ? decoded / decode_s : 0.0);
  set("think_capped", capped);
  m["n"] = rs.size();
  return m;
}

// Chat with tools: the parse options, and for required/named the call the grammar forces.
void setup_tools(Job& job, const ApiRequest& api, const Engine& e) {
  if (api.tools.is_null() || api.tool_choice.mode == ToolChoiceMode::None) return;
  ToolCallOptions o;
  o.format = e.tool_format();
  o.tools = api.tools;
  o.parallel = api.parallel_tool_calls;
  o.id_base = tool_call_id_base(job.meta.id);
  if (api.tool_choice.mode == ToolChoiceMode::Named) o.only_function = api.tool_choice.function;
  if (api.tool_choice.mode == ToolChoiceMode::Required || api.tool_choice.mode == ToolChoiceMode::Named) {
    job.gen.forced_tool_call = ForcedToolCall{o.format, api.tools, o.only_function, o.parallel};
    o.incremental = true;  // the grammar makes the calls whole: their arguments stream as written
  }
  job.tools = std::move(o);
}

// response_format, a forced tool call or tool_choice "auto": the constraint the answer is
// decoded under (after any reasoning). response_format and a forced call at once would ask for
// two different answers: refused. In auto mode each <tool_call> block is decoded under the call
// grammar, which makes the calls whole, so their arguments stream as written; where the grammar
// cannot be had (a parameters schema the compiler refuses, or response_format, which leaves no
// room for a call) the answer is decoded free and a block is judged when it closes.
void setup_constraint(Job& job, const ApiRequest& api, Engine& e) {
  const bool json = !api.response_format.is_null();
  if (json && job.gen.forced_tool_call)
    throw ApiError(400,
                   "response_format and tool_choice \"required\" (or a named function) both fix the answer's form; "
                   "send one of them",
                   "invalid_request_error", "response_format", "invalid_value");
  if (!json && !job.tools) return;  // (a forced call always comes with job.tools)
  const bool auto_tools = job.tools && !job.gen.forced_tool_call;
  const ReasoningStart r =
      job.chat ? reasoning_start(job.gen.prompt, e.tokenizer(), e.think_tokens()) : ReasoningStart::None;
  if (job.gen.forced_tool_call) {
    job.gen.constraint = e.structured().for_tool_call(*job.gen.forced_tool_call, r);
    job.tool_grammar = "forced";
    return;
  }
  if (json) {
    job.gen.constraint = e.structured().for_response_format(api.response_format, r);
    if (auto_tools) job.tool_grammar = "off: response_format fixes the answer's form";
    return;
  }
  if (job.tools->format == ToolFormat::None) {
    job.tool_grammar = "off: the chat template writes no tool calls";
    return;
  }
  try {
    job.gen.constraint =
        e.structured().for_tool_trigger(ForcedToolCall{job.tools->format, api.tools, "", job.tools->parallel}, r);
    job.tools->incremental = true;
    job.tool_grammar = "after_tag";
  } catch (const ApiError& err) {
    job.tool_grammar = std::string("off: ") + err.what();
  }
}

// The "dflash" object's tool entries.
void tool_stats(const Job& job, ojson& dflash, const std::string& note) {
  if (!job.tools) return;
  dflash["tool_format"] = tool_format_name(job.tools->format);
  if (!job.tool_grammar.empty()) dflash["tool_grammar"] = job.tool_grammar;
  if (!note.empty()) dflash["tool_parse"] = note;
}

struct StreamState {
  std::unique_ptr<RequestQueue::Ticket> ticket;
};

}  // namespace

void HttpServer::finish_job(Job& job, const ApiRequest& api, Engine& e) {
  const int n = int(job.gen.prompt.size());
  const char* param = job.chat ? "messages" : "prompt";
  if (n == 0) throw bad_param(param, "the prompt is empty");
  if (n + 1 > e.ctx_size())
    throw ApiError(400,
                   "the prompt has " + std::to_string(n) + " tokens, more than the context size of " +
                       std::to_string(e.ctx_size()) + " tokens allows (--ctx-size); shorten it",
                   "invalid_request_error", param, "context_length_exceeded");
  const int room = e.ctx_size() - n;
  job.gen.max_tokens = std::min(api.max_tokens.value_or(room), room);
  job.gen.max_tokens_given = api.max_tokens.has_value();
  job.gen.sampling = api.sampling;
  job.gen.stop = api.stop;
  job.gen.think_cap = api.think_cap.value_or(opt_.think_cap);
  job.gen.ignore_eos = api.ignore_eos;
  job.gen.logprobs = api.logprobs;
  check_logit_bias(api.sampling, e.config().vocab);
  job.n = api.n;
  job.stream = api.stream;
  job.include_usage = api.include_usage;
  job.return_tokens = api.return_tokens;
  job.meta.model = model_name_;
  job.meta.created = (long long)std::time(nullptr);
}

// Where the next turn's prompt will part from this one: this conversation rendered with a
// placeholder answer and a placeholder next user turn shares a prefix with `text` (the history,
// and what the template repeats of the reply's header, not the generation prompt's empty think
// block that the history drops). Its length in tokens, less one so that a boundary token is
// not counted, is where a recurrent state keeps its prompt checkpoint; -1 when unknown.
static int follow_up_part(const ApiRequest& api, const Engine& e, const std::string& text,
                          const std::vector<int32_t>& ids) {
  try {
    ApiRequest next = api;
    next.messages.push_back(ojson{{"role", "assistant"}, {"content", "\x01"}});
    next.messages.push_back(ojson{{"role", "user"}, {"content", "\x02"}});
    const std::string other = e.chat_template().render(template_context(next, e));
    size_t n = 0;
    while (n < text.size() && n < other.size() && text[n] == other[n]) ++n;
    const std::vector<int32_t> head = e.tokenizer().encode(text.substr(0, n));
    size_t k = 0;
    while (k < head.size() && k < ids.size() && head[k] == ids[k]) ++k;
    return k > 1 ? int(k) - 1 : -1;
  } catch (const Error&) {
    return -1;  // a template that refuses the placeholder turns: the default checkpoint
  }
}

void HttpServer::handle_chat(const httplib::Request& req, httplib::Response& res) {
  const double t0 = now_seconds();
  Engine& e = ready_engine();
  const ApiRequest api = parse_chat_request(parse_body(req.body), opt_.defaults);
  check_model(api.model);
  std::string text;
  try {
    text = e.chat_template().render(template_context(api, e));
    if (api.continue_final_message) text = cut_after_final_message(text, api.messages.back()["content"].get<std::string>());
  } catch (const Error& ex) {
    throw ApiError(400, std::string("the chat template refused these messages: ") + ex.what(), "invalid_request_error",
                   "messages", "template_error");
  }
  auto job = std::make_shared<Job>();
  job->t_arrival = t0;
  job->chat = true;
  job->gen.chat = true;
  job->gen.prompt = e.tokenizer().encode(text);
  if (e.prompt_checkpoints() && api.add_generation_prompt && !api.continue_final_message)
    job->gen.checkpoint_at = follow_up_part(api, e, text, job->gen.prompt);
  job->meta.id = next_id("chatcmpl");
  finish_job(*job, api, e);
  setup_tools(*job, api, e);
  setup_constraint(*job, api, e);
  run_job(job, res);
}

void HttpServer::handle_completion(const httplib::Request& req, httplib::Response& res) {
  const double t0 = now_seconds();
  Engine& e = ready_engine();
  const ApiRequest api = parse_completion_request(parse_body(req.body), opt_.defaults);
  check_model(api.model);
  auto job = std::make_shared<Job>();
  job->t_arrival = t0;
  if (api.prompt_is_ids) {
    const int vocab = e.config().vocab;
    for (int64_t id : api.prompt_ids) {
      if (id < 0 || id >= vocab)
        throw bad_param("prompt", "token id " + std::to_string(id) + " is outside the vocabulary (size " +
                                      std::to_string(vocab) + ")");
      job->gen.prompt.push_back(int32_t(id));
    }
  } else {
    const SpecialTokens& sp = e.tokenizer().special();
    if (sp.add_bos && sp.bos) job->gen.prompt.push_back(*sp.bos);
    const std::vector<int32_t> ids = e.tokenizer().encode(api.prompt_text);
    job->gen.prompt.insert(job->gen.prompt.end(), ids.begin(), ids.end());
  }
  job->meta.id = next_id("cmpl");
  finish_job(*job, api, e);
  setup_constraint(*job, api, e);
  run_job(job, res);
}

void HttpServer::run_job(std::shared_ptr<Job> job, httplib::Response& res) {
  std::unique_ptr<RequestQueue::Ticket> ticket = queue_.try_enter();
  if (!ticket) {
    metrics_.record_rejected();
    // Full means every slot is held (or about to be taken) and every place behind them is
    // taken; the live counters can be caught between those two states.
    const int slots = queue_.slots();
    const std::string running =
        slots == 1 ? "one request is running" : std::to_string(slots) + " requests are running (--parallel)";
    throw ApiError(503,
                   "the server is busy: " + running + " and " + std::to_string(queue_.capacity()) +
                       " are waiting, the most the queue holds (--queue-size); retry shortly",
                   "server_error", "", "queue_full");
  }
  Connection* conn = Connection::current();
  auto gone = [this, conn] { return stopping_.load() || (conn && conn->client_gone()); };
  if (job->stream) {
    stream_job(job, std::move(ticket), res);
    return;
  }
  const double tq = now_seconds();
  if (!ticket->wait_turn_unless(gone)) {
    ticket.reset();
    if (stopping_) throw ApiError(503, "the server is shutting down", "server_error", "", "shutting_down");
    left_in_queue(*job);
    res.status = 499;  // nobody reads it: the client has gone (nginx's "client closed request")
    return;
  }
  const double queue_s = now_seconds() - tq;
  if (stopping_) throw ApiError(503, "the server is shutting down", "server_error", "", "shutting_down");
  // A client that leaves while its (unstreamed) answer is generated ends the generation too.
  // The choices run one after another; each one after the first reuses the prompt's cache.
  std::vector<GenResult> rs;
  for (int i = 0; i < job->n; ++i) {
    rs.push_back(engine()->generate(choice_request(*job, i),
                                    [conn](const StreamDelta&) { return !(conn && conn->client_gone()); }));
    account(*job, rs.back(), i == 0 ? queue_s : 0);
    if (rs.back().disconnected) break;
  }
  ticket.reset();
  if (rs.back().disconnected) {
    if (conn && conn->client_gone()) {
      res.status = 499;
      return;
    }
    throw ApiError(503, "the server is shutting down", "server_error", "", "shutting_down");
  }
  ojson body;
  for (size_t i = 0; i < rs.size(); ++i) {
    long long offset = 0;
    const ojson lp = logprobs_for(*job, engine()->tokenizer(), rs[i].logprobs, offset);
    ojson one = job->chat ? chat_response(job->meta, rs[i], job->return_tokens, lp)
                          : completion_response(job->meta, rs[i], job->return_tokens, lp);
    if (job->tools) {
      const ToolParse p = parse_tool_calls(rs[i].reasoning, rs[i].content, choice_tools(*job, int(i)));
      apply_tool_parse(one, p);
      tool_stats(*job, one["dflash"], p.note);
    }
    if (job->n > 1) {
      one["choices"][0]["index"] = i;
      one["choices"][0]["dflash"] = one["dflash"];
    }
    if (i == 0) body = std::move(one);
    else body["choices"].push_back(one["choices"][0]);
  }
  if (job->n > 1) {
    body["usage"] = usage_json(rs);
    body["dflash"] = merged_dflash(rs);
  }
  send_json(res, 200, body);
}

void HttpServer::stream_job(const std::shared_ptr<Job>& job, std::unique_ptr<RequestQueue::Ticket> ticket,
                            httplib::Response& res) {
  auto st = std::make_shared<StreamState>();
  st->ticket = std::move(ticket);
  res.set_header("Cache-Control", "no-cache");
  res.set_header("X-Accel-Buffering", "no");
  // Runs after the headers are out, on this request's thread: the wait for the turn and the
  // whole generation happen here, and a failed write (the client left) ends both. Nothing may
  // escape from here: httplib calls it outside its handlers' exception guard.
  res.set_chunked_content_provider("text/event-stream", [this, job, st](size_t, httplib::DataSink& sink) {
    try {
      return provide_stream(*job, st->ticket, sink);
    } catch (const std::exception& ex) {
      std::fprintf(stderr, "dflash serve: stream %s ended by an error: %s\n", job->meta.id.c_str(), ex.what());
    } catch (...) {
      std::fprintf(stderr, "dflash serve: stream %s ended by an unknown error\n", job->meta.id.c_str());
    }
    st->ticket.reset();
    return false;  // httplib drops the connection
  });
}

// One streamed request from its wait in the queue to [DONE]; false drops the connection.
bool HttpServer::provide_stream(const Job& job, std::unique_ptr<RequestQueue::Ticket>& ticket,
                                httplib::DataSink& sink) {
  Connection* conn = Connection::current();
  auto gone = [conn] { return conn && conn->client_gone(); };
  auto write = [&](const ojson& j) {
    const std::string s = sse(j);
    return sink.write(s.data(), s.size());
  };
  auto finish = [&] {
    static const std::string done = "data: [DONE]\n\n";
    sink.write(done.data(), done.size());
    sink.done();
    return true;
  };
  const double tq = now_seconds();
  if (!ticket->wait_turn_unless([&] { return stopping_.load() || gone(); })) {
    if (!stopping_) {
      left_in_queue(job);
      return false;
    }
  }
  const double queue_s = now_seconds() - tq;
  const ResponseMeta& m = job.meta;
  if (stopping_ || !engine()) {
    write(error_body("the server is shutting down", "server_error", "", "shutting_down"));
    return finish();
  }
  const Tokenizer& tok = engine()->tokenizer();
  // Choice after choice, each one's chunks together (choices[0].index says which), each
  // ending with its finish_reason; one usage chunk and one [DONE] after the last.
  std::vector<GenResult> rs;
  ojson last_dflash;
  for (int i = 0; i < job.n; ++i) {
    auto indexed = [&](ojson j) {
      j["choices"][0]["index"] = i;
      return j;
    };
    std::optional<ToolCallStream> tools;
    if (job.tools) tools.emplace(choice_tools(job, i));
    std::vector<TokenLogprobs> held;  // logprobs of tokens whose text the tool parser holds back
    // One chat delta: reasoning and content, then one chunk per tool-call piece.
    auto write_chat = [&](const std::string& reasoning, const std::string& content,
                          const std::vector<ToolCallDelta>& calls, const ojson& lp) {
      ojson delta = ojson::object();
      if (!reasoning.empty()) delta["reasoning_content"] = reasoning;
      if (!content.empty()) delta["content"] = content;
      if (!delta.empty() || !lp.is_null()) {
        if (!write(indexed(chat_chunk(m, delta, "", lp)))) return false;
      }
      for (const ToolCallDelta& c : calls)
        if (!write(indexed(chat_chunk(m, {{"tool_calls", tool_call_deltas_json({c})}}, "")))) return false;
      return true;
    };
    GenResult r;
    size_t logprobs_sent = 0;
    long long text_offset = 0;  // legacy completions' running text_offset
    bool ok = !job.chat || write(indexed(chat_chunk(m, {{"role", "assistant"}, {"content", ""}}, "")));
    if (ok) {
      try {
        r = engine()->generate(choice_request(job, i), [&](const StreamDelta& sd) {
          if (gone()) return false;
          const Delta& d = sd.text;
          if (tools) {
            held.insert(held.end(), sd.logprobs.begin(), sd.logprobs.end());
            const ToolStreamOut o = tools->push(d.reasoning, d.content);
            if (o.empty()) return true;
            logprobs_sent += held.size();
            const ojson lp = logprobs_for(job, tok, std::exchange(held, {}), text_offset);
            return write_chat(o.reasoning, o.content, o.calls, lp);
          }
          logprobs_sent += sd.logprobs.size();
          const ojson lp = logprobs_for(job, tok, sd.logprobs, text_offset);
          if (!job.chat) return write(indexed(completion_chunk(m, d.content, "", lp)));
          return write_chat(d.reasoning, d.content, {}, lp);
        });
      } catch (const std::exception& ex) {
        ticket.reset();
        write(error_body(ex.what(), "server_error", "", ""));
        return finish();
      }
    } else {
      r.disconnected = true;
    }
    // The next request may start while this one writes its last chunks.
    if (i == job.n - 1 || r.disconnected) ticket.reset();
    account(job, r, i == 0 ? queue_s : 0);
    if (r.disconnected) return false;
    std::string finish_reason = r.finish_reason;
    if (tools) {
      const ToolStreamOut o = tools->flush();
      if (!o.empty() && !write_chat(o.reasoning, o.content, o.calls, nullptr)) return false;
      if (tools->calls() > 0 && !tools->cut()) finish_reason = "tool_calls";  // a cut call keeps "length"
    }
    // Tokens whose text never went out (a stop string's, an end-of-sequence token's) still
    // have their logprobs: they come with the choice's last chunk.
    const std::vector<TokenLogprobs> rest(r.logprobs.begin() + ptrdiff_t(std::min(logprobs_sent, r.logprobs.size())),
                                          r.logprobs.end());
    const ojson lp = logprobs_for(job, tok, rest, text_offset);
    ojson last = indexed(job.chat ? chat_chunk(m, ojson::object(), finish_reason, lp)
                                  : completion_chunk(m, "", finish_reason, lp));
    last["dflash"] = ojson(r.dflash);
    if (tools) tool_stats(job, last["dflash"], tools->note());
    last_dflash = last["dflash"];
    if (job.return_tokens) last["choices"][0]["tokens"] = r.ids;
    if (!write(last)) {
      ticket.reset();
      return false;
    }
    rs.push_back(std::move(r));
  }
  if (job.include_usage) {
    ojson u = {{"id", m.id},
               {"object", job.chat ? "chat.completion.chunk" : "text_completion"},
               {"created", m.created},
               {"model", m.model},
               {"choices", ojson::array()},
               {"usage", usage_json(rs)},
               {"dflash", job.n > 1 ? merged_dflash(rs) : last_dflash}};
    if (!write(u)) return false;
  }
  return finish();
}

// A request whose client left before its turn: counted, logged, never generated.
void HttpServer::left_in_queue(const Job& job) {
  metrics_.record_left_in_queue();
  GenResult r;
  r.prompt_tokens = int(job.gen.prompt.size());
  r.disconnected = true;
  account(job, r, 0);
}

void HttpServer::account(const Job& job, const GenResult& r, double queue_s) {
  RequestRecord rec;
  rec.prompt_tokens = r.prompt_tokens;
  rec.cached_tokens = r.cached_tokens;
  rec.completion_tokens = r.completion_tokens();
  rec.decode_tok_s = r.decode_tok_s;
  rec.prefill_tok_s = r.prefill_tok_s;
  rec.ttft_s = r.ttft_s;
  rec.total_s = r.total_s;
  rec.decode_s = r.decode_tok_s > 0 ? (rec.completion_tokens - 1) / r.decode_tok_s : 0;
  rec.drafted = r.spec.drafted;
  rec.accepted = r.spec.accepted;
  // A request dropped before it ran has no "dflash" object.
  rec.speculation = r.dflash.is_object() ? r.dflash.value("speculation", std::string("off")) : std::string("off");
  rec.think_capped = r.think_capped;
  rec.disconnected = r.disconnected;
  metrics_.record(rec);
  log_.write("request", {{"id", job.meta.id},
                         {"endpoint", job.chat ? "chat" : "completion"},
                         {"stream", job.stream},
                         {"prompt", r.prompt_tokens},
                         {"cached", r.cached_tokens},
                         {"gen", r.completion_tokens()},
                         {"tok_s", r.decode_tok_s},
                         {"prefill_tok_s", r.prefill_tok_s},
                         {"accept", r.spec.accept_rate()},
                         {"tau", r.spec.accept_len()},
                         {"spec", rec.speculation},
                         {"finish", r.disconnected ? std::string("disconnected") : r.finish_reason},
                         {"think_capped", r.think_capped},
                         {"queue_ms", queue_s * 1e3},
                         {"ttft_ms", r.ttft_s * 1e3},
                         {"total_ms", (now_seconds() - job.t_arrival) * 1e3}});
}

}  // namespace dflash::server
