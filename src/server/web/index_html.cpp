#include "server/web/web_assets.h"

namespace dflash::server::web {

const std::string& index_html() {
  static const std::string page = R"page(<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>dflash chat</title>
<link rel="stylesheet" href="/style.css">
</head>
<body>
<header>
  <h1>dflash</h1>
  <span id="model-name" class="badge">loading…</span>
  <span id="spec-badge" class="badge"></span>
  <span class="spacer"></span>
  <button id="new-chat" type="button">New chat</button>
  <button id="toggle-settings" type="button" aria-controls="settings">Settings</button>
  <button id="toggle-bench" type="button" aria-controls="bench">Benchmark</button>
</header>
<div id="layout">
  <main>
    <div id="log" aria-live="polite"></div>
    <form id="composer">
      <textarea id="prompt" rows="3" placeholder="Message (Enter to send, Shift+Enter for a new line)"></textarea>
      <div class="composer-buttons">
        <button id="send" type="submit">Send</button>
        <button id="stop" type="button" disabled>Stop</button>
      </div>
    </form>
  </main>
  <aside id="settings" hidden>
    <h2>Settings</h2>
    <label>Temperature <input id="temperature" type="number" min="0" max="2" step="0.05" value="0"></label>
    <label>Max tokens <input id="max-tokens" type="number" min="1" step="1" value="1024"></label>
    <label class="check"><input id="enable-thinking" type="checkbox" checked> Enable thinking</label>
    <label>Think cap (tokens, 0 = server default) <input id="think-cap" type="number" min="0" step="1" value="0"></label>
    <label>System prompt <textarea id="system" rows="3"></textarea></label>
    <label>API key <input id="api-key" type="password" autocomplete="off" placeholder="only if the server has --api-key"></label>
  </aside>
  <aside id="bench" hidden>
    <h2>Throughput benchmark</h2>
    <p class="hint">Prompt processing sends random token ids (never cached) with max_tokens 1; token
    generation streams max tokens with the end-of-sequence token ignored. TTFT and end-to-end time are
    measured here, TPOT and the speeds by the server. Concurrent streams run several token
    generations at once: gen tok/s is then their aggregate, as the server batches them (--parallel).</p>
    <label>Prompt tokens (pp) <input id="bench-pp" type="text" value="128,512"></label>
    <label>Generated tokens (tg) <input id="bench-tg" type="text" value="128"></label>
    <label>Concurrent streams (each the first tg; empty: none) <input id="bench-streams" type="text" value="1,2,4"></label>
    <label>Repetitions <input id="bench-reps" type="number" min="1" max="10" value="2"></label>
    <button id="bench-run" type="button">Run</button>
    <div id="bench-status" class="hint"></div>
    <div id="bench-batch" class="hint"></div>
    <table id="bench-table">
      <thead><tr><th>test</th><th>TTFT ms</th><th>TPOT ms</th><th>prompt tok/s</th><th>gen tok/s</th>
      <th>e2e s</th><th>accept</th><th>peak MB</th></tr></thead>
      <tbody></tbody>
    </table>
  </aside>
</div>
<script src="/app.js"></script>
</body>
</html>
)page";
  return page;
}

}  // namespace dflash::server::web
