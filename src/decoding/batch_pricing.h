#pragma once
// What speculating costs a batch, priced from measurements, so that each slot drafts only
// where it raises the batch's goodput (tokens emitted per second by all slots together).
//
// Why a price and not a switch: a slot that drafts adds its block's extra rows to a pass every
// slot shares, and its draft pass holds every other slot's next pass up. Speculation pays for
// the batch when the tokens it adds per second it adds beat what the batch already makes per
// second: slot i drafting a block of B adds dT = E(B) - 1 tokens (E: expected tokens per block
// from its measured acceptance) and dt = pass(R + B - 1) - pass(R) + draft(B) seconds (R: the
// others' rows), and the goodput T/t rises exactly when dT/dt > T/t. Each slot's controller
// (spec_controller.h) makes that comparison with the figures of a quote from here; no
// experiment that slows the batch is needed, only the probes a slot makes to learn its
// acceptance. With one active slot the quote stands aside and the controller decides alone.
//
// Measured here: the seconds of a pass by its rows (EMA per row count, interpolated between
// counts, and beyond the largest along the widest slope) and the goodput over recent passes;
// the same by rows for the draft's passes, which gather the blocks of every slot that drafts at
// a step (StepBatcher::draft): a block that joins blocks already waiting pays only its rows.
// Prompt rows read count in the goodput like tokens emitted: while other slots prefill, a
// draft pass holds their prompts up, and pricing it against decode tokens alone (few, then)
// made every slot draft during the others' prefill, at 0.7x of plain decoding for 8 streams.
// Outputs never depend on it (speculation is lossless); only speed and drafted counts do.
#include <atomic>
#include <cstdint>
#include <deque>
#include <map>
#include <vector>

namespace dflash {

// Share of decode time that probes which find nothing may cost (alone: each request's own;
// beside others: the batch's tokens, one account for all slots). On a small target with a
// long context a draft block plus a verify can cost 5 plain steps: probing every 32 steps
// there made speculation 8% slower than plain decoding with nothing ever accepted.
constexpr double kProbeBudget = 0.02;

// A probe beside others feeds the draft only this many of the context rows it has waiting
// (the newest; the older are dropped and the draft's context gets a hole, as after a long
// plain stretch: SpeculativeGenerator::drop_oldest_pending). Its catch-up was most of its
// price: on the weak grown 1.7B pair at 2 streams a probe fed 50-90 rows in 10-30 ms, and one
// probe in a run of 128 tokens cost it 2-3%.
constexpr int kProbeContextRows = 32;

// A probe beside others, once judged: the tokens claimed from the batch's probe account,
// what it cost the batch in tokens (seconds it added times the goodput, less the draft
// tokens it got accepted), and whether a block like it pays.
struct ProbeSettlement {
  double claimed = 0;  // 0: the block was not a probe paid from the account
  double cost = 0;
  bool paid = false;
};

// The price of drafting for one slot, now.
struct BatchQuote {
  int active = 1;               // slots generating
  // Tokens/s of the whole batch over recent passes (0: not yet measured), but at least what
  // the slots' plain rows make in passes of their own. Measured alone it fell as slots drafted
  // (their blocks and draft passes slow every pass), so a block had less to beat the more
  // others drafted: on the grown 1.7B pair at 8 streams, with 512-token answers, it went from
  // 190 to 70 tok/s, blocks of 8 came to look worth it, and the run made 0.92-0.98x of plain.
  // Beating the plain rows' goodput, every block raises the batch's above plain decoding's.
  double goodput = 0;
  double pass_s = 0;            // seconds of a pass of the others' rows and one more
  int rows = 0;                 // those rows: the others' and this slot's plain row
  // What all slots' blocks measured, for a slot that has measured little itself: the
  // acceptance (accepted over judged draft tokens; judged 0: none yet) and the draft's own
  // compute per block size (0: not measured). Same draft, same machine, similar text.
  double accepted = 0, judged = 0;
  // The draft pass's price of a block of B ([B], 0: not measured): what B - 1 more rows add to
  // the draft pass that other slots' blocks already wait for (`joining`), else a pass of its own.
  std::vector<double> draft_s;
  bool joining = false;
  // Feeding the draft the context rows this slot has waiting (plain steps' taps), which its
  // next block must pay first: their count at the measured seconds per context row (before
  // one is measured: a target prefill row's, times the context_share the slot gives).
  double catch_up_s = 0;
  int context_rows = 0;  // those rows
  std::vector<double> extra_s;  // [e]: seconds e more rows add to a pass beside the others' rows
  // Tokens the batch's probe account holds (BatchPricing::claim_probe): a slot probes beside
  // others only when its probe's whole price fits; it writes that price in probe_claim.
  double probe_credit = 0;
  double probe_claim = 0;
  // Ahead of the laggard of a closed batch (BatchPricing::price_ahead): the goodput above is
  // then what its row costs a pass per token.
  bool ahead = false;
  bool batched() const { return active > 1 && goodput > 0; }
};

class BatchPricing {
 public:
  // Tokens emitted or prompt rows read by any slot (thread-safe). Both count in the goodput;
  // only emitted tokens earn the probe account (claim_probe): 8 prompts of 40 rows read in
  // a few wide passes had funded 6 tokens of probes before a token was decoded.
  void add_tokens(int n, bool prompt = false) {
    tokens_.fetch_add(uint64_t(n), std::memory_order_relaxed);
    if (prompt) prompt_rows_.fetch_add(uint64_t(n), std::memory_order_relaxed);
  }
  // After each pass, one caller at a time: its rows, seconds, and the time it ended.
  void record_pass(int rows, double seconds, double end_time);
  // The price beside others_rows rows, for 0..max_extra more (one caller at a time with
  // record_pass: the batcher's lock).
  // draft_rows: block rows (B - 1 each) of the draft jobs gathering for the next draft pass
  // (0: none; a block then pays for a draft pass of its own).
  // context_rows: the slot's context rows waiting for the draft (priced in catch_up_s).
  // context_share: a context row's weights over a target row's (Drafter::context_row_bytes
  // over TargetModel::weight_bytes; 0: unknown), for the price before one is measured.
  // block_rows: of others_rows, the extra rows (B - 1 each) of blocks other slots declared.
  BatchQuote quote(int active, int others_rows, int max_extra, int draft_rows = 0, int context_rows = 0,
                   double context_share = 0, int block_rows = 0) const;
  // After a slot's block of B (same lock as the rest): draft tokens accepted and judged (the
  // accepted and the first rejected), and the draft's own compute.
  void record_block(int B, int accepted, int judged, double draft_s);
  // Probes beside others are paid from one account for the whole batch, not from a timer per
  // slot: it earns kProbeBudget of every token the batch emits (halved after each probe that
  // did not pay, up to 5 times; back to whole after one that did), a probe's price is taken
  // when it is chosen, and it is settled at what it really cost, its accepted tokens taken
  // off. A timer per slot let every slot probe on
  // its own, each first probe priced with only a share of its catch-up; with requests of 128
  // tokens (a fresh controller each) the weak grown 1.7B pair's probes at 2 streams cost the
  // batch 3-4%: 0.96x of plain decoding in rounds that drafted under 15 tokens. One account
  // also remembers across requests what probes found, where each request's controller starts
  // afresh. One probe at a time: until it is settled (or a few passes went by without,
  // as when its request ended first) the account lends no other, so the next is priced with
  // what it measured (at a cold start the draft's cost is a prior, a fifth of a pass; in
  // batch_pricing_test's simulation of 8 slots whose draft takes 40 ms, the first probes of
  // all 8 at one step cost the batch 2.8% of 128 steps).
  void claim_probe(double tokens);
  void settle_probe(const ProbeSettlement& s);
  // After a draft pass: its blocks' rows (B - 1 each) and their seconds (context rows not counted).
  void record_draft_pass(int rows, double seconds);
  // After a draft pass with context rows: how many, and their seconds.
  void record_context(int rows, double seconds);

  // A slot ahead in a closed batch: nobody waits for a slot, so the batch's last pass is its
  // laggard's (the request with the most tokens still to emit), and the goodput of a step is
  // not what drafting buys. A slot more than a block ahead of the laggard saves, with each
  // token it drafts, only its own row of passes the others still run: its tokens are priced
  // at the seconds that row adds (about pass(R) - pass(R - 1)), and on CPU, where a pass is
  // bound by the weights, no block beats that. Slots within a block of the laggard keep the
  // batch's goodput: they draft in turns, the one behind catching up. Priced by the goodput
  // alone, a slot with a good draft ran ahead and its blocks slowed the others, which then
  // finished later than plain decoding: the grown Qwen3.5-4B pair at 4 streams drafted 284 and
  // 333 tokens in two rounds at 0.98x and 0.96x of plain end to end (1.00x and 1.09x while all
  // four decoded). The laggard's tokens priced at a whole pass each (it alone sets the end)
  // let it draft where blocks did not pay once it had caught up: rounds drafting 169 and 200
  // tokens there ran 0.93x and 0.91x while all decoded. A request waiting for a slot takes the
  // one freed at once; the caller then does not call this (StepBatcher::decide).
  void price_ahead(BatchQuote& q) const;

  // Seconds of a pass of `rows` rows: measured, interpolated or extrapolated (0: nothing yet).
  double pass_seconds(int rows) const;
  double draft_pass_seconds(int rows) const;  // the same for the draft's block rows
  double goodput() const;  // tokens/s over the recent passes (0: fewer than two)

 private:
  // A pass's seconds by its row count as a shape (EMA per count) times one level that the
  // most measured count's passes move. The passes' seconds drift as the slots' contexts grow
  // (each row reads its slot's cache): at 8 streams on the grown 1.7B pair a pass of 8 rows
  // went from 36 to 58 ms over 512-token answers, while nearly every pass had 8 rows. An EMA
  // per count alone kept the rare counts (9 to 15 rows: 8 and a verify block's) at the seconds
  // of their last measurement, tens of seconds old: 7 rows beside 8 were priced at 19 ms where
  // they then cost 35.
  std::map<int, double> pass_shape_;
  std::map<int, double> pass_weight_;  // passes by row count, decayed: picks the reference
  int reference_ = 0;                  // the count whose passes move the level
  double level_ = 1.0;
  struct Mark {
    double time;
    uint64_t tokens;
  };
  std::deque<Mark> marks_;  // the latest pass ends, for the goodput
  double accepted_ = 0, judged_ = 0;  // decayed, as each controller's own
  std::map<int, double> draft_s_;     // EMA by block size: a slot's share of its draft passes
  std::map<int, double> draft_pass_s_;  // EMA of a draft pass's block seconds by its block rows
  double context_row_s_ = 0;            // EMA of the seconds per context row, passes of many rows
  double credit_ = 0;          // the probe account, in tokens of the batch
  uint64_t credited_ = 0;      // tokens_ less prompt_rows_ when it was last credited
  int failed_probes_ = 0;      // in a row: each halves what the account earns
  int open_probe_passes_ = 0;  // > 0: a probe is out, not settled yet (passes left to wait)
  std::atomic<uint64_t> tokens_{0};
  std::atomic<uint64_t> prompt_rows_{0};  // of tokens_, prompt rows read
};

}  // namespace dflash
