// dflash tokenize: the Hugging Face tokenizer from the command line, plus JSON-lines batch
// modes so that oracle tests push thousands of strings through one process.
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "models/gguf_tokenizer.h"
#include "tokenizer/tokenizer.h"
#include "util/error.h"
#include "util/mapped_file.h"

namespace dflash::cli {
namespace {

struct TokenizeOptions {
  std::string model, text, file, decode, jsonl, decode_jsonl;
  bool json = false, no_special = false, skip_special = false, count = false, stats = false;
  CLI::Option* text_opt = nullptr;
};

std::string ids_to_text(const std::vector<int32_t>& ids, bool json) {
  std::string s = json ? "[" : "";
  for (size_t i = 0; i < ids.size(); ++i) {
    if (i) s += json ? "," : " ";
    s += std::to_string(ids[i]);
  }
  if (json) s += "]";
  return s;
}

std::vector<int32_t> parse_id_list(const std::string& s) {
  std::vector<int32_t> ids;
  size_t i = 0;
  while (i < s.size()) {
    if (s[i] == ',' || s[i] == ' ' || s[i] == '[' || s[i] == ']') {
      ++i;
      continue;
    }
    size_t used = 0;
    long v;
    try {
      v = std::stol(s.substr(i), &used);
    } catch (const std::exception&) {
      throw Error("--decode: '" + s + "' is not a comma-separated list of token ids");
    }
    if (v < 0 || v > INT32_MAX) throw Error("--decode: token id " + std::to_string(v) + " out of range");
    ids.push_back(static_cast<int32_t>(v));
    i += used;
  }
  return ids;
}

// Runs fn on each non-blank line of path ("-" = stdin), naming the line in errors.
template <class Fn>
void for_each_json_line(const std::string& path, Fn&& fn) {
  std::ifstream file;
  if (path != "-") {
    file.open(path, std::ios::binary);
    if (!file) throw file_error(path, "cannot open");
  }
  std::istream& in = path == "-" ? std::cin : file;
  std::string line;
  for (size_t n = 1; std::getline(in, line); ++n) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.find_first_not_of(" \t") == std::string::npos) continue;
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(line);
    } catch (const nlohmann::json::parse_error& e) {
      throw file_error(path, "line " + std::to_string(n) + ": malformed JSON: " + e.what());
    }
    fn(j, n);
  }
}

void write_out(const std::string& s) { std::fwrite(s.data(), 1, s.size(), stdout); }

void run_tokenize(const TokenizeOptions& o) {
  const int modes = (o.text_opt->count() > 0) + !o.file.empty() + !o.decode.empty() +
                    !o.jsonl.empty() + !o.decode_jsonl.empty();
  if (modes != 1) {
    throw Error("tokenize: give exactly one of --text, --file, --decode, --jsonl, --decode-jsonl");
  }
  const Tokenizer tok = has_gguf_suffix(o.model) ? load_gguf_tokenizer(o.model) : Tokenizer::from_folder(o.model);
  const bool parse_special = !o.no_special;

  if (!o.jsonl.empty()) {
    std::string out;
    for_each_json_line(o.jsonl, [&](const nlohmann::json& j, size_t n) {
      if (!j.is_string()) throw file_error(o.jsonl, "line " + std::to_string(n) + " is not a JSON string");
      out += ids_to_text(tok.encode(j.get_ref<const std::string&>(), parse_special), true);
      out += '\n';
      if (out.size() > (1 << 20)) write_out(out), out.clear();
    });
    write_out(out);
    return;
  }
  if (!o.decode_jsonl.empty()) {
    std::string out;
    for_each_json_line(o.decode_jsonl, [&](const nlohmann::json& j, size_t n) {
      std::vector<int32_t> ids;
      bool ok = j.is_array();
      for (const auto& v : j) {
        ok = ok && v.is_number_integer() && v.get<int64_t>() >= 0 && v.get<int64_t>() <= INT32_MAX;
        if (ok) ids.push_back(v.get<int32_t>());
      }
      if (!ok) throw file_error(o.decode_jsonl, "line " + std::to_string(n) + " is not a JSON array of token ids");
      out += nlohmann::json(tok.decode(ids, o.skip_special)).dump();
      out += '\n';
      if (out.size() > (1 << 20)) write_out(out), out.clear();
    });
    write_out(out);
    return;
  }
  if (!o.decode.empty()) {
    const std::string text = tok.decode(parse_id_list(o.decode), o.skip_special);
    write_out(o.json ? nlohmann::json(text).dump() + "\n" : text + "\n");
    return;
  }
  const std::string text = o.file.empty() ? o.text : read_text_file(o.file);
  const auto t0 = std::chrono::steady_clock::now();
  const std::vector<int32_t> ids = tok.encode(text, parse_special);
  const double sec = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (o.stats) {
    std::fprintf(stderr, "%zu bytes -> %zu tokens in %.3f s (%.2f MB/s)\n", text.size(), ids.size(),
                 sec, sec > 0 ? text.size() / sec / 1e6 : 0.0);
  }
  write_out(o.count ? std::to_string(ids.size()) + "\n" : ids_to_text(ids, o.json) + "\n");
}

}  // namespace

void add_tokenize_command(CLI::App& app) {
  auto* sub = app.add_subcommand(
      "tokenize", "Encode text to token ids, or decode ids, with a Hugging Face tokenizer.json");
  auto o = std::make_shared<TokenizeOptions>();
  sub->add_option("--model", o->model, "folder holding tokenizer.json (+ tokenizer_config.json)")
      ->required();
  o->text_opt = sub->add_option("--text", o->text, "text to encode");
  sub->add_option("--file", o->file, "encode the contents of this file");
  sub->add_option("--decode", o->decode, "comma-separated token ids to decode");
  sub->add_option("--jsonl", o->jsonl,
                  "batch encode: each line a JSON string; prints one JSON id array per line");
  sub->add_option("--decode-jsonl", o->decode_jsonl,
                  "batch decode: each line a JSON id array; prints one JSON string per line");
  sub->add_flag("--json", o->json, "print ids as a JSON array (decoded text as a JSON string)");
  sub->add_flag("--no-special", o->no_special, "do not parse special tokens in the text");
  sub->add_flag("--skip-special", o->skip_special, "leave special tokens out when decoding");
  sub->add_flag("--count", o->count, "print only the number of tokens");
  sub->add_flag("--stats", o->stats, "print encode time and throughput to stderr");
  sub->callback([o] { run_tokenize(*o); });
}

}  // namespace dflash::cli
