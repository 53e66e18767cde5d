// Greedy output through the server is exactly what `dflash generate --json` prints for the same
// prompt: through /v1/chat/completions (the Qwen3 template with enable_thinking false renders
// the CLI's --chat form byte for byte, checked here too) and through /v1/completions with the
// same ids, with and without a draft. Speculation is lossless, so with-draft answers must also
// equal the plain CLI's.
import {
  Checks, assert, assertEq, cliGenerate, demoDraftPresent, overallTimeout, post, startServer,
  DEMO_DRAFT, DEMO_TARGET, RANDOM_DRAFT, RANDOM_TARGET,
} from './server_harness.mjs';

const checks = new Checks('test_server_greedy');
overallTimeout(150000, checks);

const QUESTIONS = ['Write a Python function that reverses a list.', 'Show the class `OrderedDict` from the collections module.'];
const MAX = 48;

async function chat(url, q) {
  const r = await post(url + '/v1/chat/completions', {
    messages: [{ role: 'user', content: q }], temperature: 0, max_tokens: MAX, return_tokens: true,
    chat_template_kwargs: { enable_thinking: false },
  });
  assert(r.status === 200, 'chat ' + r.status + ' ' + r.text);
  return r.json;
}

async function complete(url, prompt) {
  const r = await post(url + '/v1/completions', { prompt, temperature: 0, max_tokens: MAX, return_tokens: true });
  assert(r.status === 200, 'completions ' + r.status + ' ' + r.text);
  return r.json;
}

// Plain CLI references, computed once per prompt.
const cliChat = new Map();
for (const q of QUESTIONS) cliChat.set(q, cliGenerate(['--model', DEMO_TARGET, '--chat', '--prompt', q, '--max-tokens', String(MAX)]));

async function demoChecks(label, args, draftExpected) {
  const s = await startServer(args);
  for (const q of QUESTIONS) {
    await checks.check(`${label}: chat "${q.slice(0, 24)}…" equals generate --chat`, async () => {
      const ref = cliChat.get(q);
      const r = await chat(s.url, q);
      assertEq(r.usage.prompt_tokens, ref.prompt_ids.length, 'prompt tokens');
      assertEq(r.choices[0].tokens, ref.ids, 'generated ids');
      assertEq(r.choices[0].message.content, ref.text, 'text');
      assertEq(r.choices[0].finish_reason, ref.finish_reason, 'finish_reason');
      if (draftExpected) assert(r.dflash.speculation === 'on' && r.dflash.drafted > 0, 'no drafting: ' + JSON.stringify(r.dflash));
    });
    await checks.check(`${label}: /v1/completions with the CLI's prompt ids equals generate --prompt-ids`, async () => {
      const ids = cliChat.get(q).prompt_ids;
      const ref = cliGenerate(['--model', DEMO_TARGET, '--prompt-ids', ids.join(','), '--max-tokens', String(MAX)]);
      const r = await complete(s.url, ids);
      assertEq(r.choices[0].tokens, ref.ids, 'generated ids');
      assertEq(r.choices[0].text, ref.text, 'text');
    });
  }
  await s.stop();
}

await demoChecks('demo target, no draft', ['--model', DEMO_TARGET], false);
if (demoDraftPresent()) {
  await demoChecks('demo pair (draft, block 4)', ['--model', DEMO_TARGET, '--draft', DEMO_DRAFT, '--block-size', '4'], true);
} else {
  checks.fail('demo pair: server with draft equals plain CLI', `the demo draft ${DEMO_DRAFT} does not exist yet`);
}

// The random pair: a different tokenizer and template, a draft that is rarely right.
const pair = await startServer(['--model', RANDOM_TARGET, '--draft', RANDOM_DRAFT]);
const plain = await startServer(['--model', RANDOM_TARGET]);
for (const prompt of ['hello world, this is a test', [5, 9, 17, 33, 65, 129]]) {
  await checks.check(`random pair: /v1/completions ${JSON.stringify(prompt)} equals generate, with and without draft`, async () => {
    const flag = Array.isArray(prompt) ? ['--prompt-ids', prompt.join(',')] : ['--prompt', prompt];
    const ref = cliGenerate(['--model', RANDOM_TARGET, ...flag, '--max-tokens', String(MAX)]);
    const refDraft = cliGenerate(['--model', RANDOM_TARGET, '--draft', RANDOM_DRAFT, ...flag, '--max-tokens', String(MAX)]);
    const a = await complete(pair.url, prompt), b = await complete(plain.url, prompt);
    assertEq(a.choices[0].tokens, ref.ids, 'with draft vs CLI');
    assertEq(b.choices[0].tokens, ref.ids, 'without draft vs CLI');
    assertEq(refDraft.ids, ref.ids, 'CLI with draft vs without');
    // How much is drafted depends on timings (the adaptive controller); the ids may not.
    assert(a.dflash.speculation === 'on' && a.dflash.drafted > 0, 'server did not draft: ' + JSON.stringify(a.dflash));
  });
}
await checks.finish();
