// Deterministic test strings for the tokenizer oracle test: code, prose in many scripts, emoji,
// combining marks, whitespace, digits, added tokens, contractions and random code points.
//
// Random code points come only from ranges whose characters (or unassignedness) did not change
// between Unicode 14 (PCRE2 10.42, the engine's property tables, and Oniguruma in Hugging
// Face's Rust tokenizers) and the newer Unicode of node's ICU, which the JS oracle uses: a
// letter added in Unicode 16 is \p{L} for the oracle but unassigned for both real engines.

export function mulberry32(seed) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const PROSE = {
  english: "the quick brown fox jumps over a lazy dog while speculative decoding drafts several tokens at once and the target model verifies them in one pass memory bandwidth bounds latency",
  french: "déjà vu l'été où l'élève était très âgé ça coûte cher naïve façade garçon œuvre crème brûlée",
  german: "Straße Größe übermäßig Fußgänger Äpfel Öl Übung schön Weißbier Maßkrug",
  spanish: "¿Dónde está la niña? ¡Qué mañana tan bonita! El pingüino comió piñata",
  vietnamese: "Tiếng Việt có nhiều dấu thanh như ả ã ạ ặ ẫ và chữ đ rất đẹp",
  turkish: "İstanbul ılık ğüşöç IŞIK Iğdır",
  russian: "Привет мир съешь же ещё этих мягких французских булок да выпей чаю ЁЛКА Ёж",
  greek: "Καλημέρα κόσμε ξεσκεπάζω την ψυχοφθόρα βδελυγμία; ΑΒΓΔ άέήίόύώ ΐΰ",
  arabic: "مرحبا بالعالم، هذه جملة عربية للاختبار. اللغة العربية جميلة؟ ١٢٣٤ ٫ ٪",
  hebrew: "שלום עולם, זה משפט בעברית עם ניקוד: שָׁלוֹם עֲלֵיכֶם ״ציטוט״",
  hindi: "नमस्ते दुनिया। यह हिंदी में एक वाक्य है। क्षत्रिय ज्ञान श्री ॐ १२३",
  chinese: "你好世界，这是一个用于测试分词器的句子。我们喜欢机器学习和深度学习！「引号」《书名》",
  japanese: "こんにちは世界。カタカナとひらがなと漢字を混ぜます。ｶﾀｶﾅ半角、全角ＡＢＣ",
  korean: "안녕하세요 세계, 이것은 한국어 문장입니다. 토크나이저를 시험합니다!",
  thai: "สวัสดีชาวโลก นี่คือประโยคภาษาไทย ภาษาไทยไม่มีการเว้นวรรคระหว่างคำ",
  georgian: "გამარჯობა მსოფლიო ქართული ენა",
  armenian: "Բարեւ աշխարհ հայերեն լեզու",
  tamil: "வணக்கம் உலகம் தமிழ் மொழி",
  bengali: "হ্যালো বিশ্ব বাংলা ভাষা",
  amharic: "ሰላም ዓለም አማርኛ ቋንቋ",
};
const UNSPACED = new Set(["chinese", "japanese", "thai"]);

const PYTHON = [
  "def {f}({a}, {b}=None):\n    \"\"\"Return the {a} of {b}.\"\"\"\n    if {b} is None:\n        return {n}\n    return {a} ** 2 + {b}\n",
  "class {F}(nn.Module):\n    def __init__(self):\n        super().__init__()\n        self.{a} = [{n}, {m}]\n\n    def forward(self, x):\n        return x @ self.{a}  # matmul\n",
  "for i in range({n}):\n\tprint(f\"{{i}}: {{{a}[i]!r}}\")\n",
  "import os, sys\nfrom typing import List\n\n{A} = {{'key': \"value\", 'n': {n}.{m}e-3}}\nprint(os.path.join('a', 'b'), sys.argv[1:])\n",
  "with open('{f}.txt', 'w', encoding='utf-8') as fh:\n    fh.write('héllo\\n')\nlambda x: x if x else -{n}\n",
];
const C = [
  "#include <stdio.h>\n\nint {f}(int {a}, const char *{b}) {\n    for (int i = 0; i < {n}; ++i) {\n        printf(\"%d %s\\n\", {a} + i, {b});\n    }\n    return 0x{h};\n}\n",
  "static inline uint32_t {f}(uint32_t x) { return (x << {n}) | (x >> (32 - {n})); }\n/* {A}: see ISO/IEC 9899 */\n",
  "typedef struct {\n\tfloat {a}[{n}];\n\tdouble *{b};\n} {F}_t;\n#define {A} ({n}u)\n",
  "template <typename T>\nstd::vector<T> {f}(const std::vector<T>& {a}) {\n  auto r = {a};\n  std::sort(r.begin(), r.end());\n  return r;\n}\n",
];
const JS = [
  "const {f} = async ({a}, {b} = {n}) => {\n  const res = await fetch(`/api/${{a}}?n=${{b}}`);\n  return res.json();\n};\n",
  "export default function {F}({ {a}, {b} }) {\n  return <div className=\"{a}\">{{b}}</div>;\n}\n",
  "let {a} = [{n}, {m}].map((x) => x * 2).filter(Boolean); // {A}\nconsole.log({a}?.length ?? 0, {a} === null || {a} !== undefined);\n",
];
const RUST = [
  "fn {f}<'a>({a}: &'a str, {b}: usize) -> Option<&'a str> {\n    {a}.get(..{b}).map(|s| s.trim())\n}\n",
  "#[derive(Debug, Clone)]\npub struct {F} {\n    pub {a}: Vec<u8>,\n    {b}: HashMap<String, i64>,\n}\n\nimpl {F} {\n    pub fn new() -> Self { Self { {a}: vec![0; {n}], {b}: HashMap::new() } }\n}\n",
  "match {a} {\n    Some(x) if x > {n} => println!(\"big {{}}\", x),\n    _ => unreachable!(),\n}\n",
];
const SHELL = [
  "#!/bin/bash\nset -euo pipefail\nfor f in *.{a}; do\n  echo \"processing $f\" >&2\n  grep -c '{b}' \"$f\" || true\ndone\n",
  "export {A}=\"$HOME/.{a}\"\ncmake -S . -B build -G Ninja && cmake --build build -j{n} 2>&1 | tee log.txt\n",
  "curl -sSL https://example.com/{a}?x={n}&y={m} | jq '.items[] | .{b}' > out.json\n",
];
const OTHER_CODE = [
  "SELECT {a}, COUNT(*) AS n FROM {b} WHERE id > {n} GROUP BY {a} ORDER BY n DESC;\n",
  "<html>\n  <body>\n    <p class=\"{a}\">Hello &amp; welcome &lt;{b}&gt;</p>\n  </body>\n</html>\n",
  "{\"{a}\": [{n}, {m}, null, true], \"{b}\": {\"nested\": \"valeur été\"}}\n",
  "package main\n\nimport \"fmt\"\n\nfunc {f}({a} int) (int, error) {\n\treturn {a} * {n}, nil\n}\n",
];

const EMOJI = ["😀", "🤖", "👍", "🎉", "❤️", "🔥", "🚀", "✅", "🙏", "🐍", "🦀", "💡", "⭐", "☕", "✨"];
const TONE_BASES = ["👍", "👋", "🙏", "👩", "🧑", "👶", "✌", "🤝"];
const ZWJ = ["👨‍👩‍👧‍👦", "👩‍💻", "🏳️‍🌈", "🧑🏽‍🚀", "❤️‍🔥", "🐻‍❄️", "👁️‍🗨️", "🧔‍♂️", "👩🏿‍🤝‍👩🏻"];
const KEYCAPS = ["1️⃣", "#️⃣", "*️⃣", "🔟"];
const SCOTLAND = "🏴\u{E0067}\u{E0062}\u{E0073}\u{E0063}\u{E0074}\u{E007F}";

const NFC_CASES = [
  "e\u0301", "E\u0301", "a\u0308", "A\u030A", "\u212B", "\u2126", "\u1100\u1161\u11A8",
  "\u1112\u1161\u11AB\u1100\u1173\u11AF", "a\u0323\u0302", "a\u0302\u0323", "\u0344", "\u0958",
  "\uF900", "\uFB01", "\u1E9B\u0323", "o\u0308\u0304", "\u00C5", "Ω", "\u0041\u030A\u0301",
  "c\u0327", "n\u0303", "u\u031B\u0303", "\u0915\u093C", "\u05D1\u05BC", "\u30AB\u3099",
  "\u304B\u3099", "i\u0307", "\u03B9\u0308\u0301", "\u0627\u0653", "\u1025\u102E",
];

const WS = [" ", "  ", "    ", "\t", "\t\t", "\n", "\n\n", "\r\n", "\r\n\r\n", "\r", "\u00A0",
            "\u3000", "\u2028", "\u2029", "\u0085", "\u180E", "\u200B", "\u2009", "\f", "\v",
            " \n", "\n ", " \t\n", "\u202F", "\uFEFF", "\u1680"];

const CONTRACTIONS = ["don't", "DON'T", "Don'T", "you're", "YOU'RE", "you'Re", "it's", "IT'S",
  "it'S", "I'm", "I'M", "we'll", "WE'LL", "we'Ll", "they've", "THEY'VE", "he'd", "HE'D", "I'd've",
  "rock'n'roll", "'tis", "o'clock", "l'été", "it’s", "can''t", "'s", "''", "'", "'''s", "x'S'T'",
  "don’t", "ʼs", "'Ş"];
// Not "'ſ": Oniguruma and PCRE2 fold ſ to s inside (?i:'s), the JS oracle folds ASCII only.

// Code point ranges that are stable between Unicode 14 and newer versions (see top).
const STABLE_RANGES = [
  [0x20, 0x7e], [0x00, 0x1f], [0x7f, 0x9f], [0xa0, 0x24f], [0x250, 0x2ff], [0x300, 0x36f],
  [0x370, 0x3ff], [0x400, 0x52f], [0x590, 0x5ff], [0x600, 0x6ff], [0x900, 0x97f], [0xe00, 0xe7f],
  [0x1100, 0x11ff], [0x1e00, 0x1eff], [0x2000, 0x2064], [0x2100, 0x214f], [0x2190, 0x23ff],
  [0x2500, 0x27bf], [0x3000, 0x303f], [0x3041, 0x3096], [0x30a0, 0x30ff], [0x4e00, 0x9fff],
  [0xac00, 0xd7a3], [0xe000, 0xf8ff], [0xfdd0, 0xfdef], [0xff01, 0xffbe], [0xfffe, 0xffff],
  [0x10000, 0x1005d], [0x10330, 0x1034a], [0x12000, 0x12399], [0x13000, 0x1342e],
  [0x1d400, 0x1d7ff], [0x1f300, 0x1f5ff], [0x1f600, 0x1f64f], [0x1f680, 0x1f6c5],
  [0x20000, 0x2a6df], [0xe0020, 0xe007f], [0xe0100, 0xe01ef], [0xf0000, 0xffffd],
  [0x100000, 0x10fffd], [0x1fffe, 0x1ffff], [0x10fffe, 0x10ffff],
];
const UNASSIGNED = /^\p{Cn}$/u;  // unassigned now implies unassigned in Unicode 14 too

export function makeCorpus(seed, count, addedTokens) {
  const rnd = mulberry32(seed);
  const int = (n) => Math.floor(rnd() * n);
  const pick = (a) => a[int(a.length)];
  const chance = (p) => rnd() < p;

  const ident = () => {
    const parts = ["data", "x", "buf", "tokenizer", "idx", "my", "value", "cfg", "Ñame", "größe",
                   "π", "count", "tmp", "HTTP", "json", "kv", "_", "__init__", "i2", "v"];
    const k = 1 + int(3);
    const ws = Array.from({ length: k }, () => pick(parts));
    const style = int(4);
    if (style === 0) return ws.join("_");
    if (style === 1) return ws[0] + ws.slice(1).map((w) => w[0].toUpperCase() + w.slice(1)).join("");
    if (style === 2) return ws.join("_").toUpperCase();
    return ws.join("");
  };
  const fill = (tmpl) =>
    tmpl.replace(/\{(f|F|a|b|A|n|m|h)\}/g, (_, k) => {
      if (k === "n") return String(int(1000));
      if (k === "m") return String(int(100000));
      if (k === "h") return int(1 << 30).toString(16).toUpperCase();
      if (k === "F") { const s = ident(); return s[0].toUpperCase() + s.slice(1); }
      if (k === "A") return ident().toUpperCase();
      return ident();
    });

  const code = () => {
    const pool = pick([PYTHON, C, JS, RUST, SHELL, OTHER_CODE]);
    let s = fill(pick(pool));
    if (chance(0.2)) s = s.replace(/\n/g, "\r\n");
    if (chance(0.2)) s = s.replace(/    /g, "\t");
    if (chance(0.2)) s = s.replace(/\n/g, "   \n");
    if (chance(0.3)) s = s + fill(pick(pool));
    return s;
  };

  const prose = () => {
    const lang = pick(Object.keys(PROSE));
    const text = PROSE[lang];
    let s;
    if (UNSPACED.has(lang)) {
      const chars = Array.from(text);
      const start = int(chars.length);
      s = chars.slice(start, start + 5 + int(40)).join("");
    } else {
      const words = text.split(" ");
      const n = 3 + int(25);
      const out = [];
      for (let i = 0; i < n; ++i) {
        let w = pick(words);
        const c = int(8);
        if (c === 0) w = w.toUpperCase();
        else if (c === 1) w = w[0].toUpperCase() + w.slice(1);
        out.push(w);
        if (chance(0.1)) out.push(pick([",", ".", ";", ":", "!", "?", " -", " —", "…", "(", ")"]));
      }
      s = out.join(chance(0.9) ? " " : pick(["  ", "\n", "\t"]));
    }
    if (chance(0.3)) s = s + pick([".", "!\n", "\n\n", "?", " ", "。"]);
    return s;
  };

  const emoji = () => {
    const parts = [];
    const n = 1 + int(8);
    for (let i = 0; i < n; ++i) {
      const c = int(6);
      if (c === 0) parts.push(pick(EMOJI));
      else if (c === 1) parts.push(pick(TONE_BASES) + String.fromCodePoint(0x1f3fb + int(5)));
      else if (c === 2) parts.push(pick(ZWJ));
      else if (c === 3) parts.push(String.fromCodePoint(0x1f1e6 + int(26), 0x1f1e6 + int(26)));
      else if (c === 4) parts.push(chance(0.5) ? pick(KEYCAPS) : SCOTLAND);
      else parts.push(pick(["ok", " wow", "!", " ", "\n", "x", "是"]));
    }
    return parts.join(chance(0.5) ? "" : " ");
  };

  const combining = () => {
    const parts = [];
    const n = 1 + int(6);
    for (let i = 0; i < n; ++i) {
      if (chance(0.5)) {
        parts.push(pick(NFC_CASES));
      } else {
        let s = pick(["a", "e", "o", "u", "A", "i", "n", "ω", "и", "ا", " ", "1", "z"]);
        const marks = 1 + int(3);
        for (let k = 0; k < marks; ++k) s += String.fromCodePoint(0x300 + int(0x70));
        parts.push(s);
      }
      if (chance(0.4)) parts.push(pick([" ", "", "word", "\n", "."]));
    }
    return parts.join("");
  };

  const whitespace = () => {
    const parts = [];
    const n = 1 + int(10);
    for (let i = 0; i < n; ++i) {
      parts.push(pick(WS).repeat(1 + int(3)));
      if (chance(0.6)) parts.push(pick(["word", "x", "Hello", "42", "(", "é", "日本", "-", "'s"]));
    }
    return parts.join("");
  };

  const digits = () => {
    const parts = [];
    const n = 1 + int(6);
    for (let i = 0; i < n; ++i) {
      const c = int(8);
      if (c < 3) parts.push(String(int(10 ** (1 + int(9)))).repeat(1 + int(3)));
      else if (c === 3) parts.push(`${int(1000)}.${int(100000)}`);
      else if (c === 4) parts.push(pick(["1e10", "0x1F", "3.14159", "1,234,567", "-42", "+7", "10%", "$5.99"]));
      else if (c === 5) parts.push(pick(["١٢٣٤", "१२३", "１２３", "²³", "½", "Ⅻ", "⑤", "٣.٥", "๑๒๓"]));
      else if (c === 6) parts.push("9".repeat(1 + int(40)));
      else parts.push(pick([" ", "", "-", "/", ":", "x"]));
      parts.push(pick(["", " ", ", ", "\n"]));
    }
    return parts.join("");
  };

  const added = () => {
    const broken = ["<|im_start", "im_start|>", "<|im_start|", "< think>", "<think", "<<think>>",
                    "<|", "|>", "</think", "<|endoftext", "<|eot_id|", "<|start_header_id|>x"];
    const parts = [];
    const n = 1 + int(7);
    for (let i = 0; i < n; ++i) {
      const c = int(4);
      if (c < 2) parts.push(pick(addedTokens));
      else if (c === 2) parts.push(pick(broken));
      else parts.push(pick(["user\n", "assistant\n", "Hello", " ", "\n", "\n\n", "思考", "😀", "x "]));
    }
    return parts.join(chance(0.7) ? "" : pick([" ", "\n"]));
  };

  const contractions = () => {
    const parts = [];
    const n = 1 + int(6);
    for (let i = 0; i < n; ++i) {
      parts.push(pick(CONTRACTIONS));
      parts.push(pick([" ", "", "\n", " x ", "s"]));
    }
    return parts.join("");
  };

  const randomCodePoint = () => {
    if (chance(0.2)) {
      for (;;) {  // anywhere, as long as it is unassigned even in the newest Unicode
        const cp = int(0x110000);
        if (cp >= 0xd800 && cp <= 0xdfff) continue;
        const ch = String.fromCodePoint(cp);
        if (UNASSIGNED.test(ch)) return ch;
      }
    }
    const [lo, hi] = pick(STABLE_RANGES);
    return String.fromCodePoint(lo + int(hi - lo + 1));
  };
  const junk = () => {
    const n = 1 + int(40);
    let s = "";
    for (let i = 0; i < n; ++i) s += chance(0.3) ? pick([" ", "a", "'", "\n", "1", "."]) : randomCodePoint();
    return s;
  };

  const makers = [code, code, prose, prose, prose, emoji, combining, whitespace, digits, added,
                  contractions, junk, junk];
  const out = ["", " ", "\n", "a", "Hello world, def foo(x): return x**2 🤖", "e\u0301", " e\u0301"];
  while (out.length < count) {
    if (chance(0.15)) {
      const k = 2 + int(3);
      out.push(Array.from({ length: k }, () => pick(makers)()).join(pick(["", " ", "\n"])));
    } else {
      out.push(pick(makers)());
    }
  }
  // A few long inputs: long words and runs exercise the merge loop and the regex engine.
  out.push("a".repeat(5000), "=".repeat(20000), " ".repeat(10000) + "x", "9".repeat(3001),
           Array.from({ length: 300 }, () => prose()).join(" "),
           Array.from({ length: 100 }, () => code()).join("\n"),
           "ab".repeat(4000) + "\n".repeat(500) + "\t ".repeat(700),
           Array.from({ length: 2000 }, () => randomCodePoint()).join(""));
  return out;
}
