// The ways one bad client could take `dflash serve` from everyone else, each tried against the
// Release and the AddressSanitizer build: clients that leave while queued or running, deeply
// nested JSON, numbers out of range, slow sockets (slowloris), a connection flood from one
// address, bodies refused from their headers, fields the server does not implement, and chat
// templates that recurse or loop without bound. After each, the server must be healthy and a
// normal request answered at normal speed.
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import {
  ASAN_BIN, BIN, Checks, assert, overallTimeout, post, request, sleep, startServer, DEMO_TARGET,
} from './server_harness.mjs';

const checks = new Checks('test_server_reliability');
overallTimeout(600000, checks);

const CHAT = '/v1/chat/completions';
const HI = { messages: [{ role: 'user', content: 'Write a function.' }], temperature: 0, max_tokens: 8 };

// Raw HTTP over one socket, from a chosen loopback address (all of 127.0.0.0/8 is this host).
function raw(port, { from = '127.0.0.1', send = '', trickle = null, everyMs = 300, timeoutMs = 15000 } = {}) {
  return new Promise((resolve) => {
    const t0 = Date.now();
    const s = net.connect({ port, host: '127.0.0.1', localAddress: from });
    let got = '', timer = null, done = false;
    const end = (why) => {
      if (done) return;
      done = true;
      clearInterval(timer);
      s.destroy();
      resolve({ text: got, ms: Date.now() - t0, why });
    };
    s.on('connect', () => {
      if (send) s.write(send);
      if (trickle) {
        let i = 0;
        timer = setInterval(() => { if (!s.destroyed) s.write(trickle[i++ % trickle.length]); }, everyMs);
      }
    });
    s.on('data', (d) => { got += d; });
    s.on('close', () => end('closed'));
    s.on('error', () => end('error'));
    setTimeout(() => end('timeout'), timeoutMs);
  });
}

const statusOf = (text) => Number((/^HTTP\/1\.1 (\d{3})/.exec(text) || [])[1] || 0);
const metric = (text, name) => Number((new RegExp(`^${name} (\\S+)$`, 'm').exec(text) || [])[1]);

async function metrics(url) {
  return (await request(url + '/metrics')).text;
}

// Waits until a /metrics counter reaches a value (counters move when a handler finishes).
async function waitMetric(url, name, want, ms = 10000) {
  let v;
  for (const t0 = Date.now(); Date.now() - t0 < ms; await sleep(100)) {
    v = metric(await metrics(url), name);
    if (v === want) return v;
  }
  throw new Error(`${name} is ${v}, expected ${want}`);
}

// /health at once and a normal request within a few times its usual time.
async function healthyAndFast(server, baselineMs, label) {
  assert(!server.exited, `${label}: the server died`);
  const t0 = Date.now();
  const h = await request(server.url + '/health', { timeoutMs: 5000 });
  assert(h.status === 200, `${label}: /health ${h.status}`);
  const r = await post(server.url + CHAT, HI, { timeoutMs: 60000 });
  const ms = Date.now() - t0;
  assert(r.status === 200 && r.json.usage.completion_tokens === 8, `${label}: normal request ${r.status} ${r.text.slice(0, 200)}`);
  assert(ms < 4 * baselineMs + 1500, `${label}: a normal request took ${ms} ms (usually ${baselineMs} ms)`);
}

// A streaming request whose client closes the socket after `leaveMs` (or never, if null).
function stream(url, body, leaveMs = null) {
  return new Promise((resolve) => {
    const data = JSON.stringify({ ...body, stream: true });
    const req = http.request(url + CHAT, { method: 'POST', agent: false, headers: { 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(data) } }, (res) => {
      let text = '';
      res.on('data', (d) => { text += d; });
      res.on('end', () => resolve({ status: res.statusCode, text, left: false }));
      res.on('error', () => resolve({ status: res.statusCode, text, left: true }));
    });
    req.on('error', () => resolve({ status: 0, text: '', left: true }));
    if (leaveMs !== null) setTimeout(() => { req.destroy(); resolve({ status: 0, text: '', left: true }); }, leaveMs);
    req.end(data);
  });
}

// A plain (unstreamed) request whose client leaves after `leaveMs`.
function plainThenLeave(url, body, leaveMs) {
  return new Promise((resolve) => {
    const data = JSON.stringify(body);
    const req = http.request(url + CHAT, { method: 'POST', agent: false, headers: { 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(data) } }, (res) => {
      res.resume();
      res.on('end', () => resolve('answered'));
    });
    req.on('error', () => resolve('left'));
    setTimeout(() => { req.destroy(); resolve('left'); }, leaveMs);
    req.end(data);
  });
}

const LONG = (n) => ({ messages: [{ role: 'user', content: 'Write a very long Python module.' }], temperature: 0, max_tokens: n, ignore_eos: true });

// A copy of the demo target whose chat template is `template` (the weights are linked).
function modelWithTemplate(name, template) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'dflash-tpl-' + name + '-'));
  for (const f of fs.readdirSync(DEMO_TARGET)) {
    if (f === 'tokenizer_config.json') continue;
    fs.symlinkSync(path.join(DEMO_TARGET, f), path.join(dir, f));
  }
  const cfg = JSON.parse(fs.readFileSync(path.join(DEMO_TARGET, 'tokenizer_config.json'), 'utf8'));
  cfg.chat_template = template;
  fs.writeFileSync(path.join(dir, 'tokenizer_config.json'), JSON.stringify(cfg));
  return dir;
}

// `dflash serve` that must refuse to start: its exit code and stderr.
function serveMustFail(bin, args, ms = 60000) {
  return new Promise((resolve) => {
    const p = spawn(bin, ['serve', '--host', '127.0.0.1', '--port', '0', '--threads', '2', ...args], { stdio: ['ignore', 'ignore', 'pipe'] });
    let err = '';
    p.stderr.on('data', (d) => { err += d; });
    const t = setTimeout(() => p.kill('SIGKILL'), ms);
    p.on('exit', (code, signal) => { clearTimeout(t); resolve({ code, signal, err }); });
  });
}

async function suite(label, bin) {
  // A long context, so the long requests below are still generating when their clients leave;
  // one slot, so that a second request waits in the queue (test_server_parallel covers slots).
  const server = await startServer(['--model', DEMO_TARGET, '--ctx-size', '32768', '--parallel', '1', '--queue-size', '4', '--header-timeout', '3', '--body-timeout', '3',
    '--max-conns-per-client', '56'], { bin });
  const url = server.url;
  await post(url + CHAT, HI);
  const t0 = Date.now();
  await post(url + CHAT, HI);
  const baselineMs = Date.now() - t0;
  console.log(`  [${label}] a normal request takes ${baselineMs} ms`);

  await checks.check(`[${label}] a stream whose client leaves while queued is dropped and counted; the server lives`, async () => {
    const a = stream(url, LONG(100000), 2500);  // runs until its client leaves
    await sleep(300);
    const b = await stream(url, LONG(50), 500);  // leaves while a still runs
    assert(b.left, 'the queued stream ended before its client left');
    await a;
    await waitMetric(url, 'dflash_queue_abandoned_total', 1);
    await waitMetric(url, 'dflash_disconnects_total', 2);
    await healthyAndFast(server, baselineMs, label);
  });

  await checks.check(`[${label}] plain requests whose clients leave (queued, then running) end their work`, async () => {
    const a = plainThenLeave(url, LONG(100000), 2000);
    await sleep(300);
    assert(await plainThenLeave(url, LONG(50), 500) === 'left', 'the queued request was answered');
    assert(await a === 'left', 'the running request was answered');
    await waitMetric(url, 'dflash_queue_abandoned_total', 2);
    await waitMetric(url, 'dflash_disconnects_total', 4);
    await healthyAndFast(server, baselineMs, label);  // fails if the long one still ran
  });

  const deep = (n) => '['.repeat(n) + ']'.repeat(n);
  const deepCases = [
    ['tools', 25000, `{"messages":[{"role":"user","content":"hi"}],"tools":${deep(25000)}}`, CHAT, /^tools/],
    ['chat_template_kwargs', 25000, `{"messages":[{"role":"user","content":"hi"}],"chat_template_kwargs":{"x":${deep(25000)}}}`, CHAT, /^chat_template_kwargs\.x/],
    ['prompt', 48000, `{"prompt":${deep(48000)}}`, '/v1/completions', /^prompt/],
    ['messages[].content', 48000, `{"messages":[{"role":"user","content":${deep(48000)}}]}`, CHAT, /^messages\[0\]\.content/],
  ];
  for (const [where, n, body, route, param] of deepCases) {
    await checks.check(`[${label}] ${n} levels of '[' in ${where} -> 400 naming the limit`, async () => {
      const r = await post(url + route, body);
      assert(r.status === 400 && r.json.error.code === 'json_too_deep', `status ${r.status} ${r.text.slice(0, 200)}`);
      assert(/256 levels/.test(r.json.error.message) && param.test(r.json.error.param), 'error ' + JSON.stringify(r.json.error));
    });
  }
  await checks.check(`[${label}] 100 levels (a deep but real schema) are accepted`, async () => {
    const r = await post(url + CHAT, `{"messages":[{"role":"user","content":"hi"}],"max_tokens":2,"chat_template_kwargs":{"x":${deep(100)}}}`);
    assert(r.status === 200, `status ${r.status} ${r.text.slice(0, 200)}`);
    await healthyAndFast(server, baselineMs, label);
  });

  const numbers = [
    ['temperature', '1e400'], ['top_p', '1e309'], ['max_tokens', '9'.repeat(10000)], ['seed', '-' + '9'.repeat(400)],
  ];
  for (const [field, lit] of numbers) {
    await checks.check(`[${label}] ${field}: ${lit.slice(0, 12)}${lit.length > 12 ? '...' : ''} -> 400 naming the field`, async () => {
      const r = await post(url + CHAT, `{"messages":[{"role":"user","content":"hi"}],"${field}":${lit}}`);
      assert(r.status === 400 && r.json.error.code === 'number_out_of_range' && r.json.error.param === field,
        `status ${r.status} ${r.text.slice(0, 200)}`);
    });
  }
  await checks.check(`[${label}] a number out of range deep in tools names its path`, async () => {
    const r = await post(url + CHAT, '{"messages":[{"role":"user","content":"hi"}],"tools":[{"type":"function","function":{"name":"f","parameters":{"x":1e400}}}]}');
    assert(r.status === 400 && r.json.error.param === 'tools[0].function.parameters.x', `status ${r.status} ${r.text.slice(0, 200)}`);
    await healthyAndFast(server, baselineMs, label);
  });

  await checks.check(`[${label}] slowloris: 40 trickling headers and 10 trickling bodies; /health and chat answer meanwhile; all get 408`, async () => {
    const slow = [];
    for (let i = 0; i < 40; i++) slow.push(raw(server.port, { from: '127.0.0.2', send: 'POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n', trickle: 'X-Slow: 1\r\n', everyMs: 200 }));
    for (let i = 0; i < 10; i++) slow.push(raw(server.port, { from: '127.0.0.2', send: 'POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 5000\r\n\r\n{', trickle: ' ', everyMs: 200 }));
    await sleep(700);
    const h0 = Date.now();
    const h = await request(url + '/health', { timeoutMs: 3000 });
    const healthMs = Date.now() - h0;
    assert(h.status === 200 && healthMs < 1000, `/health ${h.status} in ${healthMs} ms while trickling`);
    const r = await post(url + CHAT, HI, { timeoutMs: 10000 });
    assert(r.status === 200, 'chat while trickling: ' + r.status);
    const ends = await Promise.all(slow);
    const statuses = ends.map((e) => statusOf(e.text));
    assert(statuses.every((s) => s === 408), 'statuses ' + JSON.stringify(statuses));
    assert(ends.every((e) => e.ms < 7000), 'slowest answer after ' + Math.max(...ends.map((e) => e.ms)) + ' ms');
    assert(metric(await metrics(url), 'dflash_request_timeouts_total') >= 50, 'timeouts not counted');
    await healthyAndFast(server, baselineMs, label);
  });

  await checks.check(`[${label}] 68 connections from one address: 56 held, the rest 503; other addresses still served`, async () => {
    const held = [];
    for (let i = 0; i < 56; i++) held.push(raw(server.port, { from: '127.0.0.3', timeoutMs: 3000 }));
    await sleep(500);
    const extra = await Promise.all(Array.from({ length: 12 }, () => raw(server.port, { from: '127.0.0.3', send: 'GET /health HTTP/1.1\r\nHost: x\r\n\r\n', timeoutMs: 3000 })));
    const codes = extra.map((e) => statusOf(e.text));
    assert(codes.every((c) => c === 503) && extra.every((e) => /too_many_connections/.test(e.text)), 'codes ' + JSON.stringify(codes));
    const h = await request(url + '/health', { timeoutMs: 3000 });
    assert(h.status === 200, '/health from another address ' + h.status);
    await Promise.all(held);
    assert(metric(await metrics(url), 'dflash_connections_refused_total') >= 12, 'refusals not counted');
    await healthyAndFast(server, baselineMs, label);
  });

  const bodies = [
    ['Expect: 100-continue with a 50 MB Content-Length', 'Content-Length: 50000000\r\nExpect: 100-continue\r\n', 413],
    ['a 50 MB Content-Length and no body', 'Content-Length: 50000000\r\n', 413],
    ['a negative Content-Length', 'Content-Length: -5\r\n', 400],
    ['a 30-digit Content-Length', 'Content-Length: 123456789012345678901234567890\r\n', 400],
    ['a Content-Length that is not a number', 'Content-Length: 12abc\r\n', 400],
  ];
  for (const [name, head, want] of bodies) {
    await checks.check(`[${label}] ${name} -> ${want} at once`, async () => {
      const e = await raw(server.port, { send: `POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n${head}\r\n`, timeoutMs: 10000 });
      assert(statusOf(e.text) === want, 'answer ' + JSON.stringify(e.text.slice(0, 120)));
      assert(e.ms < 2000, `answered after ${e.ms} ms`);
      assert(!/100 Continue/.test(e.text), 'the server asked for the body it refuses');
    });
  }

  const unsupported = [
    ['best_of: 2', { best_of: 2 }],  // tool_choice: test_server_tools.mjs
  ];
  for (const [name, extra] of unsupported) {
    await checks.check(`[${label}] ${name} -> 400 unsupported, not silently ignored`, async () => {
      const r = await post(url + CHAT, { ...HI, ...extra });
      assert(r.status === 400 && r.json.error.code === 'unsupported_parameter', `status ${r.status} ${r.text.slice(0, 200)}`);
    });
  }
  await checks.check(`[${label}] their neutral values still pass`, async () => {
    const r = await post(url + CHAT, { ...HI, logprobs: false, logit_bias: {}, tool_choice: 'auto', top_logprobs: 0 });
    assert(r.status === 200, `status ${r.status} ${r.text.slice(0, 200)}`);
  });
  await server.stop();

  await checks.check(`[${label}] the queue-full message counts the waiting requests only`, async () => {
    const small = await startServer(['--model', DEMO_TARGET, '--ctx-size', '32768', '--parallel', '1', '--queue-size', '1'], { bin });
    const a = plainThenLeave(small.url, LONG(100000), 3000);
    await sleep(300);
    const b = plainThenLeave(small.url, LONG(50), 2500);
    await sleep(300);
    const c = await post(small.url + CHAT, HI);
    assert(c.status === 503 && /one request is running and 1 are waiting/.test(c.json.error.message), 'answer ' + c.text.slice(0, 200));
    await Promise.all([a, b]);
    await small.stop();
  });

  const chain = (op, n) => "{{ 'a'" + op.repeat(n) + ' }}';
  const loadTemplates = [
    ["50,000 '+' terms", chain(" + 'a'", 50000)],
    ['50,000 [0] subscripts', "{{ 'a'" + '[0]'.repeat(50000) + ' }}'],
    ["30,000 '|string' filters", "{{ 'a'" + '|string'.repeat(30000) + ' }}'],
  ];
  for (const [name, tpl] of loadTemplates) {
    await checks.check(`[${label}] a model whose template holds ${name}: a clear error at load, no crash`, async () => {
      const dir = modelWithTemplate('chain', tpl);
      const r = await serveMustFail(bin, ['--model', dir]);
      fs.rmSync(dir, { recursive: true, force: true });
      assert(r.signal === null && r.code === 1, `exit ${r.code} signal ${r.signal}: ${r.err.slice(-400)}`);
      assert(/template/i.test(r.err) && /deep|depth|nest/i.test(r.err), 'message: ' + r.err.slice(-400));
    });
  }
  const renderTemplates = [
    ['nested range(100000) loops', "{% for i in range(100000) %}{% for j in range(100000) %}x{% endfor %}{% endfor %}"],
    ["'a' * 3000000000", "{{ 'a' * 3000000000 }}"],
  ];
  for (const [name, tpl] of renderTemplates) {
    await checks.check(`[${label}] a template with ${name}: 400 at the chat request within seconds; the server lives`, async () => {
      const dir = modelWithTemplate('work', tpl);
      const s = await startServer(['--model', dir], { bin });
      const t0 = Date.now();
      const r = await post(s.url + CHAT, HI, { timeoutMs: 90000 });
      const ms = Date.now() - t0;
      assert(r.status === 400 && r.json.error.code === 'template_error', `status ${r.status} ${r.text.slice(0, 200)}`);
      // The step budget is about 1.5 s of CPU in Release; AddressSanitizer runs it ~10x slower.
      const limit = label === 'asan' ? 45000 : 10000;
      assert(ms < limit, `answered after ${ms} ms`);
      const c = await post(s.url + '/v1/completions', { prompt: 'def f', max_tokens: 4 });
      assert(c.status === 200, 'completions afterwards ' + c.status);
      await s.stop();
      fs.rmSync(dir, { recursive: true, force: true });
    });
  }
}

await suite('release', BIN);
if (ASAN_BIN && fs.existsSync(ASAN_BIN)) await suite('asan', ASAN_BIN);
else checks.fail('asan build', 'DFLASH_ASAN_BIN is not set or missing: the AddressSanitizer run of these checks did not happen');

await checks.finish();
