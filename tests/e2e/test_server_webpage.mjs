// The web chat page in a real browser (Debian's chromium driven by playwright-core): it sends a
// message, streams the answer in, shows tok/s and acceptance, settings and benchmark work.
// The screenshot lands in $DFLASH_BUILD_DIR/artifacts/webchat.png for a person to look at.
import fs from 'node:fs';
import path from 'node:path';
import { chromium } from 'playwright-core';
import {
  BUILD, Checks, assert, demoDraftPresent, overallTimeout, startServer, DEMO_DRAFT, DEMO_TARGET,
} from './server_harness.mjs';

const checks = new Checks('test_server_webpage');
overallTimeout(150000, checks);
const CHROMIUM = '/usr/bin/chromium';

if (!fs.existsSync(CHROMIUM)) {
  checks.fail('chromium present', `${CHROMIUM} is missing (apt-get install chromium)`);
  await checks.finish();
}

const args = ['--model', DEMO_TARGET];
if (demoDraftPresent()) args.push('--draft', DEMO_DRAFT, '--block-size', '4');
const server = await startServer(args);
const browser = await chromium.launch({
  executablePath: CHROMIUM,
  args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking',
         '--disable-component-update', '--disable-sync'],
});
try {
  const page = await browser.newPage({ viewport: { width: 1280, height: 800 } });
  const pageErrors = [];
  page.on('pageerror', (e) => pageErrors.push(e.message));
  page.setDefaultTimeout(30000);

  await checks.check('the page loads and names the model', async () => {
    await page.goto(server.url + '/');
    await page.waitForFunction(() => document.querySelector('#spec-badge').textContent.length > 0);
    const name = await page.textContent('#model-name');
    assert(name === 'target', 'model name ' + name);
  });

  await checks.check('a message streams an answer with tok/s, acceptance and tau', async () => {
    await page.click('#toggle-settings');
    await page.fill('#temperature', '0');
    await page.fill('#max-tokens', '160');
    await page.uncheck('#enable-thinking');
    // Count how many times the answer grows: a streamed answer grows piece by piece.
    await page.evaluate(() => {
      window.__growth = 0;
      new MutationObserver(() => {
        const c = document.querySelector('.msg.assistant .content');
        if (c && c.textContent.length > 0) window.__growth++;
      }).observe(document.querySelector('#log'), { subtree: true, childList: true, characterData: true });
    });
    await page.fill('#prompt', 'Write a Python function that reverses a list.');
    await page.press('#prompt', 'Enter');
    await page.waitForSelector('.msg.assistant .stat-accept');
    const text = await page.textContent('.msg.assistant .content');
    assert(text.trim().length > 0, 'no answer text');
    const growth = await page.evaluate(() => window.__growth);
    assert(growth > 3, 'answer grew only ' + growth + ' times (not streamed?)');
    const tps = await page.textContent('.msg.assistant .stat-tps b');
    assert(Number(tps) > 0, 'tok/s ' + tps);
    const accept = await page.textContent('.msg.assistant .stat-accept b');
    assert(/^\d+(\.\d)?%$/.test(accept), 'acceptance ' + accept);
    const spec = await page.textContent('.msg.assistant .stat-spec b');
    assert(demoDraftPresent() ? spec === 'on' : spec === 'off', 'speculation ' + spec);
    assert(await page.isVisible('.msg.assistant .stat-tau'), 'no tau');
  });

  await checks.check('reasoning streams into a folded <details>, the think cap is shown', async () => {
    // The demo model never opens <think> by itself: the page's request is extended so the answer
    // continues an assistant turn that starts inside one, and the page renders what streams back.
    await page.route('**/v1/chat/completions', async (route) => {
      const body = JSON.parse(route.request().postData());
      body.messages.push({ role: 'assistant', content: '<think>\n' });
      body.continue_final_message = true;
      body.think_cap = 20;
      await route.continue({ postData: JSON.stringify(body) });
    });
    await page.fill('#prompt', 'Reverse a list, but think first.');
    await page.press('#prompt', 'Enter');
    await page.waitForFunction(() => document.querySelectorAll('.msg.assistant .stat-accept').length === 2);
    await page.unroute('**/v1/chat/completions');
    const last = '.msg.assistant:last-of-type';
    const d = await page.$eval(last + ' details', (el) => ({ hidden: el.hidden, open: el.open, text: el.querySelector('.reasoning-text').textContent }));
    assert(!d.hidden && !d.open && d.text.trim().length > 0, 'details ' + JSON.stringify(d));
    assert((await page.textContent(last + ' .content')).trim().length > 0, 'no answer after the reasoning');
    assert(await page.isVisible(last + ' .stat-capped'), 'think cap not shown');
  });

  await checks.check('a follow-up turn reuses the prefix (cached tokens shown)', async () => {
    await page.fill('#prompt', 'Now reverse it in place.');
    await page.press('#prompt', 'Enter');
    await page.waitForFunction(() => document.querySelectorAll('.msg.assistant .stat-accept').length === 3);
    const cached = await page.textContent('.msg.assistant:last-of-type .stat-cached b');
    assert(Number(cached) > 0, 'cached ' + cached);
  });

  await checks.check('the benchmark panel measures pp, tg and concurrent streams with TTFT, TPOT, speeds and peak memory', async () => {
    await page.click('#toggle-bench');
    await page.fill('#bench-pp', '64');
    await page.fill('#bench-tg', '32');
    await page.fill('#bench-streams', '3');
    await page.fill('#bench-reps', '1');
    await page.click('#bench-run');
    await page.waitForFunction(() => document.querySelector('#bench-status').textContent === 'done' ||
      document.querySelector('#bench-status').textContent.startsWith('error'));
    const status = await page.textContent('#bench-status');
    assert(status === 'done', 'benchmark ' + status);
    const rows = await page.$$eval('#bench-table tbody tr', (trs) => trs.map((tr) => [...tr.children].map((td) => td.textContent)));
    assert(rows.length === 3, 'rows ' + JSON.stringify(rows));
    const [pp, tg, conc] = rows;
    assert(conc[0] === '3 × tg32' && Number(conc[1]) > 0 && Number(conc[4]) > 0 && Number(conc[5]) > 0, 'concurrency row ' + conc);
    const batch = await page.textContent('#bench-batch');
    assert(/^3 streams: [\d.]+ tok\/s in all \((?:[\d.]+ streams per pass over the weights, \d+ slots|1 slot: not batched)\)$/.test(batch), 'batch note ' + batch);
    assert(pp[0] === 'pp64' && Number(pp[1]) > 0 && Number(pp[3]) > 0 && Number(pp[7]) > 0, 'pp row ' + pp);
    assert(tg[0] === 'tg32' && Number(tg[1]) > 0 && Number(tg[2]) > 0 && Number(tg[4]) > 0 && Number(tg[5]) > 0, 'tg row ' + tg);
  });

  await checks.check('screenshot saved', async () => {
    const dir = path.join(BUILD, 'artifacts');
    fs.mkdirSync(dir, { recursive: true });
    const file = path.join(dir, 'webchat.png');
    await page.screenshot({ path: file, fullPage: false });
    assert(fs.statSync(file).size > 10000, 'screenshot too small');
    console.log('  screenshot: ' + file);
  });

  await checks.check('no JavaScript errors on the page', async () => {
    assert(pageErrors.length === 0, pageErrors.join('; '));
  });
} finally {
  await browser.close().catch(() => {});
}
await checks.finish();
