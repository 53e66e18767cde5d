// Tool calls through the official `openai` client on the shipped demo pair (the default
// `dflash serve`: models/demo35, whose Qwen3.5 template writes the XML form; the Qwen3 demo
// target, hermes form, is checked at the end): tool_choice and
// parallel_tool_calls validation (400s naming the field), and the response shape of requests
// with tools. The demo models are too small to call a tool by themselves, so what is checked
// here is that tools change nothing when no call is written (content a string, no tool_calls,
// finish_reason stop/length, streamed == unstreamed), the format each template selects, and the
// call that tool_choice "required" / a named function forces (constrained decoding; the
// round trips on both templates, with and without the draft, are in
// test_server_structured.mjs). The parsing of real calls (both forms,
// streamed at every byte boundary, broken blocks, calls inside <think>) is unit-tested in
// tests/unit/server/tool_calls_test.cpp.
import OpenAI from 'openai';
import { Checks, assert, assertEq, overallTimeout, post, sseEvents, startServer, DEMO_TARGET } from './server_harness.mjs';

const checks = new Checks('test_server_tools');
overallTimeout(120000, checks);
const check = (n, f) => checks.check(n, f);

const TOOLS = [
  {
    type: 'function',
    function: {
      name: 'get_weather', description: 'Current weather in a city',
      parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] },
    },
  },
];
const BASE = {
  model: 'default', messages: [{ role: 'user', content: 'What is the weather in Paris?' }], temperature: 0, max_tokens: 16,
  chat_template_kwargs: { enable_thinking: false },
};

const server = await startServer(['--no-draft']);
const client = new OpenAI({ baseURL: server.url + '/v1', apiKey: 'unused', timeout: 60000, maxRetries: 0 });

async function refused(body, param) {
  try {
    await client.chat.completions.create(body);
  } catch (e) {
    assert(e.status === 400, `status ${e.status}: ${e.message}`);
    assertEq(e.param, param, 'error.param of ' + JSON.stringify(body.tool_choice ?? body.parallel_tool_calls));
    return e;
  }
  throw new Error('accepted: ' + JSON.stringify(body).slice(0, 200));
}

await check('tool_choice that is not none/auto/required/{function} -> 400 naming the field', async () => {
  await refused({ ...BASE, tools: TOOLS, tool_choice: 'sometimes' }, 'tool_choice');
  await refused({ ...BASE, tools: TOOLS, tool_choice: 5 }, 'tool_choice');
  await refused({ ...BASE, tools: TOOLS, tool_choice: { type: 'retrieval' } }, 'tool_choice.type');
  await refused({ ...BASE, tools: TOOLS, tool_choice: { type: 'function' } }, 'tool_choice.function.name');
  await refused({ ...BASE, tools: TOOLS, tool_choice: { type: 'function', function: { name: 7 } } }, 'tool_choice.function.name');
});

await check('a named function not among tools, and required/named without tools -> 400', async () => {
  const e = await refused({ ...BASE, tools: TOOLS, tool_choice: { type: 'function', function: { name: 'get_time' } } },
    'tool_choice.function.name');
  assert(/get_time/.test(e.message), e.message);
  await refused({ ...BASE, tool_choice: 'required' }, 'tool_choice');
  await refused({ ...BASE, tools: [], tool_choice: { type: 'function', function: { name: 'get_weather' } } }, 'tool_choice');
});

await check('parallel_tool_calls must be a boolean; tool_choice on /v1/completions is refused', async () => {
  await refused({ ...BASE, tools: TOOLS, parallel_tool_calls: 'yes' }, 'parallel_tool_calls');
  const r = await post(server.url + '/v1/completions', { prompt: 'hi', max_tokens: 2, tool_choice: 'required' });
  assert(r.status === 400 && r.json.error.param === 'tool_choice', `${r.status} ${r.text.slice(0, 200)}`);
});

let plain = null;
await check('auto with tools, unstreamed: content a string, no tool_calls, finish stop/length, xml format', async () => {
  const r = await client.chat.completions.create({ ...BASE, tools: TOOLS, tool_choice: 'auto' });
  const c = r.choices[0];
  assert(typeof c.message.content === 'string' && c.message.content.length > 0, 'content ' + JSON.stringify(c.message.content));
  assert(c.message.tool_calls === undefined, 'tool_calls ' + JSON.stringify(c.message.tool_calls));
  assert(c.finish_reason === 'stop' || c.finish_reason === 'length', 'finish_reason ' + c.finish_reason);
  assertEq(r.dflash.tool_format, 'xml', 'the Qwen3.5 template writes XML calls');
  assert(r.dflash.tool_parse === undefined, 'a parse note without a <tool_call> block: ' + r.dflash.tool_parse);
  plain = c.message.content;
});

await check('tools with tool_choice none, and without tools: the same text, no tool entries', async () => {
  const none = await client.chat.completions.create({ ...BASE, tools: TOOLS, tool_choice: 'none' });
  assertEq(none.choices[0].message.content, plain, 'tool_choice none vs auto (no call written)');
  assert(none.dflash.tool_format === undefined, 'none parses nothing: ' + JSON.stringify(none.dflash));
  const bare = await client.chat.completions.create(BASE);
  assert(bare.dflash.tool_format === undefined && bare.choices[0].message.tool_calls === undefined, 'no tools: no tool entries');
});

await check('auto with tools, streamed with the client: the same text, no tool_calls deltas', async () => {
  const s = await client.chat.completions.create({ ...BASE, tools: TOOLS, stream: true, stream_options: { include_usage: true } });
  let text = '', finish = null, dflash = null, calls = 0;
  for await (const ch of s) {
    if (ch.dflash) dflash = ch.dflash;
    const c = ch.choices[0];
    if (!c) continue;
    if (c.delta.content) text += c.delta.content;
    if (c.delta.tool_calls) calls++;
    if (c.finish_reason) finish = c.finish_reason;
  }
  assertEq(text, plain, 'streamed content');
  assertEq(calls, 0, 'tool_calls deltas');
  assert(finish === 'stop' || finish === 'length', 'finish_reason ' + finish);
  assertEq(dflash.tool_format, 'xml', 'dflash.tool_format');
});

await check('required and named: the answer is a call (XML form, constrained decoding), streamed the same, arguments incrementally', async () => {
  // A bounded city closes; unbounded, the tiny demo model writes its string until max_tokens,
  // and the call is cut: it stays a call with the arguments written so far, finish_reason length.
  const bounded = [{ ...TOOLS[0], function: { ...TOOLS[0].function, parameters: {
    type: 'object', properties: { city: { type: 'string', maxLength: 24 } }, required: ['city'] } } }];
  for (const [tools, expectCut] of [[bounded, false], [TOOLS, true]])
  for (const tool_choice of ['required', { type: 'function', function: { name: 'get_weather' } }]) {
    const body = { ...BASE, max_tokens: 120, tools, tool_choice, parallel_tool_calls: false };
    const r = await client.chat.completions.create(body);
    const c = r.choices[0];
    const cut = expectCut;
    assertEq(c.finish_reason, cut ? 'length' : 'tool_calls', 'finish_reason for ' + JSON.stringify(tool_choice));
    assertEq(c.message.tool_calls.length, 1, 'one call');
    const call = c.message.tool_calls[0];
    assertEq(call.function.name, 'get_weather', 'the function');
    if (cut) {
      assert(call.function.arguments.startsWith('{"city":"'), 'cut arguments ' + call.function.arguments);
      assert(/cut before <\/tool_call>/.test(r.dflash.tool_parse), 'parse note ' + r.dflash.tool_parse);
    } else {
      const args = JSON.parse(call.function.arguments);
      assert(typeof args.city === 'string', 'arguments ' + call.function.arguments);
      assert(r.dflash.tool_parse === undefined, 'parse note ' + r.dflash.tool_parse);
    }
    const raw = await post(server.url + '/v1/chat/completions', { ...body, stream: true });
    const ev = sseEvents(raw.text);
    assertEq(ev[ev.length - 1], '[DONE]', 'the stream ends with [DONE]');
    let name = '', argText = '', id = '', finish = '', fragments = 0;
    for (const e of ev.filter((x) => x !== '[DONE]')) {
      const ch = e.choices[0];
      if (!ch) continue;
      for (const d of ch.delta.tool_calls ?? []) {
        if (d.id) id = d.id;
        if (d.function?.name) name += d.function.name;
        argText += d.function?.arguments ?? '';
        if (!d.id && d.function?.arguments) fragments++;
      }
      if (ch.finish_reason) finish = ch.finish_reason;
    }
    // (Each request has its own response id, so the ids are compared by form.)
    assert(/^call_[0-9a-f]+_0$/.test(id) && /^call_[0-9a-f]+_0$/.test(call.id), 'ids ' + id + ' ' + call.id);
    assertEq([name, argText, finish], ['get_weather', call.function.arguments, c.finish_reason], 'streamed call');
    // Forced: the arguments stream as the model writes them (one token at a time here, no draft).
    assert(fragments > 1, `arguments in ${fragments} fragment(s): ${call.function.arguments}`);
  }
});

await check('assistant tool_calls history and tool results render and answer', async () => {
  const r = await client.chat.completions.create({
    ...BASE, tools: TOOLS,
    messages: [
      BASE.messages[0],
      { role: 'assistant', content: null, tool_calls: [{ id: 'call_1', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Paris"}' } }] },
      { role: 'tool', tool_call_id: 'call_1', content: '{"temp_c": 21}' },
    ],
  });
  assert(typeof r.choices[0].message.content === 'string', 'content ' + JSON.stringify(r.choices[0].message));
});
await server.stop();

await check('the Qwen3 demo template selects the hermes form', async () => {
  const s3 = await startServer(['--model', DEMO_TARGET, '--no-draft']);
  const r = await post(s3.url + '/v1/chat/completions', { ...BASE, tools: TOOLS });
  assert(r.status === 200, `${r.status} ${r.text.slice(0, 200)}`);
  assertEq(r.json.dflash.tool_format, 'hermes', 'dflash.tool_format');
  assert(r.json.choices[0].message.tool_calls === undefined, 'no call written, none returned');
  assert(typeof r.json.choices[0].message.content === 'string', 'content a string');

  // Prompted with eight call blocks, this model writes '<tool_call"...' (a near-tag, not a
  // call): the stream holds "<tool_call" back until the quote shows it is text. Streamed and
  // unstreamed then give the same content, and every token's logprobs arrive exactly once.
  const block = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>\n';
  const body = {
    ...BASE, tools: TOOLS, max_tokens: 24, logprobs: true, continue_final_message: true,
    messages: [BASE.messages[0], { role: 'assistant', content: block.repeat(8) }],
  };
  const whole = await post(s3.url + '/v1/chat/completions', body);
  const c = whole.json.choices[0];
  assert(c.message.content.startsWith('<tool_call'), 'the demo model no longer writes the near-tag this check needs: ' +
    JSON.stringify(c.message.content.slice(0, 80)));
  assert(c.message.tool_calls === undefined && c.finish_reason === 'length', JSON.stringify(c).slice(0, 300));
  assert(whole.json.dflash.tool_parse === undefined, 'no block, no parse note: ' + whole.json.dflash.tool_parse);
  const ev = sseEvents((await post(s3.url + '/v1/chat/completions', { ...body, stream: true })).text).filter((e) => e !== '[DONE]');
  let text = '', lps = 0;
  for (const e of ev) {
    const ch = e.choices[0];
    if (!ch) continue;
    assert(!ch.delta.tool_calls, 'a tool_calls delta: ' + JSON.stringify(ch.delta));
    text += ch.delta.content ?? '';
    lps += ch.logprobs?.content?.length ?? 0;
  }
  assertEq(text, c.message.content, 'streamed content');
  assertEq(lps, c.logprobs.content.length, 'logprob entries streamed');
  assertEq(lps, whole.json.usage.completion_tokens, 'one logprob entry per token');
  await s3.stop();
});

await checks.finish();
