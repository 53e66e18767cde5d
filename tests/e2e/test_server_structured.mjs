// Structured output and forced tool calls through the official `openai` client, on both demo
// pairs (the default Qwen3.5 hybrid pair, whose template writes XML tool calls, and the Qwen3
// pair, hermes JSON calls), each served with its draft drafting at every step (--no-adaptive)
// and without a draft (--no-draft). Constrained decoding masks the target at every verified
// position, so the two must give the same tokens; every output must validate against its
// schema with ajv (a JSON Schema validator nobody here wrote).
import OpenAI from 'openai';
import AjvModule from 'ajv';
import {
  Checks, assert, assertEq, overallTimeout, post, sseEvents, startServer, DEMO_TARGET, DEMO_DRAFT,
} from './server_harness.mjs';

const Ajv = AjvModule.default ?? AjvModule;
const ajv = new Ajv({ strict: false, allErrors: true });
const checks = new Checks('test_server_structured');
overallTimeout(600000, checks);
const check = (n, f) => checks.check(n, f);

const str = (maxLength) => ({ type: 'string', maxLength });
// What real clients send: OpenAI strict-mode objects, pydantic/zod shapes, enums, refs, unions.
const SCHEMAS = [
  { type: 'object', properties: { name: str(20), age: { type: 'integer' }, tags: { type: 'array', items: { type: 'string', enum: ['a', 'b'] }, maxItems: 3 } },
    required: ['name', 'age', 'tags'], additionalProperties: false },
  { type: 'object', properties: { ok: { type: 'boolean' }, comment: { type: 'string' } }, required: ['ok', 'comment'], additionalProperties: false },
  { type: 'string', enum: ['red', 'green', 'blue'] },
  { type: 'integer', minimum: 0, maximum: 100 },
  { type: 'number' },
  { type: 'array', items: { type: 'integer' }, minItems: 1, maxItems: 4 },
  { type: 'object', properties: { street: str(30), zip: { type: 'string', pattern: '^[0-9]{5}$' } }, required: ['street', 'zip'], additionalProperties: false },
  { anyOf: [{ type: 'integer' }, str(10)] },
  { type: ['string', 'null'], maxLength: 10 },
  { type: 'object', properties: { kind: { const: 'point' }, x: { type: 'number' }, y: { type: 'number' } }, required: ['kind', 'x', 'y'], additionalProperties: false },
  { $defs: { item: { type: 'object', properties: { id: { type: 'integer' }, label: str(12) }, required: ['id', 'label'], additionalProperties: false } },
    type: 'array', items: { $ref: '#/$defs/item' }, maxItems: 3 },
  { $defs: { node: { type: 'object', properties: { value: { type: 'integer' }, children: { type: 'array', items: { $ref: '#/$defs/node' }, maxItems: 2 } }, required: ['value'] } },
    $ref: '#/$defs/node' },
  { type: 'object', properties: { a: { type: 'integer' }, b: { type: 'boolean' }, c: str(8) }, required: ['a'], additionalProperties: false },
  { title: 'Invoice', description: 'pydantic style', type: 'object',
    properties: { number: { title: 'Number', type: 'integer', exclusiveMinimum: 0 }, paid: { title: 'Paid', type: 'boolean', default: false } },
    required: ['number', 'paid'] },
  { oneOf: [
    { type: 'object', properties: { type: { const: 'cat' }, lives: { type: 'integer', minimum: 0, maximum: 9 } }, required: ['type', 'lives'], additionalProperties: false },
    { type: 'object', properties: { type: { const: 'dog' }, good: { type: 'boolean' } }, required: ['type', 'good'], additionalProperties: false }] },
  { type: 'string', pattern: '^[a-z]{3,8}$' },
  { type: 'array', items: { enum: ['x', 'y', 'z'] }, minItems: 2, maxItems: 5 },
  { type: 'boolean' },
  { type: 'object', properties: { value: { type: 'number', nullable: true }, unit: { type: 'string', enum: ['kg', 'lb'] } }, required: ['value', 'unit'] },
  { type: 'array', items: { type: 'array', items: { type: 'integer', minimum: -5, maximum: 5 }, maxItems: 3 }, maxItems: 3 },
];

const TOOLS = [
  { type: 'function', function: { name: 'get_weather', description: 'Current weather in a city',
    parameters: { type: 'object', properties: { city: { type: 'string', maxLength: 24 }, unit: { type: 'string', enum: ['celsius', 'fahrenheit'] } },
      required: ['city', 'unit'], additionalProperties: false } } },
  { type: 'function', function: { name: 'search', description: 'Search the web',
    parameters: { type: 'object', properties: { query: { type: 'string', maxLength: 30 }, limit: { type: 'integer', minimum: 1, maximum: 10 } },
      required: ['query', 'limit'], additionalProperties: false } } },
];
const toolSchema = (name) => TOOLS.find((t) => t.function.name === name).function.parameters;

const USER = [{ role: 'user', content: 'Answer with JSON only.' }];
const NO_THINK = { chat_template_kwargs: { enable_thinking: false } };

const pairs = {
  qwen35: { draft: await startServer(['--no-adaptive']), plain: await startServer(['--no-draft']), form: 'xml' },
  qwen3: {
    draft: await startServer(['--model', DEMO_TARGET, '--draft', DEMO_DRAFT, '--no-adaptive']),
    plain: await startServer(['--model', DEMO_TARGET, '--no-draft']), form: 'hermes',
  },
};
const client = (s) => new OpenAI({ baseURL: s.url + '/v1', apiKey: 'unused', timeout: 120000, maxRetries: 0 });

// The same request to a pair's two servers: the answers must be the same tokens.
async function both(pair, body) {
  const [d, p] = await Promise.all([client(pair.draft).chat.completions.create(body), client(pair.plain).chat.completions.create(body)]);
  assertEq(d.choices[0].tokens, p.choices[0].tokens, 'tokens with and without the draft');
  // (Call ids come from the response id, which differs between the two servers.)
  const same = (m) => JSON.stringify({ ...m, tool_calls: m.tool_calls?.map((t) => ({ ...t, id: undefined })) });
  assertEq(same(d.choices[0].message), same(p.choices[0].message), 'message with and without the draft');
  assertEq(p.dflash.speculation, 'off', 'the plain server');
  assert(d.dflash.speculation === 'on' && d.dflash.drafted > 0, 'the draft server drafted: ' + JSON.stringify(d.dflash));
  return d;
}

const cost = [];
function noteCost(d) {
  assert(typeof d.mask_ms === 'number' && d.mask_ms >= 0 && typeof d.mask_ms_per_token === 'number', 'mask cost reported');
  cost.push({ mask: d.mask_ms_per_token, step: d.decode_ms_per_token });
}

await check('20 json_schema requests: valid by ajv, identical with and without the draft (Qwen3.5 pair)', async () => {
  let accepted = 0;
  for (const [i, schema] of SCHEMAS.entries()) {
    const body = { model: 'default', messages: USER, temperature: 0, max_tokens: 256, return_tokens: true, ...NO_THINK,
      response_format: { type: 'json_schema', json_schema: { name: 's' + i, schema, strict: true } } };
    const r = await both(pairs.qwen35, body);
    const c = r.choices[0];
    assertEq(c.finish_reason, 'stop', `schema ${i} finish_reason (output ${JSON.stringify(c.message.content).slice(0, 200)})`);
    let value;
    try { value = JSON.parse(c.message.content); } catch (e) { throw new Error(`schema ${i}: not JSON: ${c.message.content}`); }
    const validate = ajv.compile(schema);
    assert(validate(value), `schema ${i}: ${JSON.stringify(validate.errors)} for ${c.message.content}`);
    noteCost(r.dflash);
    accepted += r.dflash.accepted;
  }
  assert(accepted > 0, 'no drafted token was ever accepted under a schema');
});

await check('json_object: an object that parses, identical with and without the draft (both pairs)', async () => {
  for (const [name, pair] of Object.entries(pairs)) {
    // (These tiny models loop where a real one would close: asked for an open-ended object the
    // Qwen3 demo writes one key string until max_tokens, and given one to copy the Qwen3.5 demo
    // repeats keys. Each gets the prompt it does finish.)
    const content = name === 'qwen3' ? 'Return {"a": 1} as JSON.' : USER[0].content;
    const body = { model: 'default', messages: [{ role: 'user', content }], temperature: 0, max_tokens: 512,
      return_tokens: true, ...NO_THINK, response_format: { type: 'json_object' } };
    const r = await both(pair, body);
    assertEq(r.choices[0].finish_reason, 'stop', name + ' finish_reason ' + JSON.stringify(r.choices[0].message.content).slice(0, 200));
    const v = JSON.parse(r.choices[0].message.content);
    assert(v !== null && typeof v === 'object' && !Array.isArray(v), 'not an object: ' + r.choices[0].message.content);
  }
});

await check('seeded sampling under a schema: identical with and without the draft, and valid', async () => {
  const schema = SCHEMAS[0];
  for (const seed of [1, 2, 3]) {
    const body = { model: 'default', messages: USER, temperature: 0.8, seed, max_tokens: 256, return_tokens: true, ...NO_THINK,
      response_format: { type: 'json_schema', json_schema: { name: 'p', schema } } };
    const r = await both(pairs.qwen35, body);
    if (r.choices[0].finish_reason === 'stop') assert(ajv.validate(schema, JSON.parse(r.choices[0].message.content)), r.choices[0].message.content);
  }
});

await check('reasoning runs free and the schema starts after </think> (think cap forces the close)', async () => {
  const schema = SCHEMAS[9];
  const body = { model: 'default', messages: USER, temperature: 0, max_tokens: 200, return_tokens: true, think_cap: 12,
    chat_template_kwargs: { enable_thinking: true }, response_format: { type: 'json_schema', json_schema: { name: 'pt', schema } } };
  const r = await both(pairs.qwen35, body);  // its template pre-opens <think> when thinking is on
  const m = r.choices[0].message;
  assert(typeof m.reasoning_content === 'string' && m.reasoning_content.length > 0, 'reasoning ' + JSON.stringify(m));
  assert(ajv.validate(schema, JSON.parse(m.content)), 'answer ' + m.content);
});

// A forced call on one pair: the arguments validate against the function's schema, the call
// streams to the same id/name/arguments, and the tool's result can be sent back.
async function forcedCall(pair, tool_choice, want) {
  const body = { model: 'default', messages: [{ role: 'user', content: 'What is the weather in Paris?' }], tools: TOOLS,
    tool_choice, parallel_tool_calls: false, temperature: 0, max_tokens: 200, return_tokens: true, ...NO_THINK };
  const r = await both(pair, body);
  const c = r.choices[0];
  assertEq(c.finish_reason, 'tool_calls', 'finish_reason (' + JSON.stringify(c.message).slice(0, 300) + ')');
  assertEq(r.dflash.tool_format, pair.form, 'the template\'s call form');
  assert(r.dflash.tool_parse === undefined, 'parse note ' + r.dflash.tool_parse);
  assertEq(c.message.tool_calls.length, 1, 'one call (parallel_tool_calls false)');
  assertEq(c.message.content, null, 'content besides the call');
  for (const call of c.message.tool_calls) {
    if (want) assertEq(call.function.name, want, 'the named function');
    const args = JSON.parse(call.function.arguments);
    assert(ajv.validate(toolSchema(call.function.name), args), `${call.function.name} arguments ${call.function.arguments}: ${JSON.stringify(ajv.errors)}`);
  }
  noteCost(r.dflash);
  // Streamed with the client: the deltas reassemble to the unstreamed calls.
  const s = await client(pair.draft).chat.completions.create({ ...body, stream: true });
  const calls = [];
  let finish = null;
  for await (const ch of s) {
    const x = ch.choices[0];
    if (!x) continue;
    for (const d of x.delta.tool_calls ?? []) {
      calls[d.index] ??= { id: '', type: 'function', function: { name: '', arguments: '' } };
      if (d.id) calls[d.index].id = d.id;
      if (d.function?.name) calls[d.index].function.name += d.function.name;
      calls[d.index].function.arguments += d.function?.arguments ?? '';
    }
    if (x.finish_reason) finish = x.finish_reason;
  }
  // (Each request has its own id, so the ids are compared by form: call_<response id>_<index>.)
  assert(calls.every((t, i) => new RegExp(`^call_[0-9a-f]+_${i}$`).test(t.id)), 'streamed ids ' + JSON.stringify(calls));
  const noId = (ts) => JSON.stringify(ts.map((t) => ({ ...t, id: undefined })));
  assertEq(noId(calls), noId(c.message.tool_calls), 'streamed calls');
  assertEq(finish, 'tool_calls', 'streamed finish_reason');
  // The round trip: the call and its result go back, and the model answers.
  const back = await client(pair.plain).chat.completions.create({
    model: 'default', tools: TOOLS, temperature: 0, max_tokens: 16, ...NO_THINK,
    messages: [...body.messages, c.message, ...c.message.tool_calls.map((t) => ({ role: 'tool', tool_call_id: t.id, content: '{"temp": 21}' }))],
  });
  assert(typeof back.choices[0].message.content === 'string', 'answer after the tool result: ' + JSON.stringify(back.choices[0].message));
}

for (const [name, pair] of Object.entries(pairs)) {
  await check(`tool_choice required (${pair.form} form, ${name} pair): a valid call, the same with and without the draft`, () => forcedCall(pair, 'required', null));
  await check(`tool_choice named (${pair.form} form, ${name} pair): a call to that function`, () =>
    forcedCall(pair, { type: 'function', function: { name: 'search' } }, 'search'));
}

// tool_choice "auto": the answer is free until it writes <tool_call>, then the block is decoded
// under the call grammar. Continuing an answer that already holds two calls, the Qwen3 demo
// model writes the tag by itself; the grammar makes the block a valid call (the model, left
// free, writes a broken one), the same with and without the draft, and its arguments stream in
// fragments as they are written (before, auto mode held the block until it closed).
await check('tool_choice auto (hermes, Qwen3 pair): a block after the tag is a valid call, streamed incrementally, the same with and without the draft', async () => {
  const weather = [{ type: 'function', function: { name: 'get_weather', parameters: { type: 'object',
    properties: { city: { type: 'string', maxLength: 12 } }, required: ['city'] } } }];
  const block = (city) => `<tool_call>\n{"name": "get_weather", "arguments": {"city": "${city}"}}\n</tool_call>\n`;
  const body = { model: 'default', tools: weather, temperature: 0, max_tokens: 60, return_tokens: true,
    messages: [{ role: 'user', content: 'What is the weather in Paris?' }, { role: 'assistant', content: block('Paris') + block('Rome') }],
    continue_final_message: true, add_generation_prompt: false };
  const r = await both(pairs.qwen3, body);
  const c = r.choices[0];
  assertEq(r.dflash.tool_grammar, 'after_tag', 'dflash.tool_grammar');
  assert(c.message.tool_calls?.length >= 1, 'the demo model no longer writes the tag this check needs: ' + JSON.stringify(c.message).slice(0, 300));
  assert(r.dflash.tool_parse === undefined, 'parse note ' + r.dflash.tool_parse);
  for (const call of c.message.tool_calls) {
    assertEq(call.function.name, 'get_weather', 'the function');
    const args = JSON.parse(call.function.arguments);
    assert(ajv.validate(weather[0].function.parameters, args), `arguments ${call.function.arguments}: ${JSON.stringify(ajv.errors)}`);
  }
  // The same request free of the grammar (tool_choice none: nothing parsed, nothing masked)
  // writes something else at the tag: the grammar is what made the call.
  const free = await client(pairs.qwen3.plain).chat.completions.create({ ...body, tool_choice: 'none' });
  assert(JSON.stringify(free.choices[0].tokens) !== JSON.stringify(c.tokens), 'the grammar changed nothing: ' + free.choices[0].message.content);
  const s = await client(pairs.qwen3.draft).chat.completions.create({ ...body, stream: true });
  const calls = [];
  let content = '', fragments = 0, finish = null;
  for await (const ch of s) {
    const x = ch.choices[0];
    if (!x) continue;
    content += x.delta.content ?? '';
    for (const d of x.delta.tool_calls ?? []) {
      calls[d.index] ??= { id: '', type: 'function', function: { name: '', arguments: '' } };
      if (d.id) calls[d.index].id = d.id;
      if (d.function?.name) calls[d.index].function.name += d.function.name;
      if (!d.id && d.function?.arguments) fragments++;
      calls[d.index].function.arguments += d.function?.arguments ?? '';
    }
    if (x.finish_reason) finish = x.finish_reason;
  }
  const noId = (ts) => JSON.stringify(ts.map((t) => ({ ...t, id: undefined })));
  assertEq(noId(calls), noId(c.message.tool_calls), 'streamed calls');
  assertEq(content, c.message.content ?? '', 'streamed content');
  assertEq(finish, c.finish_reason, 'streamed finish_reason');
  assert(fragments > c.message.tool_calls.length, `arguments in ${fragments} fragment(s) for ${calls.length} call(s)`);
});

await check('schemas the compiler refuses, and two constraints at once -> 400 naming the field', async () => {
  const url = pairs.qwen35.plain.url + '/v1/chat/completions';
  const base = { model: 'default', messages: USER, max_tokens: 8 };
  let r = await post(url, { ...base, response_format: { type: 'json_schema', json_schema: { name: 'x', schema: { type: 'string', not: { const: 'a' } } } } });
  assert(r.status === 400 && r.json.error.param === 'response_format' && /not/.test(r.json.error.message), `${r.status} ${r.text.slice(0, 300)}`);
  r = await post(url, { ...base, response_format: { type: 'json_schema' } });
  assert(r.status === 400 && r.json.error.param === 'response_format', `${r.status} ${r.text.slice(0, 300)}`);
  r = await post(url, { ...base, response_format: { type: 'yaml' } });
  assert(r.status === 400 && r.json.error.param === 'response_format', `${r.status} ${r.text.slice(0, 300)}`);
  r = await post(url, { ...base, tools: TOOLS, tool_choice: 'required', response_format: { type: 'json_object' } });
  assert(r.status === 400 && r.json.error.param === 'response_format', `${r.status} ${r.text.slice(0, 300)}`);
  // A tool whose string parameter has a maxLength that is not a number (read by the XML form).
  const badTool = [{ type: 'function', function: { name: 'f', parameters: { type: 'object',
    properties: { s: { type: 'string', maxLength: 'ten' } }, required: ['s'] } } }];
  r = await post(url, { ...base, tools: badTool, tool_choice: 'required' });
  assert(r.status === 400 && r.json.error.param === 'tools', `${r.status} ${r.text.slice(0, 300)}`);
  // In auto mode a schema the compiler refuses is no error: the answer is decoded free and a
  // block is judged when it closes, as dflash.tool_grammar says.
  r = await post(url, { ...base, tools: [{ type: 'function', function: { name: 'f', parameters: { type: 'object',
    properties: { o: { type: 'object', not: { const: 'a' } } } } } }] });
  assert(r.status === 200 && /^off: .*'not'/.test(r.json.dflash.tool_grammar), `${r.status} ${r.text.slice(0, 300)}`);
  r = await post(url, { ...base, response_format: { type: 'text' } });
  assert(r.status === 200, 'type text is the default: ' + r.status);
});

await check('/v1/completions with response_format: valid JSON, identical with and without the draft', async () => {
  const body = { model: 'default', prompt: 'data = ', temperature: 0, max_tokens: 200, return_tokens: true,
    response_format: { type: 'json_schema', json_schema: { name: 'c', schema: SCHEMAS[5] } } };
  const [d, p] = await Promise.all([post(pairs.qwen35.draft.url + '/v1/completions', body), post(pairs.qwen35.plain.url + '/v1/completions', body)]);
  assertEq(d.json.choices[0].tokens, p.json.choices[0].tokens, 'tokens');
  assert(ajv.validate(SCHEMAS[5], JSON.parse(p.json.choices[0].text)), p.json.choices[0].text);
});

if (cost.length) {
  const mean = (k) => cost.reduce((a, c) => a + c[k], 0) / cost.length;
  console.log(`constraint cost over ${cost.length} requests (draft servers): mask ${mean('mask').toFixed(4)} ms/token, ` +
    `decode ${mean('step').toFixed(3)} ms/token (informational; \`dflash bench --schema\` measures it side by side)`);
}
await checks.finish();
