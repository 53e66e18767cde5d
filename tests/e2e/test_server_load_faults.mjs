// Load with faults, bounded and on loopback only: 64 streams at once against --queue-size 64,
// 32 of whose clients leave at random points (while queued or mid-stream), while 40 slow
// sockets trickle their headers from another address. Afterwards the server is healthy, every
// surviving stream holds exactly its answer when asked alone (nothing lost, nothing
// duplicated), and /metrics adds up.
import http from 'node:http';
import net from 'node:net';
import {
  Checks, assert, assertEq, demoDraftPresent, overallTimeout, post, request, sleep, sseEvents, startServer,
  DEMO_DRAFT, DEMO_TARGET,
} from './server_harness.mjs';

const checks = new Checks('test_server_load_faults');
overallTimeout(300000, checks);

const args = ['--model', DEMO_TARGET, '--queue-size', '64', '--header-timeout', '5'];
if (demoDraftPresent()) args.push('--draft', DEMO_DRAFT, '--block-size', '4');
const server = await startServer(args);
const url = server.url;
const CHAT = '/v1/chat/completions';

// A fixed seed: the same leave points on every run, so a failure can be reproduced.
let seed = 20261205;
const rand = () => ((seed = (seed * 1103515245 + 12345) % 2147483648) / 2147483648);

const PROMPTS = ['Write a Python function that reverses a list.', 'Show the class `Counter`.', 'Implement a binary search.',
  'Write a function to parse a URL.', 'Show the function `os.path.join`.', 'Implement `json.dumps`.',
  'Write a class for a linked list.', 'Show the method `dict.get`.'];
const body = (p, n, extra = {}) => ({ messages: [{ role: 'user', content: p }], temperature: 0, max_tokens: n, chat_template_kwargs: { enable_thinking: false }, ...extra });

const expected = new Map();
await checks.check('each prompt answered alone (the reference)', async () => {
  for (const p of PROMPTS) {
    const r = await post(url + CHAT, body(p, 16));
    assert(r.status === 200, 'status ' + r.status);
    expected.set(p, r.json.choices[0].message.content);
  }
});
const before = (await request(url + '/metrics')).text;
const metric = (text, name) => Number((new RegExp(`^${name} (\\S+)$`, 'm').exec(text) || [])[1]);

// One streaming client. A leaver asks for a long answer and leaves either before its first
// chunk (at a random moment, usually still queued) or after a random number of chunks.
function client(i) {
  const leaver = i % 2 === 1;
  const p = PROMPTS[i % PROMPTS.length];
  const data = JSON.stringify(leaver ? body(p, 2000, { ignore_eos: true, stream: true }) : body(p, 16, { stream: true }));
  const leaveBeforeData = leaver && rand() < 0.5;
  const leaveAfterMs = 20 + Math.floor(rand() * 400);
  const leaveAfterChunks = 1 + Math.floor(rand() * 5);
  return new Promise((resolve) => {
    let text = '', chunks = 0, left = false;
    const req = http.request(url + CHAT, { method: 'POST', agent: false, headers: { 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(data) } }, (res) => {
      res.on('data', (d) => {
        text += d;
        chunks += (String(d).match(/^data: /gm) || []).length;
        if (leaver && !leaveBeforeData && chunks >= leaveAfterChunks && !left) { left = true; req.destroy(); resolve({ i, p, leaver, left, text }); }
      });
      res.on('end', () => resolve({ i, p, leaver, left, text, status: res.statusCode }));
      res.on('error', () => resolve({ i, p, leaver, left: true, text }));
    });
    req.on('error', () => resolve({ i, p, leaver, left: true, text }));
    if (leaveBeforeData) setTimeout(() => { if (!left) { left = true; req.destroy(); resolve({ i, p, leaver, left, text }); } }, leaveAfterMs);
    req.end(data);
  });
}

function slowSocket() {
  return new Promise((resolve) => {
    const s = net.connect({ port: server.port, host: '127.0.0.1', localAddress: '127.0.0.2' });
    let got = '';
    const timer = setInterval(() => { if (!s.destroyed) s.write('X-Slow: 1\r\n'); }, 250);
    s.on('connect', () => s.write('POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n'));
    s.on('data', (d) => { got += d; });
    const end = () => { clearInterval(timer); resolve(got); };
    s.on('close', end);
    s.on('error', end);
    setTimeout(() => { s.destroy(); }, 20000);
  });
}

let results = [], slow = [];
await checks.check('64 streams (32 leaving) and 40 slow sockets at once: every survivor gets exactly its answer', async () => {
  const t0 = Date.now();
  const slowP = Array.from({ length: 40 }, slowSocket);
  await sleep(100);
  results = await Promise.all(Array.from({ length: 64 }, (_, i) => client(i)));
  slow = await Promise.all(slowP);
  console.log(`  64 streams and 40 slow sockets in ${Date.now() - t0} ms`);
  const survivors = results.filter((r) => !r.leaver);
  const bad = [];
  const ids = new Set();
  for (const r of survivors) {
    const ev = sseEvents(r.text);
    const chunks = ev.filter((e) => e !== '[DONE]');
    const text = chunks.map((c) => (c.choices[0] && c.choices[0].delta && c.choices[0].delta.content) || '').join('');
    const finals = chunks.filter((c) => c.choices[0] && c.choices[0].finish_reason);
    if (ev[ev.length - 1] !== '[DONE]' || ev.filter((e) => e === '[DONE]').length !== 1) bad.push(`#${r.i}: [DONE] not once at the end`);
    if (finals.length !== 1) bad.push(`#${r.i}: ${finals.length} final chunks`);
    if (text !== expected.get(r.p)) bad.push(`#${r.i}: ${JSON.stringify(text.slice(0, 60))} != ${JSON.stringify(expected.get(r.p).slice(0, 60))}`);
    for (const id of new Set(chunks.map((c) => c.id))) {
      if (ids.has(id)) bad.push(`#${r.i}: id ${id} seen in another stream`);
      ids.add(id);
    }
  }
  assert(bad.length === 0, bad.slice(0, 5).join('; '));
  assertEq(survivors.length, 32, 'survivors');
  assert(results.filter((r) => r.leaver).every((r) => r.left), 'a leaver got its whole 2000-token answer');
});

await checks.check('the slow sockets were answered 408 and closed', async () => {
  const codes = slow.map((t) => Number((/^HTTP\/1\.1 (\d{3})/.exec(t) || [])[1] || 0));
  assert(codes.every((c) => c === 408), 'statuses ' + JSON.stringify(codes));
});

await checks.check('healthy afterwards: /health, a normal request, and /metrics that add up', async () => {
  const h = await request(url + '/health', { timeoutMs: 3000 });
  assert(h.status === 200, '/health ' + h.status);
  let m = '';
  for (let k = 0; k < 100; k++) {
    m = (await request(url + '/metrics')).text;
    if (metric(m, 'dflash_requests_total') - metric(before, 'dflash_requests_total') === 64) break;
    await sleep(100);
  }
  const d = (name) => metric(m, name) - metric(before, name);
  assertEq(d('dflash_requests_total'), 64, 'requests recorded (each once)');
  assertEq(d('dflash_disconnects_total'), 32, 'disconnects');
  const abandoned = d('dflash_queue_abandoned_total');
  const beforeData = results.filter((r) => r.leaver && r.text.indexOf('data: ') < 0).length;
  assert(abandoned >= 1 && abandoned <= beforeData, `abandoned in queue ${abandoned}, leavers before any data ${beforeData}`);
  assert(d('dflash_generated_tokens_total') >= 32 * 1, 'generated tokens');
  assertEq(metric(m, 'dflash_queue_depth'), 0, 'queue depth');
  assertEq(metric(m, 'dflash_requests_running'), 0, 'running');
  assert(d('dflash_request_timeouts_total') >= 40, 'timeouts ' + d('dflash_request_timeouts_total'));
  const r = await post(url + CHAT, body(PROMPTS[0], 16));
  assert(r.status === 200 && r.json.choices[0].message.content === expected.get(PROMPTS[0]), 'a normal request afterwards');
  assert(!server.exited, 'the server died');
});

await checks.finish();
