// Shared by the test_server_*.mjs files: start `dflash serve` on a free loopback port, wait
// until it is ready, count checks, and always stop the server, even when a test throws.
import { spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';

export const BIN = process.env.DFLASH_BIN;
export const SRC = process.env.DFLASH_SOURCE_DIR || path.resolve(path.dirname(new URL(import.meta.url).pathname), '..', '..');
export const BUILD = process.env.DFLASH_BUILD_DIR || path.dirname(BIN || '.');
export const DEMO_TARGET = path.join(SRC, 'models', 'demo', 'target');
export const DEMO_DRAFT = path.join(SRC, 'models', 'demo', 'draft2');
// The default of `dflash serve` with no --model: the Qwen3.5 hybrid demo pair.
export const DEMO35_TARGET = path.join(SRC, 'models', 'demo35', 'target');
export const DEMO35_DRAFT = path.join(SRC, 'models', 'demo35', 'draft2');
export const RANDOM_TARGET = path.join(SRC, 'tests', 'data', 'random_pair', 'target');
export const RANDOM_DRAFT = path.join(SRC, 'tests', 'data', 'random_pair', 'draft');
export const demoDraftPresent = () => fs.existsSync(path.join(DEMO_DRAFT, 'config.json'));

if (!BIN) {
  console.error('DFLASH_BIN is not set (ctest sets it to the dflash binary)');
  process.exit(2);
}

const servers = new Set();

export const ASAN_BIN = process.env.DFLASH_ASAN_BIN;

export async function startServer(args = [], { readyMs = 60000, bin = BIN } = {}) {
  const proc = spawn(bin, ['serve', '--host', '127.0.0.1', '--port', '0', '--threads', '2', ...args], {
    cwd: SRC, stdio: ['ignore', 'ignore', 'pipe'],
  });
  const logs = [];
  const server = { proc, logs, url: '', port: 0, exited: false };
  servers.add(server);
  proc.on('exit', () => { server.exited = true; });
  let buf = '';
  const listening = new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error('no listening line within ' + readyMs + ' ms; log:\n' + logs.join('\n'))), readyMs);
    proc.stderr.on('data', (d) => {
      buf += d.toString();
      let nl;
      while ((nl = buf.indexOf('\n')) >= 0) {
        const line = buf.slice(0, nl);
        buf = buf.slice(nl + 1);
        logs.push(line);
        const m = /listening on http:\/\/127\.0\.0\.1:(\d+)/.exec(line);
        if (m) { clearTimeout(timer); resolve(Number(m[1])); }
      }
    });
    proc.on('exit', (code) => { clearTimeout(timer); reject(new Error('server exited with ' + code + ':\n' + logs.join('\n'))); });
  });
  server.port = await listening;
  server.url = 'http://127.0.0.1:' + server.port;
  const deadline = Date.now() + readyMs;
  for (;;) {
    const r = await request(server.url + '/health').catch(() => null);
    if (r && r.status === 200) break;
    if (server.exited) throw new Error('server exited while loading:\n' + logs.join('\n'));
    if (Date.now() > deadline) throw new Error('/health not 200 within ' + readyMs + ' ms');
    await sleep(50);
  }
  server.stop = () => stopServer(server);
  return server;
}

export async function stopServer(server) {
  servers.delete(server);
  if (server.exited) return;
  const gone = new Promise((resolve) => server.proc.on('exit', resolve));
  server.proc.kill('SIGTERM');
  const t = setTimeout(() => server.proc.kill('SIGKILL'), 5000);
  await gone;
  clearTimeout(t);
}

export async function stopAll() {
  for (const s of [...servers]) await stopServer(s);
}

export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// Raw HTTP (node:http, no pooling surprises): body may be a string, Buffer or object (JSON).
export function request(url, { method = 'GET', body, headers = {}, timeoutMs = 60000 } = {}) {
  return new Promise((resolve, reject) => {
    let payload = body;
    if (payload !== undefined && typeof payload !== 'string' && !Buffer.isBuffer(payload)) payload = JSON.stringify(payload);
    const h = { ...headers };
    if (payload !== undefined) {
      h['Content-Length'] = Buffer.byteLength(payload);
      if (!h['Content-Type']) h['Content-Type'] = 'application/json';
    }
    const req = http.request(url, { method, headers: h, agent: false }, (res) => {
      const chunks = [];
      res.on('data', (c) => chunks.push(c));
      res.on('end', () => {
        const text = Buffer.concat(chunks).toString('utf8');
        let json = null;
        try { json = JSON.parse(text); } catch { /* not JSON */ }
        resolve({ status: res.statusCode, headers: res.headers, text, json });
      });
      res.on('error', reject);
    });
    req.setTimeout(timeoutMs, () => req.destroy(new Error('timeout after ' + timeoutMs + ' ms: ' + method + ' ' + url)));
    req.on('error', reject);
    if (payload !== undefined) req.write(payload);
    req.end();
  });
}

export const post = (url, body, opts = {}) => request(url, { ...opts, method: 'POST', body });

// SSE events of a streamed response (raw), parsed.
export function sseEvents(text) {
  const out = [];
  for (const block of text.split('\n\n')) {
    for (const line of block.split('\n')) {
      if (!line.startsWith('data: ')) continue;
      const data = line.slice(6);
      out.push(data === '[DONE]' ? '[DONE]' : JSON.parse(data));
    }
  }
  return out;
}

// `dflash generate ... --json` on the same machine, for exact comparisons.
export function cliGenerate(args) {
  const r = spawnSync(BIN, ['generate', '--threads', '2', '--json', ...args], { cwd: SRC, encoding: 'utf8', timeout: 120000 });
  if (r.status !== 0) throw new Error('dflash generate failed: ' + r.stderr);
  return JSON.parse(r.stdout);
}

export class Checks {
  constructor(title) {
    this.title = title;
    this.passed = 0;
    this.failed = 0;
    this.started = Date.now();
  }
  async check(name, fn) {
    const t0 = Date.now();
    try {
      await fn();
      this.passed++;
      console.log(`PASS ${name} (${Date.now() - t0} ms)`);
    } catch (e) {
      this.failed++;
      console.log(`FAIL ${name}: ${e && e.message ? e.message : e}`);
    }
  }
  fail(name, why) {
    this.failed++;
    console.log(`FAIL ${name}: ${why}`);
  }
  async finish() {
    await stopAll();
    console.log(`${this.title}: ${this.passed} passed, ${this.failed} failed (${((Date.now() - this.started) / 1000).toFixed(1)} s)`);
    process.exit(this.failed ? 1 : 0);
  }
}

export function assert(cond, msg) {
  if (!cond) throw new Error(msg);
}

export function assertEq(a, b, what) {
  const ja = JSON.stringify(a), jb = JSON.stringify(b);
  if (ja !== jb) throw new Error(`${what}: got ${ja.slice(0, 300)}, expected ${jb.slice(0, 300)}`);
}

// A whole test file must end: past the limit, stop servers and fail.
export function overallTimeout(ms, checks) {
  setTimeout(async () => {
    console.log(`FAIL overall: still running after ${ms} ms`);
    checks.failed++;
    await checks.finish();
  }, ms).unref();
}

process.on('SIGINT', async () => { await stopAll(); process.exit(130); });
