// --parallel: 8 different requests sent at once to a server with 4 slots give token for token
// the outputs they give alone (one at a time on a --parallel 1 server), with the same per-request
// speculation stats (fixed block size, --no-adaptive), greedy and seeded sampling, streamed and
// not; dense (models/demo) and hybrid (models/demo35) pairs, with and without the draft. The
// passes were really batched (/metrics: sequences per pass > 1, and blocks per draft pass > 1
// with a draft), /metrics shows every slot, and a
// follow-up turn goes to the slot that holds its conversation (cached_tokens); on one slot, a
// conversation displaced by others comes back from the prompt cache (--cache-ram), and with
// --cache-ram 0 it does not.
import {
  Checks, assert, assertEq, overallTimeout, post, request, sseEvents, startServer,
  DEMO_DRAFT, DEMO_TARGET, DEMO35_DRAFT, DEMO35_TARGET,
} from './server_harness.mjs';

const checks = new Checks('test_server_parallel');
overallTimeout(600000, checks);

const PROMPTS = [
  'Write a Python function that reverses a list.', 'Show the class `Counter`.', 'Implement `json.dumps`.',
  'Write a function to parse a URL.', 'Show the function `os.path.join`.', 'Implement a binary search in Python, with tests and a docstring that explains it.',
  'Write a class for a linked list.', 'Show the method `dict.get`.',
];
const MAX = 40;

function body(i, stream) {
  const b = { messages: [{ role: 'user', content: PROMPTS[i] }], max_tokens: MAX, ignore_eos: true, stream,
    chat_template_kwargs: { enable_thinking: false }, return_tokens: true };
  if (i % 2 === 1) { b.temperature = 0.9; b.seed = 1000 + i; } else { b.temperature = 0; }
  if (stream) b.stream_options = { include_usage: true };
  return b;
}

async function ask(url, i, stream) {
  const r = await post(url + '/v1/chat/completions', body(i, stream), { timeoutMs: 300000 });
  if (r.status !== 200) throw new Error('status ' + r.status + ' ' + r.text.slice(0, 300));
  if (!stream) {
    const d = r.json.dflash;
    return { text: r.json.choices[0].message.content, drafted: d.drafted, accepted: d.accepted, n: r.json.usage.completion_tokens };
  }
  const ev = sseEvents(r.text).filter((e) => e !== '[DONE]');
  const last = ev[ev.length - 1];
  const d = ev.find((e) => e.dflash)?.dflash || {};
  return { text: ev.map((c) => (c.choices && c.choices[0] && c.choices[0].delta.content) || '').join(''),
    drafted: d.drafted, accepted: d.accepted, n: last.usage ? last.usage.completion_tokens : -1 };
}

// Two turns of one conversation, `between` run between them; the second turn's cached_tokens.
// Its answer must be the same every time (followUpText: the first one, reset per pair).
let followUpText = null;
async function conversation(url, between) {
  const first = { messages: [{ role: 'user', content: PROMPTS[5] }], max_tokens: 8, temperature: 0, chat_template_kwargs: { enable_thinking: false } };
  const r1 = await post(url + '/v1/chat/completions', first);
  assertEq(r1.status, 200, 'first turn');
  await between();
  const next = { ...first, messages: [...first.messages, r1.json.choices[0].message, { role: 'user', content: 'And now in C.' }] };
  const r2 = await post(url + '/v1/chat/completions', next);
  assertEq(r2.status, 200, 'second turn');
  const text = r2.json.choices[0].message.content;
  if (followUpText === null) followUpText = text;
  else assertEq(text, followUpText, 'the second turn\'s answer (as with nothing in between on one slot)');
  return r2.json.usage.prompt_tokens_details.cached_tokens;
}

function metric(text, name) {
  const m = new RegExp('^' + name + ' (\\S+)$', 'm').exec(text);
  return m ? Number(m[1]) : NaN;
}

async function pairCheck(label, target, draft) {
  const common = ['--model', target, '--ctx-size', '2048'];
  if (draft) common.push('--draft', draft, '--block-size', '4', '--no-adaptive');
  else common.push('--no-draft');
  let alone = [], followUpCached = -1;
  followUpText = null;
  await checks.check(`[${label}] the 8 requests one at a time (--parallel 1): the reference; a conversation survives 3 others in the prompt cache`, async () => {
    const one = await startServer([...common, '--parallel', '1']);
    try {
      for (let i = 0; i < PROMPTS.length; i++) alone.push(await ask(one.url, i, false));
      followUpCached = await conversation(one.url, async () => {});
      // --cache-ram: other conversations take the one slot between the turns; the first one
      // goes to the prompt cache and comes back for its second turn.
      const cached = await conversation(one.url, () => Promise.all([0, 1, 2].map((i) => ask(one.url, i, false))));
      assertEq(cached, followUpCached, 'cached_tokens after 3 other conversations on the one slot (prompt cache)');
      const m = (await request(one.url + '/metrics')).text;
      assert(metric(m, 'dflash_prompt_cache_hits_total') >= 1 && metric(m, 'dflash_prompt_cache_entries') >= 1,
        'prompt cache metrics: ' + (m.match(/^dflash_prompt_cache.*$/gm) || []).join('; '));
    } finally { await one.stop(); }
    const none = await startServer([...common, '--parallel', '1', '--cache-ram', '0']);
    try {
      const cached = await conversation(none.url, () => Promise.all([0, 1, 2].map((i) => ask(none.url, i, false))));
      assert(cached < followUpCached / 2, `with --cache-ram 0 the conversation was lost, yet ${cached} tokens were cached`);
      const m = (await request(none.url + '/metrics')).text;
      assertEq(metric(m, 'dflash_prompt_cache_hits_total'), 0, 'hits with --cache-ram 0');
    } finally { await none.stop(); }
    assert(alone.every((a) => a.text.length > 0 && a.n === MAX), 'a reference answer is short');
    if (draft) assert(alone.every((a) => a.drafted > 0), 'a reference request never drafted');
  });
  const srv = await startServer([...common, '--parallel', '4']);
  try {
    await checks.check(`[${label}] 8 at once on 4 slots: each equals its answer alone, stats too`, async () => {
      const got = await Promise.all(PROMPTS.map((_, i) => ask(srv.url, i, i % 3 === 0)));
      for (let i = 0; i < PROMPTS.length; i++) {
        assertEq(got[i].text, alone[i].text, `request ${i} text`);
        assertEq(got[i].n, MAX, `request ${i} completion_tokens`);
        if (draft) {
          assertEq(got[i].drafted, alone[i].drafted, `request ${i} drafted`);
          assertEq(got[i].accepted, alone[i].accepted, `request ${i} accepted`);
        }
      }
    });
    await checks.check(`[${label}] /metrics: 4 slots, batched passes, idle afterwards`, async () => {
      const m = (await request(srv.url + '/metrics')).text;
      assertEq(metric(m, 'dflash_slots'), 4, 'dflash_slots');
      assertEq(metric(m, 'dflash_requests_running'), 0, 'running');
      const passes = metric(m, 'dflash_batch_passes_total'), seqs = metric(m, 'dflash_batch_sequences_total');
      console.log(`  ${passes} passes, ${(seqs / passes).toFixed(2)} sequences per pass`);
      assert(passes > 0 && seqs / passes > 1.3, `not batched: ${seqs} sequences in ${passes} passes`);
      // The slots that drafted at a step shared one draft pass.
      const dp = metric(m, 'dflash_batch_draft_passes_total'), db = metric(m, 'dflash_batch_draft_blocks_total');
      if (draft) {
        console.log(`  ${dp} draft passes, ${(db / dp).toFixed(2)} blocks per draft pass`);
        assert(dp > 0 && db / dp > 1.3, `draft passes not batched: ${db} blocks in ${dp} passes`);
      } else {
        assertEq(dp, 0, 'draft passes without a draft');
      }
      const busy = [...m.matchAll(/^dflash_slot_busy\{slot="(\d)"\} (\d)$/gm)];
      assertEq(busy.length, 4, 'per-slot busy lines');
      const served = [...m.matchAll(/^dflash_slot_requests_total\{slot="\d"\} (\d+)$/gm)].map((x) => Number(x[1]));
      assertEq(served.reduce((a, b) => a + b, 0), 8, 'requests over the slots');
      const s = (await request(srv.url + '/v1/stats')).json;
      assertEq(s.slots, 4, 'stats.slots');
      assertEq(s.per_slot.length, 4, 'stats.per_slot');
      assertEq(s.batch.draft_passes, dp, 'stats.batch.draft_passes');
    });
    await checks.check(`[${label}] a follow-up turn reuses its conversation's slot while 3 others ran (cached_tokens)`, async () => {
      // Other conversations between the two turns take the other slots.
      const cached = await conversation(srv.url, () => Promise.all([0, 1, 2].map((i) => ask(srv.url, i, false))));
      assertEq(cached, followUpCached, 'cached_tokens of the second turn (as with nothing in between on one slot)');
      assert(cached > 10, 'the reference reused only ' + cached + ' tokens');
    });
  } finally { await srv.stop(); }
}

await pairCheck('dense, DFlash2', DEMO_TARGET, DEMO_DRAFT);
await pairCheck('dense, plain', DEMO_TARGET, null);
await pairCheck('hybrid, DFlash2', DEMO35_TARGET, DEMO35_DRAFT);
await pairCheck('hybrid, plain', DEMO35_TARGET, null);

await checks.finish();
