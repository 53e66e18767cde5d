// The OpenAI API of `dflash serve`, through the official `openai` npm client: chat and
// completions, streaming, usage, stop sequences, seeds, thinking on/off, the think cap,
// the dflash block, models/health/metrics/tokenize, and prefix caching across turns.
import fs from 'node:fs';
import path from 'node:path';
import OpenAI from 'openai';
import {
  Checks, assert, assertEq, overallTimeout, post, request, startServer,
  RANDOM_DRAFT, RANDOM_TARGET, DEMO35_DRAFT,
} from './server_harness.mjs';

const checks = new Checks('test_server_api');
overallTimeout(150000, checks);
const check = (n, f) => checks.check(n, f);

const QUESTION = 'Write a Python function that reverses a list.';
const greedy = { temperature: 0, max_tokens: 64 };
const noThink = { chat_template_kwargs: { enable_thinking: false } };

async function collect(stream) {
  let content = '', reasoning = '', last = null, usage = null, finish = null, chunks = 0, roles = 0;
  for await (const c of stream) {
    chunks++;
    if (c.usage) usage = c.usage;
    if (c.dflash) last = c;
    const ch = c.choices && c.choices[0];
    if (!ch) continue;
    if (ch.finish_reason) finish = ch.finish_reason;
    const d = ch.delta || {};
    if (d.role) roles++;
    if (d.content) content += d.content;
    if (d.reasoning_content) reasoning += d.reasoning_content;
    if (ch.text) content += ch.text;
  }
  return { content, reasoning, last, usage, finish, chunks, roles };
}

const server = await startServer();
const client = new OpenAI({ baseURL: server.url + '/v1', apiKey: 'unused', timeout: 60000, maxRetries: 0 });
const modelId = (await client.models.list()).data[0].id;

await check('GET /health is 200 ok', async () => {
  const r = await request(server.url + '/health');
  assertEq([r.status, r.json], [200, { status: 'ok' }], '/health');
});

await check('/v1/models lists the served model with its meta', async () => {
  const list = await client.models.list();
  assertEq(list.data.length, 1, 'models');
  const m = list.data[0];
  assert(m.object === 'model' && typeof m.id === 'string' && m.id.length > 0, 'model entry ' + JSON.stringify(m));
  assert(m.meta && m.meta.ctx_size > 0 && m.meta.vocab > 0, 'meta ' + JSON.stringify(m.meta));
});

let base = null;
await check('chat non-stream: content, finish_reason, usage, dflash block', async () => {
  const r = await client.chat.completions.create({ model: modelId, messages: [{ role: 'user', content: QUESTION }], ...greedy, ...noThink });
  base = r;
  assert(r.object === 'chat.completion' && r.id.startsWith('chatcmpl-'), 'object/id ' + r.object + ' ' + r.id);
  const c = r.choices[0];
  assert(typeof c.message.content === 'string' && c.message.content.length > 0, 'empty content');
  assert(c.message.role === 'assistant', 'role');
  assert(['stop', 'length'].includes(c.finish_reason), 'finish_reason ' + c.finish_reason);
  const u = r.usage;
  assert(u.prompt_tokens > 0 && u.completion_tokens > 0 && u.total_tokens === u.prompt_tokens + u.completion_tokens, 'usage ' + JSON.stringify(u));
  assert(u.prompt_tokens_details && Number.isInteger(u.prompt_tokens_details.cached_tokens), 'cached_tokens missing');
  const d = r.dflash;
  for (const k of ['accept_rate', 'accept_len', 'drafted', 'accepted', 'block_size', 'speculation', 'tok_per_s', 'prefill_tok_per_s', 'ttft_ms', 'think_capped'])
    assert(k in d, 'dflash.' + k + ' missing: ' + JSON.stringify(d));
  assert(d.tok_per_s > 0 && d.ttft_ms > 0, 'timings ' + JSON.stringify(d));
});

await check('max_tokens: finish_reason length and exactly that many tokens', async () => {
  const r = await client.chat.completions.create({ model: modelId, messages: [{ role: 'user', content: QUESTION }], temperature: 0, max_tokens: 5, ...noThink });
  assertEq([r.choices[0].finish_reason, r.usage.completion_tokens], ['length', 5], 'finish/tokens');
  const r2 = await client.chat.completions.create({ model: modelId, messages: [{ role: 'user', content: QUESTION }], temperature: 0, max_completion_tokens: 7, ...noThink });
  assertEq(r2.usage.completion_tokens, 7, 'max_completion_tokens');
});

await check('chat stream: same text as non-stream, role first, usage and dflash at the end', async () => {
  const s = await collect(await client.chat.completions.create({
    model: modelId, messages: [{ role: 'user', content: QUESTION }], ...greedy, ...noThink, stream: true, stream_options: { include_usage: true },
  }));
  assertEq(s.content, base.choices[0].message.content, 'streamed content');
  assert(s.roles === 1, 'role chunks ' + s.roles);
  assert(s.chunks > 3, 'only ' + s.chunks + ' chunks');
  assertEq(s.finish, base.choices[0].finish_reason, 'finish_reason');
  assert(s.usage && s.usage.completion_tokens === base.usage.completion_tokens, 'usage ' + JSON.stringify(s.usage));
  assert(s.last && s.last.dflash && 'accept_rate' in s.last.dflash, 'final chunk has no dflash block');
});

await check('stop sequence across token boundaries: never emitted, non-stream and stream', async () => {
  const full = base.choices[0].message.content;
  const k = Math.floor(full.length / 3);
  const stop = full.slice(k, k + 6);
  const expected = full.slice(0, full.indexOf(stop));
  const r = await client.chat.completions.create({ model: modelId, messages: [{ role: 'user', content: QUESTION }], ...greedy, ...noThink, stop: [stop, 'NEVER-THERE'] });
  assertEq(r.choices[0].message.content, expected, 'content with stop ' + JSON.stringify(stop));
  assertEq(r.choices[0].finish_reason, 'stop', 'finish_reason');
  const s = await collect(await client.chat.completions.create({ model: modelId, messages: [{ role: 'user', content: QUESTION }], ...greedy, ...noThink, stop, stream: true }));
  assertEq(s.content, expected, 'streamed content with stop');
  assertEq(s.finish, 'stop', 'stream finish_reason');
});

await check('seed: same seed same sample, other seeds differ', async () => {
  const ask = (seed) => client.chat.completions.create({ model: modelId, messages: [{ role: 'user', content: 'Tell me a story.' }], temperature: 1.0, max_tokens: 24, seed, ...noThink })
    .then((r) => r.choices[0].message.content);
  const a = await ask(42), b = await ask(42);
  assertEq(a, b, 'seed 42 twice');
  const others = [await ask(1), await ask(2), await ask(3)];
  assert(others.some((o) => o !== a), 'seeds 1, 2, 3 all gave the seed-42 text');
});

// The default demo pair carries a Qwen3.5-style template: thinking on opens <think> in the
// generation prompt, off renders the empty think block there.
await check('enable_thinking on opens <think>, off renders the empty think block', async () => {
  const ask = (on) => client.chat.completions.create({ model: modelId, messages: [{ role: 'user', content: QUESTION }], temperature: 0, max_tokens: 4, chat_template_kwargs: { enable_thinking: on } });
  const on = await ask(true), off = await ask(false);
  const want = `<|im_start|>user\n${QUESTION}<|im_end|>\n<|im_start|>assistant\n`;
  const t = await post(server.url + '/tokenize', { content: want + '<think>\n' });
  const t2 = await post(server.url + '/tokenize', { content: want + '<think>\n\n</think>\n\n' });
  assertEq([on.usage.prompt_tokens, off.usage.prompt_tokens], [t.json.tokens.length, t2.json.tokens.length], 'prompt tokens on/off');
  assert(!off.choices[0].message.reasoning_content, 'reasoning with thinking off');
});

await check('think_cap 30: thinking stops at exactly 30 tokens, </think> forced, answer follows', async () => {
  const close = (await post(server.url + '/tokenize', { content: '</think>' })).json.tokens;
  assertEq(close.length, 1, '</think> is one token');
  // The prompt leaves the output inside an open <think> (the demo model never thinks on its own).
  const r = await client.chat.completions.create({
    model: modelId, temperature: 0, max_tokens: 120, think_cap: 30, return_tokens: true, continue_final_message: true,
    messages: [{ role: 'user', content: QUESTION }, { role: 'assistant', content: '<think>\n' }],
  });
  const c = r.choices[0];
  assert(r.dflash.think_capped === true, 'think_capped ' + r.dflash.think_capped);
  assert(c.message.reasoning_content && c.message.reasoning_content.length > 0, 'no reasoning');
  assert(c.message.content && c.message.content.length > 0, 'no answer after the cap');
  assertEq(c.tokens[30], close[0], 'token 30 is </think>');
  assert(r.usage.completion_tokens <= 120, 'completion tokens ' + r.usage.completion_tokens);
  const s = await collect(await client.chat.completions.create({
    model: modelId, temperature: 0, max_tokens: 120, think_cap: 30, continue_final_message: true, stream: true,
    messages: [{ role: 'user', content: QUESTION }, { role: 'assistant', content: '<think>\n' }],
  }));
  assertEq([s.reasoning, s.content], [c.message.reasoning_content, c.message.content], 'streamed reasoning/content');
  assert(s.last.dflash.think_capped === true, 'stream think_capped');
});

await check('think_cap 0 (off): thinking runs on, nothing forced', async () => {
  const r = await client.chat.completions.create({
    model: modelId, temperature: 0, max_tokens: 60, think_cap: 0, continue_final_message: true,
    messages: [{ role: 'user', content: QUESTION }, { role: 'assistant', content: '<think>\n' }],
  });
  assert(r.dflash.think_capped === false, 'capped with think_cap 0');
});

await check('content parts are joined; unknown fields are ignored', async () => {
  const a = await client.chat.completions.create({ model: modelId, ...greedy, ...noThink, messages: [{ role: 'user', content: [{ type: 'text', text: 'Write a Python' }, { type: 'text', text: 'function.' }] }], some_unknown_field: { x: 1 } });
  const b = await client.chat.completions.create({ model: modelId, ...greedy, ...noThink, messages: [{ role: 'user', content: 'Write a Python\nfunction.' }] });
  assertEq(a.choices[0].message.content, b.choices[0].message.content, 'parts vs string');
});

await check('/v1/completions: text prompt and id prompt, non-stream and stream', async () => {
  const prompt = 'def reverse_list(items):\n';
  const r = await client.completions.create({ model: modelId, prompt, temperature: 0, max_tokens: 24 });
  assert(r.object === 'text_completion' && r.choices[0].text.length > 0, 'completion ' + JSON.stringify(r).slice(0, 200));
  const ids = (await post(server.url + '/tokenize', { content: prompt })).json.tokens;
  const r2 = await client.completions.create({ model: modelId, prompt: ids, temperature: 0, max_tokens: 24 });
  assertEq(r2.choices[0].text, r.choices[0].text, 'ids vs text prompt');
  const s = await collect(await client.completions.create({ model: modelId, prompt, temperature: 0, max_tokens: 24, stream: true, stream_options: { include_usage: true } }));
  assertEq(s.content, r.choices[0].text, 'streamed completion');
  assertEq(s.usage.completion_tokens, r.usage.completion_tokens, 'stream usage');
});

await check('cached_tokens > 0 on a follow-up turn', async () => {
  const first = [{ role: 'user', content: 'Write a function that adds two numbers.' }];
  const r1 = await client.chat.completions.create({ model: modelId, messages: first, ...greedy, ...noThink });
  const r2 = await client.chat.completions.create({
    model: modelId, ...greedy, ...noThink,
    messages: [...first, { role: 'assistant', content: r1.choices[0].message.content }, { role: 'user', content: 'Now make it multiply.' }],
  });
  const cached = r2.usage.prompt_tokens_details.cached_tokens;
  // The template drops the earlier turn's empty think block (4 tokens), so the reuse ends
  // before it; the hybrid demo's recurrent state resumes from the checkpoint the server placed
  // there, one token short of it.
  assert(cached > 0 && cached >= r1.usage.prompt_tokens - 5, `cached ${cached}, first prompt ${r1.usage.prompt_tokens}`);
  assert(cached < r2.usage.prompt_tokens, 'all cached?');
});

await check('/tokenize and /detokenize round trip (llama.cpp shapes)', async () => {
  const content = 'Hello, wörld! 你好 <think> def f(x): return x\n';
  const t = await post(server.url + '/tokenize', { content });
  assert(t.status === 200 && Array.isArray(t.json.tokens) && t.json.tokens.every(Number.isInteger), 'tokens ' + t.text);
  const d = await post(server.url + '/detokenize', { tokens: t.json.tokens });
  assertEq(d.json.content, content, 'round trip');
  const p = await post(server.url + '/tokenize', { content: 'ab', with_pieces: true });
  assert(p.json.tokens.every((x) => Number.isInteger(x.id) && 'piece' in x), 'pieces ' + p.text);
});

await check('/metrics: Prometheus text with requests, tokens, speeds, acceptance, queue, speculation, memory', async () => {
  const r = await request(server.url + '/metrics');
  assert(r.status === 200 && /text\/plain/.test(r.headers['content-type']), 'status/type');
  const value = (name) => { const m = new RegExp('^' + name + ' ([0-9.e+-]+)$', 'm').exec(r.text); return m ? Number(m[1]) : NaN; };
  assert(value('dflash_requests_total') >= 10, 'requests ' + value('dflash_requests_total'));
  assert(value('dflash_generated_tokens_total') > 100, 'generated');
  assert(value('dflash_prompt_tokens_total') > 100, 'prompt tokens');
  assert(value('dflash_decode_tokens_per_second') > 0, 'tok/s');
  assert(value('dflash_queue_depth') === 0, 'queue depth');
  assert(!Number.isNaN(value('dflash_acceptance_rate')), 'acceptance rate');
  assert(value('dflash_peak_resident_memory_bytes') > 1e6, 'peak rss');
  assert(/dflash_speculation_requests_total\{state="on"\} \d+/.test(r.text) && /state="off"/.test(r.text), 'speculation counters');
});

await check('/v1/stats reports peak memory for the page; / serves the page', async () => {
  const s = await request(server.url + '/v1/stats');
  assert(s.json.peak_rss_bytes > 1e6 && s.json.requests > 0, 'stats ' + s.text.slice(0, 200));
  const page = await request(server.url + '/');
  assert(page.status === 200 && page.text.includes('<title>dflash chat</title>'), 'page');
});

// Speculation must be visible and accepted on the shipped (hybrid) demo pair. The adaptive
// controller may rightly stop drafting on this tiny target after an unlucky first block, so
// this runs on a server that always drafts full blocks.
if (fs.existsSync(path.join(DEMO35_DRAFT, 'config.json'))) {
  await check('demo pair: speculation on with accept_rate > 0', async () => {
    const fixed = await startServer(['--no-adaptive']);
    try {
      const r = await post(fixed.url + '/v1/chat/completions', { messages: [{ role: 'user', content: QUESTION }], temperature: 0, max_tokens: 128, ...noThink });
      const d = r.json.dflash;
      assert(d.speculation === 'on' && d.drafted > 0 && d.accept_rate > 0 && d.accept_len > 1, 'dflash ' + JSON.stringify(d));
    } finally {
      await fixed.stop();
    }
  });
} else {
  checks.fail('demo pair: speculation on with accept_rate > 0', `the demo draft ${DEMO35_DRAFT} does not exist, so acceptance on the demo pair cannot be checked`);
}
await server.stop();

// Mechanics with a draft, whatever the demo state: the random test pair. Its random draft
// accepts almost nothing, so the adaptive controller may stop drafting at a moment that
// depends on measured times, so on how loaded the machine is; this check is about the
// report, so the server always drafts.
const pair = await startServer(['--model', RANDOM_TARGET, '--draft', RANDOM_DRAFT, '--alias', 'pair', '--no-adaptive']);
await check('random pair: dflash block reports drafting (speculation on, drafted > 0, block size)', async () => {
  const c = new OpenAI({ baseURL: pair.url + '/v1', apiKey: 'unused', timeout: 60000, maxRetries: 0 });
  const r = await c.completions.create({ model: 'pair', prompt: [5, 9, 17, 33], temperature: 0, max_tokens: 48, ignore_eos: true });
  const d = r.dflash;
  assert(d.speculation === 'on' && d.drafted > 0 && d.block_size === 8, 'dflash ' + JSON.stringify(d));
  const m = await request(pair.url + '/metrics');
  assert(/dflash_drafted_tokens_total [1-9]/.test(m.text), 'metrics drafted');
});
await pair.stop();

await checks.finish();
