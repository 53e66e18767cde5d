// Tokenize strings with Hugging Face's JS tokenizer (the oracle the engine is tested against).
// usage: node tools/demo/oracle_encode.mjs <tokenizer dir> < in.jsonl > out.jsonl
// Each input line is a JSON string; each output line is the JSON array of its ids.
import fs from "node:fs";
import readline from "node:readline";
import { Tokenizer } from "@huggingface/tokenizers";

const dir = process.argv[2];
const tok = new Tokenizer(JSON.parse(fs.readFileSync(`${dir}/tokenizer.json`, "utf8")),
                          JSON.parse(fs.readFileSync(`${dir}/tokenizer_config.json`, "utf8")));
const rl = readline.createInterface({ input: process.stdin, crlfDelay: Infinity });
const out = [];
for await (const line of rl) {
  if (line.length === 0) continue;
  out.push(JSON.stringify(tok.encode(JSON.parse(line), { add_special_tokens: false }).ids));
}
process.stdout.write(out.join("\n") + "\n");
