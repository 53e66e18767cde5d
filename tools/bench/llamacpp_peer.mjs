#!/usr/bin/env node
// llama.cpp (through node-llama-cpp's prebuilt CPU binary) as a peer for dflash: greedy
// continuation of given token ids, and timings on the same GGUF file. Prints one JSON object.
//
//   node tools/bench/llamacpp_peer.mjs continue --model F.gguf --ids 1,2,3 --n 16 [--threads T]
//   node tools/bench/llamacpp_peer.mjs bench --model F.gguf [--threads T] [--pp 512] [--tg 128]
//        [--batches 1,2,4,5,8,16,32] [--reps 3]
// No download and no build: getLlama({build: "never"}) uses the installed binary or fails.
import { getLlama } from "node-llama-cpp";

function parseArgs(argv) {
  const o = { mode: argv[0], threads: 2, n: 16, pp: 512, tg: 128, batches: "1,2,4,5,8,16,32", reps: 3 };
  for (let i = 1; i < argv.length; i += 2) {
    const k = argv[i].replace(/^--/, ""), v = argv[i + 1];
    if (v === undefined) throw new Error(`missing value for ${argv[i]}`);
    o[k] = ["threads", "n", "pp", "tg", "reps"].includes(k) ? Number(v) : v;
  }
  if (!o.model) throw new Error("--model is required");
  return o;
}

const now = () => Number(process.hrtime.bigint()) / 1e6;

async function main() {
  const o = parseArgs(process.argv.slice(2));
  const llama = await getLlama({ gpu: false, build: "never", logLevel: "error" });
  const model = await llama.loadModel({ modelPath: o.model, useMmap: false, gpuLayers: 0 });
  if (o.mode === "continue") {
    const ids = o.ids.split(",").filter((s) => s.length).map(Number);
    const context = await model.createContext({ contextSize: Math.max(256, ids.length + o.n + 8), threads: o.threads, batchSize: 512, sequences: 1 });
    const seq = context.getSequence();
    const out = [];
    // No sampling options: temperature 0 (greedy) is the default; no repeat penalty is applied.
    for await (const t of seq.evaluate(ids, { temperature: 0 })) {
      out.push(t);
      if (out.length >= o.n) break;
    }
    console.log(JSON.stringify({ ids: out }));
    await context.dispose();
  } else if (o.mode === "bench") {
    const batches = o.batches.split(",").map(Number);
    const maxB = Math.max(...batches);
    const context = await model.createContext({
      contextSize: o.pp + o.tg + maxB + 64, threads: { ideal: o.threads, min: o.threads }, batchSize: Math.max(o.pp, maxB), sequences: 1,
    });
    const seq = context.getSequence();
    const prompt = Array.from({ length: o.pp }, (_, i) => (i * 7919 + 13) % 1000);
    // Warm-up, then the timed prefill of pp tokens.
    await seq.evaluateWithoutGeneratingNewTokens(prompt.slice(0, 16));
    await seq.clearHistory();
    let t0 = now();
    await seq.evaluateWithoutGeneratingNewTokens(prompt);
    const ppMs = now() - t0;
    // Generation of tg tokens after the prompt (greedy; one token per forward).
    let n = 0;
    t0 = now();
    for await (const _t of seq.evaluate([prompt[o.pp - 1]], { temperature: 0 })) {
      if (++n >= o.tg) break;
    }
    const tgMs = now() - t0;
    // Forward of K rows on top of the same context: verification cost of a block of K.
    await seq.clearHistory();
    await seq.evaluateWithoutGeneratingNewTokens(prompt.slice(0, 64));
    const forward = {};
    for (const b of batches) {
      const times = [];
      for (let r = 0; r < o.reps + 1; ++r) {
        const rows = Array.from({ length: b }, (_, i) => (i * 31 + r * 7 + 5) % 1000);
        const t = now();
        await seq.evaluateWithoutGeneratingNewTokens(rows);
        const dt = now() - t;
        await seq.eraseContextTokenRanges([{ start: 64, end: 64 + b }]);
        if (r > 0) times.push(dt);  // the first is a warm-up
      }
      times.sort((a, c) => a - c);
      forward[String(b)] = times[Math.floor(times.length / 2)];
    }
    console.log(JSON.stringify({
      engine: "llama.cpp (node-llama-cpp)", threads: o.threads, pp512_tok_s: (o.pp * 1000) / ppMs, tg128_tok_s: (o.tg * 1000) / tgMs,
      forward_ms: forward,
    }));
    await context.dispose();
  } else {
    throw new Error(`unknown mode '${o.mode}' (continue | bench)`);
  }
  await model.dispose();
  await llama.dispose();
}

main().catch((e) => {
  console.error(`llamacpp_peer: error: ${e.message}`);
  process.exit(1);
});
