// presence_penalty, frequency_penalty, logit_bias and n > 1 through the official `openai`
// client on the shipped demo pair (the default `dflash serve`): with the draft (a server that
// drafts a full block at every step) and without (--no-draft) the outputs are identical; the
// penalties and the bias change the output as they should; choice i of n is a single request
// with seed + i; a streamed n = 2 reassembles to the unstreamed choices; out-of-range values
// are refused with a 400 naming the parameter.
import OpenAI from 'openai';
import { Checks, assert, assertEq, overallTimeout, post, startServer } from './server_harness.mjs';

const checks = new Checks('test_server_penalties');
overallTimeout(150000, checks);
const check = (n, f) => checks.check(n, f);

const QUESTION = 'Write a Python function that reverses a list.';
const PROMPT = 'import os\n\ndef list_files(path):\n';
const MAX = 40;

const fixed = await startServer(['--no-adaptive']);
const noDraft = await startServer(['--no-draft']);
const clientOf = (s) => new OpenAI({ baseURL: s.url + '/v1', apiKey: 'unused', timeout: 60000, maxRetries: 0 });
const draft = clientOf(fixed), plain = clientOf(noDraft);

const chatBody = {
  model: 'default', messages: [{ role: 'user', content: QUESTION }], temperature: 0, max_tokens: MAX,
  return_tokens: true, chat_template_kwargs: { enable_thinking: false },
};
const completionBody = { model: 'default', prompt: PROMPT, temperature: 0, max_tokens: MAX, return_tokens: true };
const chat = (client, extra = {}) => client.chat.completions.create({ ...chatBody, ...extra });
const complete = (client, extra = {}) => client.completions.create({ ...completionBody, ...extra });
const ids = (r) => r.choices.map((c) => c.tokens);

// Greedy, unpenalized: the reference the penalty and bias checks move away from.
const base = await chat(plain);
const baseIds = base.choices[0].tokens;

await check('frequency_penalty changes greedy output (so it bites), with and without the draft alike', async () => {
  assertEq(baseIds.length, MAX, 'tokens');
  assert(new Set(baseIds).size < baseIds.length, 'the unpenalized answer repeats no token: this check would prove nothing');
  const [a, b] = await Promise.all([chat(draft, { frequency_penalty: 2 }), chat(plain, { frequency_penalty: 2 })]);
  assert(a.dflash.drafted > 0 && a.dflash.speculation === 'on', 'no drafting: ' + JSON.stringify(a.dflash));
  assertEq(ids(a), ids(b), 'draft vs plain ids');
  assert(JSON.stringify(b.choices[0].tokens) !== JSON.stringify(baseIds), 'frequency_penalty 2 left the greedy output unchanged');
  // presence_penalty alone bites as well, and -2 (encouraging repeats) is accepted.
  const [p, q] = await Promise.all([chat(draft, { presence_penalty: 2 }), chat(plain, { presence_penalty: 2 })]);
  assertEq(ids(p), ids(q), 'presence: draft vs plain');
  assert(JSON.stringify(q.choices[0].tokens) !== JSON.stringify(baseIds), 'presence_penalty 2 left the output unchanged');
  const [n1, n2] = await Promise.all([chat(draft, { presence_penalty: -2, frequency_penalty: -1 }),
    chat(plain, { presence_penalty: -2, frequency_penalty: -1 })]);
  assertEq(ids(n1), ids(n2), 'negative penalties: draft vs plain');
});

await check('logit_bias -100 on the token greedy picks first removes it; +100 forces a token', async () => {
  const first = baseIds[0];
  const bias = { [String(first)]: -100 };
  const [a, b] = await Promise.all([chat(draft, { logit_bias: bias }), chat(plain, { logit_bias: bias })]);
  assertEq(ids(a), ids(b), 'draft vs plain ids');
  const got = b.choices[0].tokens;
  assert(got[0] !== first, `the banned token ${first} still comes first`);
  assert(!got.includes(first), `the banned token ${first} still appears: ${JSON.stringify(got)}`);
  // Forcing: a +100 bias on one ordinary token makes every token that one.
  const forced = baseIds.find((t) => t !== first);
  const f = await complete(plain, { logit_bias: { [String(forced)]: 100 }, max_tokens: 8 });
  assertEq(f.choices[0].tokens, Array(8).fill(forced), 'forced tokens');
  // Also on /v1/completions, with the draft.
  const cbias = { [String((await complete(plain)).choices[0].tokens[0])]: -100 };
  const [c1, c2] = await Promise.all([complete(draft, { logit_bias: cbias }), complete(plain, { logit_bias: cbias })]);
  assertEq(ids(c1), ids(c2), 'completions: draft vs plain ids');
});

await check('sampled, penalized, biased, n = 3: identical with and without the draft (chat and completions)', async () => {
  const extra = {
    temperature: 0.9, top_p: 0.95, seed: 1234, n: 3, frequency_penalty: 0.8, presence_penalty: 0.4,
    repetition_penalty: 1.1, logit_bias: { [String(baseIds[1])]: -5, [String(baseIds[2])]: 3 },
  };
  const [a, b] = await Promise.all([chat(draft, extra), chat(plain, extra)]);
  assert(a.dflash.drafted > 0, 'no drafting: ' + JSON.stringify(a.dflash));
  assertEq(a.choices.map((c) => c.index), [0, 1, 2], 'indices');
  assertEq(ids(a), ids(b), 'chat ids');
  assertEq(a.choices.map((c) => c.message.content), b.choices.map((c) => c.message.content), 'chat texts');
  const [c, d] = await Promise.all([complete(draft, extra), complete(plain, extra)]);
  assertEq(ids(c), ids(d), 'completions ids');
  assertEq(c.choices.map((x) => x.text), d.choices.map((x) => x.text), 'completions texts');
  // Greedy with penalties and n = 2: two identical choices, the same with the draft.
  const g = { n: 2, frequency_penalty: 1, presence_penalty: 0.5 };
  const [e, f] = await Promise.all([chat(draft, g), chat(plain, g)]);
  assertEq(ids(e), ids(f), 'greedy n=2 draft vs plain');
  assertEq(e.choices[0].tokens, e.choices[1].tokens, 'greedy choices are identical');
});

const nBody = { temperature: 1.0, seed: 77, n: 3, max_tokens: 24, logprobs: true, top_logprobs: 2 };
let nResponse = null;
await check('n = 3 with a seed: choice i equals a single request with seed + i; usage sums the completions', async () => {
  const r = await chat(draft, nBody);
  nResponse = r;
  assertEq(r.choices.length, 3, 'choices');
  const singles = await Promise.all([0, 1, 2].map((i) => chat(plain, { ...nBody, n: 1, seed: 77 + i })));
  for (let i = 0; i < 3; ++i) {
    assertEq(r.choices[i].index, i, 'index');
    assertEq(r.choices[i].tokens, singles[i].choices[0].tokens, `choice ${i} ids`);
    assertEq(r.choices[i].message.content, singles[i].choices[0].message.content, `choice ${i} text`);
    assertEq(r.choices[i].finish_reason, singles[i].choices[0].finish_reason, `choice ${i} finish_reason`);
    assertEq(r.choices[i].logprobs, singles[i].choices[0].logprobs, `choice ${i} logprobs`);
    assert(r.choices[i].dflash && typeof r.choices[i].dflash.drafted === 'number', `choice ${i} has no dflash object`);
  }
  assert(new Set(r.choices.map((c) => JSON.stringify(c.tokens))).size > 1, 'all three choices are equal: the seeds do not differ');
  assertEq(r.usage.prompt_tokens, singles[0].usage.prompt_tokens, 'prompt counted once');
  assertEq(r.usage.completion_tokens, r.choices.reduce((n, c) => n + c.tokens.length, 0), 'completion tokens summed');
  assertEq(r.usage.total_tokens, r.usage.prompt_tokens + r.usage.completion_tokens, 'total');
  assertEq(r.dflash.n, 3, 'dflash.n');
  assertEq(r.dflash.drafted, r.choices.reduce((n, c) => n + c.dflash.drafted, 0), 'dflash.drafted summed');
  // Without a seed: one seed drawn for the request, the choices still differ.
  const u = await chat(plain, { ...nBody, seed: undefined });
  assertEq(u.choices.length, 3, 'unseeded choices');
  assert(new Set(u.choices.map((c) => JSON.stringify(c.tokens))).size > 1, 'unseeded choices all equal');
});

await check('streamed n = 2: contiguous chunks per choice, one finish each, one [DONE]; reassembles to the unstreamed', async () => {
  const body = { ...nBody, n: 2 };
  const want = await chat(plain, body);
  const s = await chat(draft, { ...body, stream: true, stream_options: { include_usage: true } });
  const got = [{ text: '', tokens: null, finish: null, logprobs: [] }, { text: '', tokens: null, finish: null, logprobs: [] }];
  const order = [];
  let usage = null;
  for await (const c of s) {
    if (c.usage) usage = c.usage;
    if (!c.choices.length) continue;
    const ch = c.choices[0];
    assert(c.choices.length === 1, 'one choice per chunk');
    if (order[order.length - 1] !== ch.index) order.push(ch.index);
    const g = got[ch.index];
    assert(g.finish === null, `choice ${ch.index} has a chunk after its finish`);
    g.text += ch.delta.content || '';
    if (ch.logprobs) g.logprobs.push(...ch.logprobs.content);
    if (ch.tokens) g.tokens = ch.tokens;
    if (ch.finish_reason) g.finish = ch.finish_reason;
  }
  assertEq(order, [0, 1], 'each choice\'s chunks are contiguous, in order');
  for (let i = 0; i < 2; ++i) {
    assertEq(got[i].text, want.choices[i].message.content, `choice ${i} text`);
    assertEq(got[i].tokens, want.choices[i].tokens, `choice ${i} ids`);
    assertEq(got[i].finish, want.choices[i].finish_reason, `choice ${i} finish_reason`);
    assertEq(got[i].logprobs, want.choices[i].logprobs.content, `choice ${i} logprobs`);
  }
  const counts = (u) => [u.prompt_tokens, u.completion_tokens, u.total_tokens];
  assert(usage, 'no usage chunk');
  assertEq(counts(usage), counts(want.usage), 'usage');
  // Legacy completions, streamed n = 2, the same way; and exactly one [DONE] on the wire.
  const cb = { ...completionBody, temperature: 0.8, seed: 5, n: 2, max_tokens: 16 };
  const cw = await complete(plain, cb);
  const raw = await post(fixed.url + '/v1/completions', { ...cb, stream: true });
  assertEq(raw.status, 200, 'status');
  const events = raw.text.split('\n\n').filter((e) => e.startsWith('data: ')).map((e) => e.slice(6));
  assertEq(events.filter((e) => e === '[DONE]').length, 1, '[DONE] count');
  assertEq(events[events.length - 1], '[DONE]', '[DONE] last');
  const texts = ['', ''];
  const finishes = [null, null];
  for (const e of events.slice(0, -1)) {
    const ch = JSON.parse(e).choices[0];
    texts[ch.index] += ch.text;
    if (ch.finish_reason) finishes[ch.index] = ch.finish_reason;
  }
  assertEq(texts, cw.choices.map((c) => c.text), 'completions texts');
  assertEq(finishes, cw.choices.map((c) => c.finish_reason), 'completions finish reasons');
});

await check('out-of-range values are refused with a 400 naming the parameter', async () => {
  const many = Object.fromEntries(Array.from({ length: 301 }, (_, i) => [String(i), 1]));
  const cases = [
    ['/chat/completions', { presence_penalty: 2.5 }, 'presence_penalty'],
    ['/chat/completions', { presence_penalty: -2.01 }, 'presence_penalty'],
    ['/chat/completions', { frequency_penalty: -3 }, 'frequency_penalty'],
    ['/completions', { frequency_penalty: 2.5 }, 'frequency_penalty'],
    ['/chat/completions', { logit_bias: { 5: 101 } }, 'logit_bias'],
    ['/chat/completions', { logit_bias: { 5: -100.5 } }, 'logit_bias'],
    ['/chat/completions', { logit_bias: { abc: 1 } }, 'logit_bias'],
    ['/chat/completions', { logit_bias: { '-1': 1 } }, 'logit_bias'],
    ['/chat/completions', { logit_bias: { 99999999: 1 } }, 'logit_bias'],
    ['/completions', { logit_bias: { 99999999: 1 } }, 'logit_bias'],
    ['/chat/completions', { logit_bias: { 5: 'x' } }, 'logit_bias'],
    ['/chat/completions', { logit_bias: [1] }, 'logit_bias'],
    ['/chat/completions', { logit_bias: many }, 'logit_bias'],
    ['/chat/completions', { n: 0 }, 'n'],
    ['/chat/completions', { n: 17 }, 'n'],
    ['/completions', { n: 1.5 }, 'n'],
    ['/completions', { best_of: 3 }, 'best_of'],
  ];
  for (const [route, extra, param] of cases) {
    const body = { ...(route === '/completions' ? completionBody : chatBody), ...extra };
    const r = await post(noDraft.url + '/v1' + route, body);
    assert(r.status === 400 && r.json.error.param === param,
      `${route} ${JSON.stringify(extra).slice(0, 80)}: ${r.status} ${r.text.slice(0, 200)}`);
  }
  // Through the client too: its error carries the status and the parameter.
  let err = null;
  try { await chat(plain, { frequency_penalty: 9 }); } catch (e) { err = e; }
  assert(err && err.status === 400 && err.param === 'frequency_penalty', 'client error: ' + (err && err.message));
  // Edge values pass: +-2, +-100, 16 choices, an empty logit_bias.
  const ok = await post(noDraft.url + '/v1/chat/completions',
    { ...chatBody, max_tokens: 2, presence_penalty: -2, frequency_penalty: 2, logit_bias: { 5: 100, 6: -100 }, n: 16 });
  assert(ok.status === 200 && ok.json.choices.length === 16, `edge values: ${ok.status} ${ok.text.slice(0, 200)}`);
  const empty = await post(noDraft.url + '/v1/completions', { ...completionBody, max_tokens: 2, logit_bias: {} });
  assertEq(empty.status, 200, 'empty logit_bias');
});

await checks.finish();
