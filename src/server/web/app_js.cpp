#include "server/web/web_assets.h"

namespace dflash::server::web {

// Plain browser JavaScript, no build step: chat with streaming, per-answer speculation
// figures, settings kept in localStorage, and a throughput benchmark (one stream and several at once).
const std::string& app_js() {
  static const std::string js = R"js(
'use strict';
const $ = (id) => document.getElementById(id);
const state = { model: '', vocab: 0, history: [], controller: null };

const settingIds = ['temperature', 'max-tokens', 'enable-thinking', 'think-cap', 'system', 'api-key'];
function loadSettings() {
  const saved = JSON.parse(localStorage.getItem('dflash-settings') || '{}');
  for (const id of settingIds) {
    if (!(id in saved)) continue;
    const el = $(id);
    if (el.type === 'checkbox') el.checked = saved[id]; else el.value = saved[id];
  }
}
function saveSettings() {
  const s = {};
  for (const id of settingIds) { const el = $(id); s[id] = el.type === 'checkbox' ? el.checked : el.value; }
  localStorage.setItem('dflash-settings', JSON.stringify(s));
}
function headers() {
  const h = { 'Content-Type': 'application/json' };
  const key = $('api-key').value.trim();
  if (key) h['Authorization'] = 'Bearer ' + key;
  return h;
}
function fmt(x, digits = 1) { return Number.isFinite(x) ? x.toFixed(digits) : '–'; }

async function loadModel() {
  try {
    const r = await fetch('/v1/models', { headers: headers() });
    const j = await r.json();
    const m = j.data && j.data[0];
    if (!m) throw new Error((j.error && j.error.message) || 'no model');
    state.model = m.id;
    $('model-name').textContent = m.id;
    if (!m.meta) { setTimeout(loadModel, 500); return; }
    state.vocab = m.meta.vocab;
    const badge = $('spec-badge');
    badge.textContent = m.meta.speculative ? 'DFlash draft, block ' + m.meta.block_size : 'no draft';
    badge.className = 'badge ' + (m.meta.speculative ? 'on' : 'off');
  } catch (e) {
    // 401: the key goes in Settings; loadModel runs again when it changes.
    $('model-name').textContent = e.message.includes('API key') ? 'API key needed (Settings)' : 'server: ' + e.message;
    if (!e.message.includes('API key')) setTimeout(loadModel, 2000);
  }
}

// Server-Sent Events over fetch: yields each JSON payload until [DONE].
async function* sseEvents(response) {
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  let buf = '';
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buf += decoder.decode(value, { stream: true });
    let cut;
    while ((cut = buf.indexOf('\n\n')) >= 0) {
      const block = buf.slice(0, cut);
      buf = buf.slice(cut + 2);
      for (const line of block.split('\n')) {
        if (!line.startsWith('data:')) continue;
        const data = line.slice(5).trim();
        if (data === '[DONE]') return;
        yield JSON.parse(data);
      }
    }
  }
}

function addMessage(role, text) {
  const div = document.createElement('div');
  div.className = 'msg ' + role;
  if (text !== undefined) div.textContent = text;
  $('log').appendChild(div);
  $('log').scrollTop = $('log').scrollHeight;
  return div;
}

function statItem(parent, cls, label, value) {
  let span = parent.querySelector('.' + cls);
  if (!span) { span = document.createElement('span'); span.className = cls; parent.appendChild(span); }
  span.innerHTML = '';
  span.append(label + ' ');
  const b = document.createElement('b');
  b.textContent = value;
  span.appendChild(b);
}

function assistantView() {
  const div = addMessage('assistant');
  const details = document.createElement('details');
  details.hidden = true;
  const summary = document.createElement('summary');
  summary.textContent = 'Reasoning';
  const reasoning = document.createElement('div');
  reasoning.className = 'reasoning-text';
  details.append(summary, reasoning);
  const content = document.createElement('div');
  content.className = 'content';
  const stats = document.createElement('div');
  stats.className = 'stats';
  div.append(details, content, stats);
  return { div, details, summary, reasoning, content, stats };
}

async function send(text) {
  const messages = [];
  const system = $('system').value.trim();
  if (system) messages.push({ role: 'system', content: system });
  messages.push(...state.history, { role: 'user', content: text });
  addMessage('user', text);
  const v = assistantView();
  const body = {
    model: state.model || 'default', messages, stream: true, stream_options: { include_usage: true },
    temperature: Number($('temperature').value), max_tokens: Number($('max-tokens').value),
    chat_template_kwargs: { enable_thinking: $('enable-thinking').checked },
  };
  const cap = Number($('think-cap').value);
  if (cap > 0) body.think_cap = cap;
  state.controller = new AbortController();
  $('send').disabled = true; $('stop').disabled = false;
  const t0 = performance.now();
  let tFirst = 0, pieces = 0, answer = '', tThinkStart = 0, tThinkEnd = 0;
  try {
    const r = await fetch('/v1/chat/completions', { method: 'POST', headers: headers(), body: JSON.stringify(body), signal: state.controller.signal });
    if (!r.ok) {
      const j = await r.json().catch(() => ({}));
      throw new Error((j.error && j.error.message) || ('HTTP ' + r.status));
    }
    for await (const ev of sseEvents(r)) {
      if (ev.error) throw new Error(ev.error.message);
      const choice = ev.choices && ev.choices[0];
      const d = choice && choice.delta;
      if (d && (d.content || d.reasoning_content)) {
        if (!tFirst) tFirst = performance.now();
        pieces++;
        if (d.reasoning_content) {
          if (!tThinkStart) { tThinkStart = performance.now(); v.details.hidden = false; v.summary.textContent = 'Thinking…'; }
          v.reasoning.textContent += d.reasoning_content;
        }
        if (d.content) {
          if (tThinkStart && !tThinkEnd) { tThinkEnd = performance.now(); v.summary.textContent = 'Reasoning (' + fmt((tThinkEnd - tThinkStart) / 1000, 1) + ' s)'; }
          v.content.textContent += d.content; answer += d.content;
        }
        const secs = (performance.now() - tFirst) / 1000;
        if (pieces > 1 && secs > 0) statItem(v.stats, 'stat-tps', 'tok/s', '~' + fmt((pieces - 1) / secs));
        $('log').scrollTop = $('log').scrollHeight;
      }
      if (ev.dflash) showFinal(v, ev, t0);
    }
    state.history.push({ role: 'user', content: text }, { role: 'assistant', content: answer });
  } catch (e) {
    if (e.name === 'AbortError') statItem(v.stats, 'stat-stopped', 'stopped', 'by you');
    else { v.div.classList.add('error'); v.content.textContent += (v.content.textContent ? '\n' : '') + 'Error: ' + e.message; }
  } finally {
    if (tThinkStart && !tThinkEnd) v.summary.textContent = 'Reasoning (unfinished)';
    $('send').disabled = false; $('stop').disabled = true; state.controller = null;
  }
}

function showFinal(v, ev, t0) {
  const d = ev.dflash;
  statItem(v.stats, 'stat-tps', 'tok/s', fmt(d.tok_per_s));
  statItem(v.stats, 'stat-accept', 'acceptance', fmt(100 * d.accept_rate) + '%');
  statItem(v.stats, 'stat-tau', 'τ', fmt(d.accept_len, 2));
  statItem(v.stats, 'stat-spec', 'speculation', d.speculation);
  statItem(v.stats, 'stat-ttft', 'TTFT', fmt(d.ttft_ms) + ' ms');
  if (ev.usage) statItem(v.stats, 'stat-tokens', 'tokens', String(ev.usage.completion_tokens));
  if (ev.usage && ev.usage.prompt_tokens_details) statItem(v.stats, 'stat-cached', 'cached', String(ev.usage.prompt_tokens_details.cached_tokens));
  if (d.think_capped) statItem(v.stats, 'stat-capped', 'thinking', 'capped');
  statItem(v.stats, 'stat-e2e', 'total', fmt((performance.now() - t0) / 1000, 2) + ' s');
}

// ---- benchmark ----
function numbers(s) { return s.split(',').map((x) => parseInt(x.trim(), 10)).filter((x) => x > 0); }
function randomIds(n) {
  const hi = Math.max(2, Math.min(state.vocab || 1000, 100000));
  return Array.from({ length: n }, () => Math.floor(Math.random() * hi));
}
async function peakMB() {
  const r = await fetch('/v1/stats', { headers: headers() });
  const j = await r.json();
  return j.peak_rss_bytes / (1 << 20);
}
function benchRow(cells) {
  const tr = document.createElement('tr');
  for (const c of cells) { const td = document.createElement('td'); td.textContent = c; tr.appendChild(td); }
  $('bench-table').querySelector('tbody').appendChild(tr);
}
async function benchPP(n) {
  const t0 = performance.now();
  const r = await fetch('/v1/completions', { method: 'POST', headers: headers(),
    body: JSON.stringify({ model: state.model || 'default', prompt: randomIds(n), max_tokens: 1, temperature: 0 }) });
  const j = await r.json();
  if (!r.ok) throw new Error(j.error ? j.error.message : 'HTTP ' + r.status);
  const e2e = (performance.now() - t0) / 1000;
  benchRow(['pp' + n, fmt(j.dflash.ttft_ms), '–', fmt(j.dflash.prefill_tok_per_s), '–', fmt(e2e, 3), '–', fmt(await peakMB(), 0)]);
}
async function benchTG(n) {
  const t0 = performance.now();
  const r = await fetch('/v1/completions', { method: 'POST', headers: headers(),
    body: JSON.stringify({ model: state.model || 'default', prompt: randomIds(16), max_tokens: n, temperature: 0,
                           ignore_eos: true, stream: true }) });
  if (!r.ok) { const j = await r.json(); throw new Error(j.error ? j.error.message : 'HTTP ' + r.status); }
  let tFirst = 0, dflash = null;
  for await (const ev of sseEvents(r)) {
    if (ev.error) throw new Error(ev.error.message);
    if (!tFirst && ev.choices && ev.choices[0] && ev.choices[0].text) tFirst = performance.now();
    if (ev.dflash) dflash = ev.dflash;
  }
  const tEnd = performance.now();
  // From the server's decode rate: on a fast model a whole stream can arrive in one read.
  const tpot = dflash && dflash.tok_per_s > 0 ? 1000 / dflash.tok_per_s : NaN;
  benchRow(['tg' + n, fmt(tFirst ? tFirst - t0 : NaN), fmt(tpot, 2), '–', fmt(dflash ? dflash.tok_per_s : NaN),
            fmt((tEnd - t0) / 1000, 3), dflash ? fmt(100 * dflash.accept_rate) + '%' : '–', fmt(await peakMB(), 0)]);
}
// c streams of n tokens at once: the server batches them when it has slots (--parallel);
// gen tok/s is the aggregate (all tokens over the wall time), TTFT the mean of the streams.
async function oneStream(n) {
  const t0 = performance.now();
  const r = await fetch('/v1/completions', { method: 'POST', headers: headers(),
    body: JSON.stringify({ model: state.model || 'default', prompt: randomIds(16), max_tokens: n, temperature: 0,
                           ignore_eos: true, stream: true, stream_options: { include_usage: true } }) });
  if (!r.ok) { const j = await r.json(); throw new Error(j.error ? j.error.message : 'HTTP ' + r.status); }
  let tFirst = 0, dflash = null, tokens = 0;
  for await (const ev of sseEvents(r)) {
    if (ev.error) throw new Error(ev.error.message);
    if (!tFirst && ev.choices && ev.choices[0] && ev.choices[0].text) tFirst = performance.now();
    if (ev.dflash) dflash = ev.dflash;
    if (ev.usage) tokens = ev.usage.completion_tokens;
  }
  return { ttft: tFirst ? tFirst - t0 : NaN, tokens, accept: dflash ? dflash.accept_rate : NaN };
}
async function benchConcurrent(c, n) {
  const before = await (await fetch('/v1/stats', { headers: headers() })).json();
  const t0 = performance.now();
  const rs = await Promise.all(Array.from({ length: c }, () => oneStream(n)));
  const wall = (performance.now() - t0) / 1000;
  const after = await (await fetch('/v1/stats', { headers: headers() })).json();
  const tokens = rs.reduce((a, r) => a + r.tokens, 0);
  const mean = (xs) => xs.reduce((a, x) => a + x, 0) / xs.length;
  const passes = after.batch.passes - before.batch.passes, seqs = after.batch.sequences - before.batch.sequences;
  benchRow([c + ' × tg' + n, fmt(mean(rs.map((r) => r.ttft))), '–', '–', fmt(tokens / wall), fmt(wall, 3),
            rs.some((r) => isFinite(r.accept)) ? fmt(100 * mean(rs.map((r) => r.accept || 0))) + '%' : '–',
            fmt(after.peak_rss_bytes / (1 << 20), 0)]);
  const note = passes > 0 ? ` (${fmt(seqs / passes, 2)} streams per pass over the weights, ${after.slots} slots)`
                          : ` (${after.slots} slot${after.slots === 1 ? '' : 's'}: not batched)`;
  $('bench-batch').textContent = c + ' streams: ' + fmt(tokens / wall) + ' tok/s in all' + note;
}
async function runBench() {
  $('bench-run').disabled = true;
  const reps = Math.max(1, Number($('bench-reps').value) || 1);
  try {
    for (let i = 0; i < reps; i++) {
      for (const n of numbers($('bench-pp').value)) { $('bench-status').textContent = 'pp' + n + ' …'; await benchPP(n); }
      for (const n of numbers($('bench-tg').value)) { $('bench-status').textContent = 'tg' + n + ' …'; await benchTG(n); }
      const tg = numbers($('bench-tg').value)[0] || 64;
      for (const c of numbers($('bench-streams').value)) {
        $('bench-status').textContent = c + ' streams …';
        await benchConcurrent(c, tg);
      }
    }
    $('bench-status').textContent = 'done';
  } catch (e) {
    $('bench-status').textContent = 'error: ' + e.message;
  } finally {
    $('bench-run').disabled = false;
  }
}

// ---- wiring ----
loadSettings();
for (const id of settingIds) $(id).addEventListener('change', saveSettings);
$('api-key').addEventListener('change', loadModel);
$('toggle-settings').addEventListener('click', () => { $('settings').hidden = !$('settings').hidden; });
$('toggle-bench').addEventListener('click', () => { $('bench').hidden = !$('bench').hidden; });
$('new-chat').addEventListener('click', () => { state.history = []; $('log').innerHTML = ''; });
$('stop').addEventListener('click', () => { if (state.controller) state.controller.abort(); });
$('bench-run').addEventListener('click', runBench);
$('composer').addEventListener('submit', (e) => {
  e.preventDefault();
  const text = $('prompt').value.trim();
  if (!text || state.controller) return;
  $('prompt').value = '';
  send(text);
});
$('prompt').addEventListener('keydown', (e) => {
  if (e.key === 'Enter' && !e.shiftKey) { e.preventDefault(); $('composer').requestSubmit(); }
});
loadModel();
)js";
  return js;
}

}  // namespace dflash::server::web
