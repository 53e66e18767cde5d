// Malformed requests, each answered with the right status and an OpenAI-shaped error, against
// a server with --api-key and a small context; the server stays healthy throughout.
import net from 'node:net';
import {
  Checks, assert, overallTimeout, post, request, startServer, DEMO_TARGET,
} from './server_harness.mjs';

const checks = new Checks('test_server_badinput');
overallTimeout(120000, checks);

const KEY = 'sk-test-0123456789';
const server = await startServer(['--model', DEMO_TARGET, '--api-key', KEY, '--ctx-size', '256', '--alias', 'demo']);
const auth = { Authorization: 'Bearer ' + KEY };
const CHAT = '/v1/chat/completions';
const user = (content) => ({ model: 'demo', messages: [{ role: 'user', content }], max_tokens: 4 });
const withField = (extra) => ({ ...user('hi'), ...extra });

// [name, path, body (object, string or Buffer), expected status, options]
const cases = [
  ['broken JSON', CHAT, '{"messages": [', 400],
  ['empty body', CHAT, '', 400],
  ['trailing garbage after JSON', CHAT, JSON.stringify(user('hi')) + ' xyz', 400],
  ['JSON array body', CHAT, '[]', 400],
  ['JSON string body', CHAT, '"hello"', 400],
  ['deeply nested JSON', CHAT, '['.repeat(100000) + ']'.repeat(100000), 400],
  ['missing messages', CHAT, { model: 'demo' }, 400],
  ['messages is a string', CHAT, { messages: 'hi' }, 400],
  ['messages is empty', CHAT, { messages: [] }, 400],
  ['message is a number', CHAT, { messages: [1] }, 400],
  ['message without role', CHAT, { messages: [{ content: 'hi' }] }, 400],
  ['unknown role', CHAT, { messages: [{ role: 'wizard', content: 'hi' }] }, 400],
  ['content is a number', CHAT, { messages: [{ role: 'user', content: 42 }] }, 400],
  ['content is an object', CHAT, { messages: [{ role: 'user', content: { text: 'hi' } }] }, 400],
  ['image content part', CHAT, { messages: [{ role: 'user', content: [{ type: 'image_url', image_url: { url: 'http://x/y.png' } }] }] }, 400],
  ['text part without text', CHAT, { messages: [{ role: 'user', content: [{ type: 'text' }] }] }, 400],
  ['negative max_tokens', CHAT, withField({ max_tokens: -5 }), 400],
  ['zero max_tokens', CHAT, withField({ max_tokens: 0 }), 400],
  ['huge max_tokens', CHAT, withField({ max_tokens: 1e30 }), 400],
  ['huge integer max_tokens', CHAT, '{"messages":[{"role":"user","content":"hi"}],"max_tokens":123456789012345678901234567890}', 400],
  ['fractional max_tokens', CHAT, withField({ max_tokens: 1.5 }), 400],
  ['string max_tokens', CHAT, withField({ max_tokens: '10' }), 400],
  ['negative temperature', CHAT, withField({ temperature: -1 }), 400],
  ['huge temperature', CHAT, withField({ temperature: 1e308 }), 400],
  ['top_p above 1', CHAT, withField({ top_p: 2 }), 400],
  ['top_k string', CHAT, withField({ top_k: 'x' }), 400],
  ['seed string', CHAT, withField({ seed: 'abc' }), 400],
  ['stop is a number', CHAT, withField({ stop: 5 }), 400],
  ['stop list of numbers', CHAT, withField({ stop: [1, 2] }), 400],
  ['stream is a string', CHAT, withField({ stream: 'yes' }), 400],
  ['n = 17', CHAT, withField({ n: 17 }), 400],
  ['response_format of an unknown type', CHAT, withField({ response_format: { type: 'yaml' } }), 400],
  ['response_format json_schema without a schema object', CHAT, withField({ response_format: { type: 'json_schema', json_schema: 'x' } }), 400],
  ['response_format schema the compiler refuses', CHAT,
    withField({ response_format: { type: 'json_schema', json_schema: { schema: { type: 'object', patternProperties: { a: {} } } } } }), 400],
  ['tool_choice required and response_format at once', CHAT,
    withField({ tools: [{ type: 'function', function: { name: 'f', parameters: { type: 'object' } } }], tool_choice: 'required',
      response_format: { type: 'json_object' } }), 400],
  ['chat_template_kwargs not an object', CHAT, withField({ chat_template_kwargs: 'x' }), 400],
  ['enable_thinking not a boolean', CHAT, withField({ chat_template_kwargs: { enable_thinking: 'yes' } }), 400],
  ['tools not an array', CHAT, withField({ tools: 'x' }), 400],
  ['think_cap negative', CHAT, withField({ think_cap: -1 }), 400],
  ['unknown model', CHAT, withField({ model: 'gpt-9' }), 404],
  ['invalid UTF-8 in content', CHAT, Buffer.concat([Buffer.from('{"messages":[{"role":"user","content":"a'), Buffer.from([0xff, 0xfe, 0xc3]), Buffer.from('"}]}')]), 400],
  ['lone surrogate escape', CHAT, '{"messages":[{"role":"user","content":"\\ud800"}]}', 400],
  ['overlong prompt', CHAT, user('word '.repeat(2000)), 400, { message: /\d+ tokens.*256/ }],
  ['10 MB body', CHAT, JSON.stringify(user('x'.repeat(10 * 1000 * 1000))), 413],
  // `curl -d` without -H: the HTTP library caps form-encoded bodies at 8 KB; the error says why.
  ['20 KB of JSON sent form-encoded', CHAT, user('x'.repeat(20000)), 413,
    { headers: { ...auth, 'Content-Type': 'application/x-www-form-urlencoded' }, message: /application\/json/ }],
  ['missing API key', CHAT, user('hi'), 401, { headers: {} }],
  ['wrong API key', CHAT, user('hi'), 401, { headers: { Authorization: 'Bearer nope' } }],
  ['API key without Bearer', CHAT, user('hi'), 401, { headers: { Authorization: KEY } }],
  ['completions: missing prompt', '/v1/completions', { model: 'demo' }, 400],
  ['completions: prompt is an object', '/v1/completions', { prompt: { a: 1 } }, 400],
  ['completions: token id outside the vocabulary', '/v1/completions', { prompt: [1, 999999] }, 400],
  ['completions: negative token id', '/v1/completions', { prompt: [-1] }, 400],
  ['completions: empty prompt', '/v1/completions', { prompt: '' }, 400],
  ['completions: two prompts (batch)', '/v1/completions', { prompt: ['a', 'b'] }, 400],
  ['tokenize: missing content', '/tokenize', {}, 400],
  ['detokenize: strings', '/detokenize', { tokens: ['a'] }, 400],
  ['detokenize: id out of range', '/detokenize', { tokens: [1e9] }, 400],
  ['unknown route', '/v1/nothing-here', {}, 404],
];

for (const [name, path, body, status, opt = {}] of cases) {
  await checks.check(`${name} -> ${status}`, async () => {
    const headers = opt.headers || auth;
    const r = await post(server.url + path, body, { headers, timeoutMs: 30000 });
    assert(r.status === status, `status ${r.status}, body ${r.text.slice(0, 200)}`);
    const e = r.json && r.json.error;
    assert(e && typeof e.message === 'string' && e.message.length > 0 && typeof e.type === 'string' && 'param' in e && 'code' in e,
      'not an OpenAI error: ' + r.text.slice(0, 200));
    if (opt.message) assert(opt.message.test(e.message), 'message ' + e.message);
  });
}

await checks.check('malformed HTTP on a raw socket gets an answer, not a hang', async () => {
  const answer = await new Promise((resolve, reject) => {
    const s = net.connect(server.port, '127.0.0.1');
    let got = '';
    s.on('data', (d) => { got += d; if (/\r\n\r\n/.test(got)) { s.destroy(); resolve(got); } });
    s.on('close', () => resolve(got));
    s.on('error', reject);
    s.setTimeout(10000, () => { s.destroy(); reject(new Error('no answer in 10 s')); });
    s.write('POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: banana\r\n\r\n{}');
  });
  assert(/^HTTP\/1\.1 4\d\d/.test(answer), 'answer ' + JSON.stringify(answer.slice(0, 80)));
});

await checks.check('a chunked body over --max-body -> 413', async () => {
  const answer = await new Promise((resolve, reject) => {
    const s = net.connect(server.port, '127.0.0.1');
    let got = '';
    s.on('data', (d) => { got += d; if (/\r\n\r\n\{.*\}/s.test(got)) { s.destroy(); resolve(got); } });
    s.on('close', () => resolve(got));
    s.on('error', () => resolve(got));  // the server may close while we still send
    s.setTimeout(20000, () => { s.destroy(); reject(new Error('no answer in 20 s')); });
    s.write(`POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${KEY}\r\nTransfer-Encoding: chunked\r\n\r\n`);
    const chunk = 'a'.repeat(1 << 20);
    for (let i = 0; i < 10; i++) s.write(chunk.length.toString(16) + '\r\n' + chunk + '\r\n');
    s.write('0\r\n\r\n');
  });
  assert(/^HTTP\/1\.1 413/.test(answer) && /payload_too_large/.test(answer), 'answer ' + JSON.stringify(answer.slice(0, 120)));
});

await checks.check('/health stays open without a key; x-api-key is accepted; a good request still works', async () => {
  const h = await request(server.url + '/health');
  assert(h.status === 200, '/health ' + h.status);
  const r = await post(server.url + CHAT, user('hi'), { headers: { 'X-Api-Key': KEY } });
  assert(r.status === 200 && r.json.choices[0].message.content !== undefined, 'good request ' + r.status + ' ' + r.text.slice(0, 200));
  const m = await request(server.url + '/metrics', { headers: auth });
  assert(/dflash_http_errors_total\{status="400"\} [1-9]/.test(m.text), 'errors counted');
  assert(!server.exited, 'server died');
});

await checks.finish();
