// Many clients at once against the single-flight generator: every answer arrives, each equals
// the same prompt's answer when asked alone (greedy), none is duplicated or lost; a full queue
// answers 503 with Retry-After; clients that leave mid-stream free the generator at once.
import http from 'node:http';
import {
  Checks, assert, assertEq, demoDraftPresent, overallTimeout, post, request, sleep, sseEvents, startServer,
  DEMO_DRAFT, DEMO_TARGET,
} from './server_harness.mjs';

const checks = new Checks('test_server_concurrency');
overallTimeout(170000, checks);

const args = ['--model', DEMO_TARGET, '--queue-size', '32'];
if (demoDraftPresent()) args.push('--draft', DEMO_DRAFT, '--block-size', '4');
const server = await startServer(args);
const url = server.url;

const PROMPTS = Array.from({ length: 8 }, (_, i) => [
  'Write a Python function that reverses a list.', 'Show the class `Counter`.', 'Implement `json.dumps`.',
  'Write a function to parse a URL.', 'Show the function `os.path.join`.', 'Implement a binary search.',
  'Write a class for a linked list.', 'Show the method `dict.get`.',
][i]);
const MAX = 24;

async function ask(prompt, stream) {
  const body = { messages: [{ role: 'user', content: prompt }], temperature: 0, max_tokens: MAX, chat_template_kwargs: { enable_thinking: false }, stream };
  const r = await post(url + '/v1/chat/completions', body, { timeoutMs: 120000 });
  if (r.status !== 200) throw new Error('status ' + r.status + ' ' + r.text.slice(0, 200));
  if (!stream) return { id: r.json.id, text: r.json.choices[0].message.content };
  const ev = sseEvents(r.text);
  assert(ev[ev.length - 1] === '[DONE]', 'stream did not end with [DONE]');
  const chunks = ev.filter((e) => e !== '[DONE]');
  const ids = new Set(chunks.map((c) => c.id));
  assert(ids.size === 1, 'chunks of one stream carry ' + ids.size + ' ids');
  return { id: chunks[0].id, text: chunks.map((c) => (c.choices[0] && c.choices[0].delta.content) || '').join('') };
}

const expected = new Map();
await checks.check('single-request answers (the reference)', async () => {
  for (const p of PROMPTS) expected.set(p, (await ask(p, false)).text);
  assert([...expected.values()].every((t) => t.length > 0), 'empty reference answer');
});

await checks.check('16 clients x 4 requests at once: all answered, each equal to its single answer, no duplicates', async () => {
  const t0 = Date.now();
  const results = await Promise.all(Array.from({ length: 16 }, async (_, c) => {
    const out = [];
    for (let k = 0; k < 4; k++) {
      const p = PROMPTS[(c * 4 + k) % PROMPTS.length];
      out.push({ p, ...(await ask(p, (c + k) % 2 === 0)) });
    }
    return out;
  }));
  const flat = results.flat();
  assertEq(flat.length, 64, 'answers');
  assertEq(new Set(flat.map((r) => r.id)).size, 64, 'distinct response ids');
  const wrong = flat.filter((r) => r.text !== expected.get(r.p));
  assert(wrong.length === 0, `${wrong.length} answers differ, e.g. ${JSON.stringify(wrong[0])}`);
  const m = await request(url + '/metrics');
  assert(/^dflash_queue_depth 0$/m.test(m.text), 'queue not empty afterwards');
  console.log(`  64 requests in ${Date.now() - t0} ms`);
});

// The speed of one longer request, as a baseline for after the disconnects.
const LONG = { messages: [{ role: 'user', content: 'Write a long Python module.' }], temperature: 0, max_tokens: 200, ignore_eos: true };
async function timed() {
  const t0 = Date.now();
  const r = await post(url + '/v1/chat/completions', LONG, { timeoutMs: 120000 });
  assert(r.status === 200, 'status ' + r.status);
  return { ms: Date.now() - t0, tps: r.json.dflash.tok_per_s };
}
let baseline = null;
await checks.check('baseline speed of a 200-token request', async () => {
  await timed();
  baseline = await timed();
  assert(baseline.tps > 0, 'no speed');
});

// A streaming client that reads a few chunks, then drops the connection.
function leaveMidStream(maxTokens) {
  return new Promise((resolve, reject) => {
    const body = JSON.stringify({ messages: [{ role: 'user', content: 'Write a very long Python module.' }], temperature: 0, max_tokens: maxTokens, ignore_eos: true, stream: true });
    const req = http.request(url + '/v1/chat/completions', { method: 'POST', agent: false, headers: { 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(body) } }, (res) => {
      let seen = 0;
      res.on('data', () => { if (++seen === 3) { req.destroy(); resolve(true); } });
      res.on('end', () => resolve(false));
    });
    req.on('error', () => {});  // our own destroy
    req.setTimeout(60000, () => { req.destroy(); reject(new Error('no data within 60 s')); });
    req.end(body);
  });
}

await checks.check('8 clients leave mid-stream; the next request runs at normal speed', async () => {
  const t0 = Date.now();
  // 8 x 3000 tokens would take ~8 x 6 s if nobody noticed they left.
  const left = await Promise.all(Array.from({ length: 8 }, () => leaveMidStream(3000)));
  assert(left.every((x) => x), 'a stream ended before the client left');
  const after = await timed();
  const total = Date.now() - t0;
  console.log(`  baseline ${baseline.ms} ms ${baseline.tps.toFixed(0)} tok/s; after disconnects ${after.ms} ms ${after.tps.toFixed(0)} tok/s; all ${total} ms`);
  assert(after.tps > 0.33 * baseline.tps, `tok/s ${after.tps.toFixed(0)} vs baseline ${baseline.tps.toFixed(0)}`);
  assert(after.ms < 4 * baseline.ms + 3000, `next request took ${after.ms} ms (baseline ${baseline.ms} ms)`);
  let m = '';
  for (let i = 0; i < 50; i++) {
    m = (await request(url + '/metrics')).text;
    if (/^dflash_disconnects_total 8$/m.test(m)) break;
    await sleep(100);
  }
  assert(/^dflash_disconnects_total 8$/m.test(m), 'disconnects counted: ' + (/^dflash_disconnects_total .*$/m.exec(m) || [''])[0]);
  assert(/^dflash_queue_depth 0$/m.test(m) && /^dflash_requests_running 0$/m.test(m), 'generator not idle');
});
await server.stop();

await checks.check('a full queue answers 503 with Retry-After; every request gets an answer', async () => {
  const small = await startServer(['--model', DEMO_TARGET, '--queue-size', '1']);
  const body = { messages: [{ role: 'user', content: 'Write a long Python module.' }], temperature: 0, max_tokens: 300, ignore_eos: true };
  const rs = await Promise.all(Array.from({ length: 6 }, () => post(small.url + '/v1/chat/completions', body, { timeoutMs: 60000 })));
  const ok = rs.filter((r) => r.status === 200), busy = rs.filter((r) => r.status === 503);
  assertEq(ok.length + busy.length, 6, 'statuses ' + rs.map((r) => r.status));
  assert(ok.length >= 2 && busy.length >= 1, `200s ${ok.length}, 503s ${busy.length}`);
  assert(busy.every((r) => r.headers['retry-after'] && r.json.error.code === 'queue_full'), 'Retry-After / error shape');
  assert(ok.every((r) => r.json.usage.completion_tokens === 300), 'incomplete answers');
  const m = await request(small.url + '/metrics');
  assert(new RegExp(`^dflash_queue_rejections_total ${busy.length}$`, 'm').test(m.text), 'rejections metric');
  await small.stop();
});

await checks.finish();
