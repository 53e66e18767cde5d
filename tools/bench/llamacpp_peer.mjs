#!/usr/bin/env node
// llama.cpp (through node-llama-cpp's prebuilt CPU binary) as a peer for dflash: greedy
// continuation of given token ids, and timings on the same GGUF file. Prints one JSON object.
//
//   node tools/bench/llamacpp_peer.mjs continue --model F.gguf --ids 1,2,3 --n 16 [--threads T]
//   node tools/bench/llamacpp_peer.mjs bench --model F.gguf [--threads T] [--pp 512] [--tg 128]
//        [--batches 1,2,4,5,8,16,32] [--ctx 128] [--reps 3]  (dflash bench passes --reps 5)
//   node tools/bench/llamacpp_peer.mjs concurrency --model F.gguf --prompts P.json --streams 1,2,4,8
//        --tg 64 [--threads T] [--reps 1]  (P.json: [[ids...], ...]; stream i continues prompt i mod
//        their count greedily for tg tokens, all streams of a level at once as sequences of one
//        context, which node-llama-cpp batches into one decode; dflash bench --concurrency passes it)
//   node tools/bench/llamacpp_peer.mjs load --model F.gguf
//        (llama.cpp's loader only: hyperparameters, every tensor's name and shape, the vocab;
//        prints {ok: true, ...} or {ok: false, error, log} where the load fails; exit 0 both ways)
// No download and no build: getLlama({build: "never"}) uses the installed binary or fails.
// Written against node-llama-cpp 3.22.1 (LlamaContextSequence.evaluate,
// evaluateWithoutGeneratingNewTokens, controlledEvaluate, eraseContextTokenRanges, clearHistory).
const NPM_INSTALL =
  "npm install --ignore-scripts --omit=optional node-llama-cpp@3.22.1 @node-llama-cpp/linux-x64@3.22.1";

function parseArgs(argv) {
  const o = { mode: argv[0], threads: 2, n: 16, pp: 512, tg: 128, ctx: 128, batches: "1,2,4,5,8,16,32", reps: 3 };
  for (let i = 1; i < argv.length; i += 2) {
    const k = argv[i].replace(/^--/, ""), v = argv[i + 1];
    if (v === undefined) throw new Error(`missing value for ${argv[i]}`);
    o[k] = ["threads", "n", "pp", "tg", "ctx", "reps"].includes(k) ? Number(v) : v;
  }
  if (o.mode === "concurrency") {
    if (!o.prompts) throw new Error("--prompts is required (a JSON file of id arrays)");
    if (!o.streams) o.streams = "1,2,4,8";
  }
  if (!o.model) throw new Error("--model is required");
  if (!(o.threads >= 1)) throw new Error("--threads must be >= 1");
  return o;
}

const now = () => Number(process.hrtime.bigint()) / 1e6;

async function loadLlamaPackage() {
  try {
    return await import("node-llama-cpp");
  } catch (e) {
    if (e && (e.code === "ERR_MODULE_NOT_FOUND" || e.code === "MODULE_NOT_FOUND"))
      throw new Error(`node-llama-cpp is not installed; in the dflash source folder run: ${NPM_INSTALL}`);
    throw e;
  }
}

async function main() {
  const o = parseArgs(process.argv.slice(2));
  const { getLlama, LlamaLogLevel } = await loadLlamaPackage();
  if (o.mode === "load") {
    // llama.cpp's own messages say why a file is refused; keep them for the answer.
    const log = [];
    // llama.cpp's messages reach the logger asynchronously, some after loadModel resolves:
    // wait until none has arrived for 300 ms (at most 5 s) before reading them.
    let lastLog = Date.now();
    const settle = async () => {
      const start = Date.now();
      while (Date.now() - lastLog < 300 && Date.now() - start < 5000) await new Promise((r) => setTimeout(r, 50));
    };
    const llama = await getLlama({
      gpu: false, build: "never", logLevel: "info", maxThreads: 1,
      logger: (level, message) => {
        lastLog = Date.now();
        if (level !== LlamaLogLevel.debug) log.push(message.trimEnd());
      },
    });
    try {
      const model = await llama.loadModel({ modelPath: o.model, useMmap: true, gpuLayers: 0 });
      await settle();
      const info = log.filter((l) => /load_arch_(hparams|tensors)|arch +=|n_vocab +=|n_layer +=|n_embd +=/.test(l));
      console.log(JSON.stringify({ ok: true, size: model.size, trained_context: model.trainContextSize, info }));
      await model.dispose();
    } catch (e) {
      await settle();
      const errs = log.filter((l) => /error|failed|wrong|missing|key not found|check_tensor/i.test(l));
      console.log(JSON.stringify({ ok: false, error: String(e && e.message ? e.message : e), log: errs }));
    }
    await llama.dispose();
    return;
  }
  // maxThreads caps the instance (its CPU default is max(math cores, 4)); the context asks for
  // exactly o.threads (ideal and min), so both engines compute with the same thread count.
  const llama = await getLlama({ gpu: false, build: "never", logLevel: "error", maxThreads: o.threads });
  const model = await llama.loadModel({ modelPath: o.model, useMmap: false, gpuLayers: 0 });
  const threads = { ideal: o.threads, min: o.threads };
  if (o.mode === "continue") {
    const ids = o.ids.split(",").filter((s) => s.length).map(Number);
    const context = await model.createContext({ contextSize: Math.max(256, ids.length + o.n + 8), threads, batchSize: 512, sequences: 1 });
    const seq = context.getSequence();
    const out = [];
    // Greedy (temperature 0), no repeat penalty; an end-of-generation token is yielded and the
    // generation goes on, as `dflash generate --ignore-eos` does.
    for await (const t of seq.evaluate(ids, { temperature: 0, yieldEogToken: true })) {
      out.push(t);
      if (out.length >= o.n) break;
    }
    console.log(JSON.stringify({ ids: out, threads_used: context.currentThreads }));
    await context.dispose();
  } else if (o.mode === "bench") {
    const batches = o.batches.split(",").map(Number);
    const maxB = Math.max(...batches);
    const context = await model.createContext({
      contextSize: Math.max(o.pp + o.tg, o.ctx + maxB) + 64, threads, batchSize: Math.max(o.pp, maxB), sequences: 1,
    });
    const seq = context.getSequence();
    const prompt = Array.from({ length: o.pp }, (_, i) => (i * 7919 + 13) % 1000);
    // Warm-up, then the timed prefill of pp tokens (logits of the last row only, as dflash's prefill).
    await seq.evaluateWithoutGeneratingNewTokens(prompt.slice(0, 16));
    await seq.clearHistory();
    let t0 = now();
    await seq.evaluateWithoutGeneratingNewTokens(prompt);
    const ppMs = now() - t0;
    // Generation of tg tokens after the prompt (greedy; one token per forward).
    let n = 0;
    t0 = now();
    for await (const _t of seq.evaluate([prompt[o.pp - 1]], { temperature: 0, yieldEogToken: true })) {
      if (++n >= o.tg) break;
    }
    const tgMs = now() - t0;
    // Forward of K rows after o.ctx tokens of context: the verification cost of a block of K.
    // forward_ms: every row's next token (a verify needs them all), as dflash's curve computes
    // every row's logits; forward_last_ms: the last row's logits only.
    await seq.clearHistory();
    await seq.evaluateWithoutGeneratingNewTokens(prompt.slice(0, o.ctx));
    const base = seq.nextTokenIndex;
    const forward = {}, forwardLast = {};
    const median = (a) => a.sort((x, y) => x - y)[Math.floor(a.length / 2)];
    for (const b of batches) {
      const all = [], last = [];
      for (let r = 0; r < o.reps + 1; ++r) {
        const rows = Array.from({ length: b }, (_, i) => (i * 31 + r * 7 + 5) % 1000);
        let t = now();
        await seq.controlledEvaluate(rows.map((tok) => [tok, { generateNext: { token: true } }]));
        const dtAll = now() - t;
        await seq.eraseContextTokenRanges([{ start: base, end: base + b }]);
        t = now();
        await seq.evaluateWithoutGeneratingNewTokens(rows);
        const dtLast = now() - t;
        await seq.eraseContextTokenRanges([{ start: base, end: base + b }]);
        if (seq.nextTokenIndex !== base) throw new Error(`context did not roll back (${seq.nextTokenIndex} != ${base})`);
        if (r > 0) all.push(dtAll), last.push(dtLast);  // the first is a warm-up
      }
      forward[String(b)] = median(all);
      forwardLast[String(b)] = median(last);
    }
    console.log(JSON.stringify({
      engine: "llama.cpp (node-llama-cpp)", threads: o.threads, threads_used: context.currentThreads,
      pp512_tok_s: (o.pp * 1000) / ppMs, tg128_tok_s: (o.tg * 1000) / tgMs, context_tokens: o.ctx,
      forward_ms: forward, forward_last_ms: forwardLast,
    }));
    await context.dispose();
  } else if (o.mode === "concurrency") {
    const fs = await import("node:fs");
    const prompts = JSON.parse(fs.readFileSync(o.prompts, "utf8"));
    if (!Array.isArray(prompts) || prompts.length === 0) throw new Error("--prompts holds no prompts");
    const longest = Math.max(...prompts.map((p) => p.length));
    const levels = [];
    for (const c of o.streams.split(",").map(Number)) {
      // Each sequence needs room for its prompt and its tokens (llama.cpp may split n_ctx
      // between the sequences).
      const context = await model.createContext({
        contextSize: c * (longest + o.tg + 32), threads, batchSize: Math.max(512, c * longest), sequences: c,
      });
      let best = null;
      const seqs = Array.from({ length: c }, () => context.getSequence());
      for (let rep = 0; rep < Math.max(1, o.reps); ++rep) {
        for (const seq of seqs) await seq.clearHistory();
        const t0 = now();
        const latencies = [];
        let tokens = 0;
        await Promise.all(seqs.map(async (seq, i) => {
          let n = 0;
          for await (const _t of seq.evaluate(prompts[i % prompts.length], { temperature: 0, yieldEogToken: true })) {
            ++tokens;
            if (++n >= o.tg) break;
          }
          latencies.push(now() - t0);
        }));
        const wall = now() - t0;
        latencies.sort((a, b) => a - b);
        const r = { streams: c, aggregate_tok_s: (tokens * 1000) / wall, wall_ms: wall, tokens,
          latency_p50_ms: latencies[Math.floor((latencies.length - 1) / 2 + 0.5)], latency_max_ms: latencies[latencies.length - 1] };
        if (!best || r.wall_ms < best.wall_ms) best = r;
      }
      levels.push(best);
      await context.dispose();
    }
    console.log(JSON.stringify({ engine: "llama.cpp (node-llama-cpp)", threads: o.threads, tg: o.tg, levels }));
  } else {
    throw new Error(`unknown mode '${o.mode}' (continue | bench | concurrency | load)`);
  }
  await model.dispose();
  await llama.dispose();
}

main().catch((e) => {
  console.error(`llamacpp_peer: error: ${e.message}`);
  process.exit(1);
});
