#include "server/web/web_assets.h"

namespace dflash::server::web {

const std::string& style_css() {
  static const std::string css = R"css(
:root { --bg: #f6f7f9; --panel: #fff; --ink: #1d2430; --muted: #6a7383; --line: #dde1e7;
        --accent: #2f6fde; --user: #e8f0fe; --good: #1f8a4c; --warn: #b26a00; }
* { box-sizing: border-box; }
body { margin: 0; font: 15px/1.5 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif;
       background: var(--bg); color: var(--ink); height: 100vh; display: flex; flex-direction: column; }
header { display: flex; align-items: center; gap: .6rem; padding: .55rem 1rem; background: var(--panel);
         border-bottom: 1px solid var(--line); }
header h1 { font-size: 1.15rem; margin: 0 .4rem 0 0; }
.badge { font-size: .8rem; padding: .1rem .5rem; border-radius: 99px; background: #eef1f5; color: var(--muted); }
.badge.on { background: #e3f5ea; color: var(--good); }
.badge.off { background: #fff3e0; color: var(--warn); }
.spacer { flex: 1; }
button { font: inherit; padding: .35rem .8rem; border: 1px solid var(--line); border-radius: 6px;
         background: var(--panel); cursor: pointer; }
button:disabled { opacity: .5; cursor: default; }
button#send, button#bench-run { background: var(--accent); border-color: var(--accent); color: #fff; }
#layout { flex: 1; display: flex; min-height: 0; }
main { flex: 1; display: flex; flex-direction: column; min-width: 0; }
#log { flex: 1; overflow-y: auto; padding: 1rem; display: flex; flex-direction: column; gap: .8rem; }
.msg { max-width: 52rem; padding: .6rem .85rem; border-radius: 10px; background: var(--panel);
       border: 1px solid var(--line); white-space: pre-wrap; overflow-wrap: anywhere; }
.msg.user { align-self: flex-end; background: var(--user); border-color: #cfdcf5; }
.msg.assistant { align-self: flex-start; }
.msg.error { border-color: #e3a5a5; background: #fdf0f0; }
.msg details { margin-bottom: .4rem; color: var(--muted); font-size: .9rem; }
.msg details summary { cursor: pointer; }
.msg .reasoning-text { border-left: 3px solid var(--line); padding-left: .6rem; margin-top: .3rem; }
.stats { margin-top: .45rem; font-size: .78rem; color: var(--muted); white-space: normal;
         display: flex; flex-wrap: wrap; gap: .25rem .8rem; }
.stats b { color: var(--ink); font-weight: 600; }
#composer { display: flex; gap: .6rem; padding: .75rem 1rem; border-top: 1px solid var(--line); background: var(--panel); }
#composer textarea { flex: 1; font: inherit; padding: .5rem; border: 1px solid var(--line); border-radius: 6px; resize: vertical; }
.composer-buttons { display: flex; flex-direction: column; gap: .4rem; }
aside { width: 24rem; max-width: 45vw; overflow-y: auto; padding: 1rem; background: var(--panel);
        border-left: 1px solid var(--line); }
aside h2 { font-size: 1rem; margin: 0 0 .6rem; }
aside label { display: block; margin-bottom: .6rem; font-size: .88rem; }
aside label input:not([type=checkbox]), aside label textarea { display: block; width: 100%; margin-top: .2rem;
        font: inherit; padding: .3rem .4rem; border: 1px solid var(--line); border-radius: 5px; }
aside label.check { display: flex; align-items: center; gap: .4rem; }
.hint { font-size: .8rem; color: var(--muted); }
#bench-table { width: 100%; border-collapse: collapse; margin-top: .6rem; font-size: .78rem; }
#bench-table th, #bench-table td { border-bottom: 1px solid var(--line); padding: .25rem .2rem; text-align: right; }
#bench-table th:first-child, #bench-table td:first-child { text-align: left; }
)css";
  return css;
}

}  // namespace dflash::server::web
