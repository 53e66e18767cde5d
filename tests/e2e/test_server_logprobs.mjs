// logprobs / top_logprobs through the official `openai` client on the shipped demo pair (the
// default `dflash serve`): greedy chat and legacy completions, streamed and not, with the
// draft (speculation on) and without (--no-draft), must give the same tokens and bit-equal
// logprob numbers (compared as JSON text, i.e. as exact doubles), and the numbers must be the
// log-softmax of what `dflash logits` prints for the same ids at the same positions.
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import OpenAI from 'openai';
import {
  BIN, SRC, Checks, assert, assertEq, cliGenerate, overallTimeout, post, startServer, DEMO35_TARGET,
} from './server_harness.mjs';

const checks = new Checks('test_server_logprobs');
overallTimeout(90000, checks);
const check = (n, f) => checks.check(n, f);

const QUESTION = 'Write a Python function that reverses a list.';
const PROMPT = 'import os\n\ndef list_files(path):\n';
const MAX = 24;
const TOP = 5;

// Three servers of the demo pair, all up at once: the default (the adaptive controller may
// stop drafting on this tiny target after an unlucky block), one that drafts a full block at
// every step (--no-adaptive, as test_server_api's acceptance check: every token's logprobs
// then come from a verify forward, and some drafts must be accepted), and --no-draft.
const adaptive = await startServer([]);
const fixed = await startServer(['--no-adaptive']);
const noDraft = await startServer(['--no-draft']);
const clientOf = (s) => new OpenAI({ baseURL: s.url + '/v1', apiKey: 'unused', timeout: 60000, maxRetries: 0 });
const servers = { draft: clientOf(fixed), adaptive: clientOf(adaptive), plain: clientOf(noDraft) };
const MODES = ['draft', 'adaptive', 'plain'];
const OTHERS = ['draft-false', 'draft-true', 'adaptive-false', 'adaptive-true', 'plain-true'];

// Speculation was on and (for the always-drafting server) drafts were accepted.
function checkSpeculation(mode, d) {
  if (mode === 'plain') return assertEq(d.speculation, 'off', 'speculation');
  assert(d.speculation === 'on' && d.drafted > 0, 'no drafting: ' + JSON.stringify(d));
  // (A plain step or two remain where a block would pass max_tokens.)
  if (mode === 'draft') assert(d.accepted > 0 && d.steps > d.plain_steps, 'no draft accepted: ' + JSON.stringify(d));
}

const chatBody = {
  model: 'default', messages: [{ role: 'user', content: QUESTION }], temperature: 0, max_tokens: MAX,
  logprobs: true, top_logprobs: TOP, return_tokens: true, chat_template_kwargs: { enable_thinking: false },
};
const completionBody = { model: 'default', prompt: PROMPT, temperature: 0, max_tokens: MAX, logprobs: 3, return_tokens: true };

async function chat(client, stream) {
  if (!stream) {
    const r = await client.chat.completions.create(chatBody);
    const c = r.choices[0];
    return { ids: c.tokens, text: c.message.content, logprobs: c.logprobs.content, dflash: r.dflash, usage: r.usage, chunks: [] };
  }
  const s = await client.chat.completions.create({ ...chatBody, stream: true });
  const out = { ids: null, text: '', logprobs: [], dflash: null, chunks: [] };
  for await (const c of s) {
    const ch = c.choices[0];
    if (c.dflash) out.dflash = c.dflash;
    if (ch.tokens) out.ids = ch.tokens;
    const text = (ch.delta.content || '') + (ch.delta.reasoning_content || '');
    out.text += ch.delta.content || '';
    const entries = ch.logprobs ? ch.logprobs.content : [];
    out.logprobs.push(...entries);
    out.chunks.push({ text, entries: entries.length, final: !!ch.finish_reason });
  }
  return out;
}

async function complete(client, stream) {
  if (!stream) {
    const r = await client.completions.create(completionBody);
    const c = r.choices[0];
    return { ids: c.tokens, text: c.text, logprobs: c.logprobs, dflash: r.dflash };
  }
  const s = await client.completions.create({ ...completionBody, stream: true });
  const out = { ids: null, text: '', dflash: null, logprobs: { tokens: [], token_logprobs: [], top_logprobs: [], text_offset: [] } };
  for await (const c of s) {
    const ch = c.choices[0];
    if (c.dflash) out.dflash = c.dflash;
    if (ch.tokens) out.ids = ch.tokens;
    out.text += ch.text;
    if (ch.logprobs) for (const k of Object.keys(out.logprobs)) out.logprobs[k].push(...ch.logprobs[k]);
  }
  return out;
}

// Row i of `dflash logits` is the distribution of token i+1: the log-softmax of the rows that
// chose the generated ids, by the server's formula (max, then a sum of exp(x - max) in index
// order, in double).
function referenceLogprobs(promptIds, genIds) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'dflash-logprobs-'));
  const out = path.join(dir, 'logits.f32');
  const ids = [...promptIds, ...genIds.slice(0, -1)];
  const r = spawnSync(BIN, ['logits', '--model', DEMO35_TARGET, '--threads', '2', '--prompt-ids', ids.join(','), '--out', out],
    { cwd: SRC, encoding: 'utf8', timeout: 60000 });
  if (r.status !== 0) throw new Error('dflash logits failed: ' + r.stderr);
  const meta = JSON.parse(r.stdout.trim().split('\n').pop());
  const buf = fs.readFileSync(out);
  fs.rmSync(dir, { recursive: true, force: true });
  const all = new Float32Array(buf.buffer, buf.byteOffset, buf.byteLength / 4);
  const V = meta.vocab;
  assertEq(all.length, ids.length * V, 'logits size');
  const rows = [];
  for (let i = 0; i < genIds.length; ++i) {
    const row = all.subarray((promptIds.length - 1 + i) * V, (promptIds.length + i) * V);
    let mx = -Infinity;
    for (const x of row) if (x > mx) mx = x;
    let sum = 0;
    for (const x of row) sum += Math.exp(x - mx);
    const lse = mx + Math.log(sum);
    const lp = Array.from(row, (x) => x - lse);
    const order = lp.map((v, id) => [v, id]).sort((a, b) => b[0] - a[0] || a[1] - b[1]);
    rows.push({ chosen: lp[genIds[i]], top: order.slice(0, TOP).map(([v]) => v) });
  }
  return rows;
}

// Every other mode's result (draft or not, streamed or not) has the unstreamed plain
// request's ids and bit-identical logprobs (JSON numbers compared exactly); returns that one.
function sameAsPlain(results) {
  const ref = results['plain-false'];
  assert(ref, 'the plain request failed');
  for (const k of OTHERS) {
    assert(results[k], k + ' failed');
    assertEq(results[k].ids, ref.ids, k + ' ids');
    assertEq(results[k].logprobs, ref.logprobs, k + ' logprobs (JSON text: exact doubles)');
  }
  return ref;
}

function near(got, want, what) {
  const tol = 1e-6 * Math.max(1, Math.abs(want));
  if (!(Math.abs(got - want) <= tol)) throw new Error(`${what}: ${got} vs dflash logits' ${want}`);
}

const chats = {};
for (const mode of MODES)
  for (const stream of [false, true])
    await check(`chat ${mode} ${stream ? 'stream' : 'plain'}: logprobs true, top_logprobs ${TOP}`, async () => {
      const r = await chat(servers[mode], stream);
      assertEq(r.logprobs.length, MAX, 'one entry per generated token');
      assertEq(r.ids.length, MAX, 'tokens');
      checkSpeculation(mode, r.dflash);
      for (const [i, e] of r.logprobs.entries()) {
        assert(typeof e.token === 'string' && typeof e.logprob === 'number' && e.logprob <= 0, `entry ${i} ` + JSON.stringify(e));
        assertEq(e.top_logprobs.length, TOP, `entry ${i} top_logprobs`);
        for (let k = 1; k < TOP; ++k) assert(e.top_logprobs[k - 1].logprob >= e.top_logprobs[k].logprob, `entry ${i} not sorted`);
        // Greedy: the chosen token is the most likely one (lowest id on ties, as argmax).
        assertEq([e.top_logprobs[0].token, e.top_logprobs[0].logprob, e.top_logprobs[0].bytes], [e.token, e.logprob, e.bytes], `entry ${i} top 1`);
      }
      // The chosen tokens' raw bytes are the answer (no stop string, length-limited).
      assertEq(Buffer.from(r.logprobs.flatMap((e) => e.bytes)).toString('utf8'), r.text, 'bytes joined');
      if (stream) {
        // Every chunk that carries text carries the entries of its tokens; nothing is lost.
        for (const c of r.chunks) if (c.text) assert(c.entries > 0, 'a chunk with text but no logprobs: ' + JSON.stringify(c));
        assertEq(r.chunks.reduce((n, c) => n + c.entries, 0), MAX, 'entries over all chunks');
      }
      chats[`${mode}-${stream}`] = r;
    });

await check('chat: tokens and logprob numbers are bit-identical with and without the draft, streamed or not', async () => {
  sameAsPlain(chats);
});

await check('chat, sampled with a seed: the same tokens and bit-identical logprobs with and without the draft', async () => {
  // The values are the raw distribution's, so temperature does not change them; the seed
  // fixes the draws, which speculation reproduces (docs/server.md, Logprobs).
  const body = { ...chatBody, temperature: 0.8, top_p: 0.95, seed: 7 };
  const [a, b] = await Promise.all([servers.draft.chat.completions.create(body), servers.plain.chat.completions.create(body)]);
  assert(a.dflash.drafted > 0, 'no drafting: ' + JSON.stringify(a.dflash));
  assertEq(a.choices[0].tokens, b.choices[0].tokens, 'ids');
  assertEq(a.choices[0].logprobs, b.choices[0].logprobs, 'logprobs (JSON text: exact doubles)');
  assertEq(a.choices[0].logprobs.content.length, MAX, 'entries');
});

await check('chat: logprobs equal the log-softmax of `dflash logits` at the same positions', async () => {
  const ref = chats['plain-false'];
  const cli = cliGenerate(['--model', DEMO35_TARGET, '--chat', '--prompt', QUESTION, '--max-tokens', String(MAX)]);
  assertEq(ref.usage.prompt_tokens, cli.prompt_ids.length, 'the server renders the CLI prompt');
  assertEq(ref.ids, cli.ids, 'the server generates the CLI ids');
  const want = referenceLogprobs(cli.prompt_ids, ref.ids);
  for (const [i, e] of ref.logprobs.entries()) {
    near(e.logprob, want[i].chosen, `token ${i}`);
    for (let k = 0; k < TOP; ++k) near(e.top_logprobs[k].logprob, want[i].top[k], `token ${i} top ${k}`);
  }
});

const completions = {};
for (const mode of MODES)
  for (const stream of [false, true])
    await check(`completions ${mode} ${stream ? 'stream' : 'plain'}: logprobs 3`, async () => {
      const r = await complete(servers[mode], stream);
      const lp = r.logprobs;
      assertEq(lp.tokens.length, MAX, 'tokens');
      assertEq([lp.token_logprobs.length, lp.top_logprobs.length, lp.text_offset.length], [MAX, MAX, MAX], 'list lengths');
      checkSpeculation(mode, r.dflash);
      assertEq(lp.tokens.join(''), r.text, 'tokens joined');
      for (let i = 0; i < MAX; ++i) {
        const top = Object.entries(lp.top_logprobs[i]);
        assert(top.length === 3 || top.length === 4, `entry ${i}: ${top.length} alternatives`);
        assertEq(lp.top_logprobs[i][lp.tokens[i]], lp.token_logprobs[i], `entry ${i}: the chosen token is in its dict`);
        for (let k = 1; k < top.length; ++k) assert(top[k - 1][1] >= top[k][1], `entry ${i} not sorted`);
        assertEq(lp.text_offset[i], [...lp.tokens.slice(0, i).join('')].length, `text_offset ${i}`);
      }
      completions[`${mode}-${stream}`] = r;
    });

await check('completions: bit-identical with and without the draft, and equal to `dflash logits`', async () => {
  const ref = sameAsPlain(completions);
  const tok = await post(noDraft.url + '/tokenize', { content: PROMPT });
  const want = referenceLogprobs(tok.json.tokens, ref.ids);
  for (let i = 0; i < MAX; ++i) {
    near(ref.logprobs.token_logprobs[i], want[i].chosen, `token ${i}`);
    const top = Object.values(ref.logprobs.top_logprobs[i]).slice(0, 3);
    for (let k = 0; k < 3; ++k) near(top[k], want[i].top[k], `token ${i} top ${k}`);
  }
});

await check('refused as OpenAI refuses: top_logprobs without logprobs, more than 20', async () => {
  const cases = [
    ['/chat/completions', { ...chatBody, logprobs: undefined }, 'top_logprobs'],
    ['/chat/completions', { ...chatBody, logprobs: false }, 'top_logprobs'],
    ['/chat/completions', { ...chatBody, top_logprobs: 21 }, 'top_logprobs'],
    ['/chat/completions', { ...chatBody, logprobs: 1 }, 'logprobs'],
    ['/completions', { ...completionBody, logprobs: 21 }, 'logprobs'],
    ['/completions', { ...completionBody, logprobs: true }, 'logprobs'],
  ];
  for (const [route, body, param] of cases) {
    const r = await post(noDraft.url + '/v1' + route, body);
    assert(r.status === 400 && r.json.error.param === param, `${route} ${JSON.stringify(body).slice(0, 80)}: ${r.status} ${r.text.slice(0, 200)}`);
  }
  // Their neutral values pass, and without logprobs nothing is reported.
  const r = await post(noDraft.url + '/v1/chat/completions', { ...chatBody, logprobs: false, top_logprobs: 0 });
  assert(r.status === 200 && r.json.choices[0].logprobs === null, `neutral: ${r.status} ${r.text.slice(0, 200)}`);
  const c = await post(noDraft.url + '/v1/completions', { ...completionBody, logprobs: null });
  assert(c.status === 200 && c.json.choices[0].logprobs === null, `completions without logprobs: ${c.status}`);
});

await checks.finish();
