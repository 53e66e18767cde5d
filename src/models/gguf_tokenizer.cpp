// A tokenizer from the tokenizer.ggml.* metadata of a llama.cpp GGUF file.
#include "models/gguf_tokenizer.h"

#include <algorithm>
#include <functional>
#include <nlohmann/json.hpp>

#include "tokenizer/json_reader.h"
#include "util/error.h"
#include "util/mapped_file.h"

namespace dflash {

std::optional<int32_t> gguf_token_id(const GgufFile& f, const std::string& key) {
  auto v = f.get_int(key);
  if (!v) return std::nullopt;
  if (*v < 0 || *v > INT32_MAX) throw file_error(f.path(), "metadata key '" + key + "' is out of range");
  return int32_t(*v);
}

VocabSpec gguf_vocab_spec(const GgufFile& f) {
  VocabSpec v;
  auto model = f.get_string("tokenizer.ggml.model");
  if (!model) throw file_error(f.path(), "no tokenizer in this GGUF (missing 'tokenizer.ggml.model')");
  v.model = *model;
  v.pre = f.get_string("tokenizer.ggml.pre").value_or("default");
  auto strings = [&](const std::string& key, std::vector<std::string>& out, bool required) {
    const GgufValue* a = f.find(key);
    if (!a) {
      if (required) throw file_error(f.path(), "missing metadata key '" + key + "'");
      return;
    }
    if (!a->is_array_of(GgufValueType::STRING)) throw file_error(f.path(), "metadata key '" + key + "' must be an array of strings");
    out.reserve(a->items.size());
    for (const auto& x : a->items) out.push_back(x.s);
  };
  strings("tokenizer.ggml.tokens", v.tokens, true);
  strings("tokenizer.ggml.merges", v.merges, false);
  if (const GgufValue* a = f.find("tokenizer.ggml.token_type")) {
    if (a->type != GgufValueType::ARRAY || (!a->items.empty() && !a->items[0].is_int()))
      throw file_error(f.path(), "metadata key 'tokenizer.ggml.token_type' must be an array of integers");
    for (const auto& x : a->items) v.token_types.push_back(int32_t(x.i));
  }
  v.bos = gguf_token_id(f, "tokenizer.ggml.bos_token_id");
  v.eos = gguf_token_id(f, "tokenizer.ggml.eos_token_id");
  v.eot = gguf_token_id(f, "tokenizer.ggml.eot_token_id");
  v.pad = gguf_token_id(f, "tokenizer.ggml.padding_token_id");
  v.add_bos = f.get_bool("tokenizer.ggml.add_bos_token");
  v.chat_template = f.get_string("tokenizer.chat_template").value_or("");
  return v;
}

Tokenizer load_gguf_tokenizer(const std::string& path) {
  const GgufFile f(path);
  return Tokenizer::from_vocab(gguf_vocab_spec(f), path);
}

// tokenizer.json (+ config) -> tokenizer.ggml.* with one token per embedding row.
void write_gguf_tokenizer(GgufWriter& w, const std::string& dir, const ModelConfig& c) {
  const std::string tj_path = dir + "/tokenizer.json";
  if (!file_exists(tj_path)) throw file_error(tj_path, "not found (convert needs the model's tokenizer)");
  const std::string text = read_text_file(tj_path);
  const tok::TokenizerJsonDoc doc = tok::read_tokenizer_json(text, tj_path);
  const Tokenizer tk = Tokenizer::from_folder(dir);  // validates everything and resolves the specials
  const nlohmann::json& tree = doc.tree;
  // The Split regex and the normalizer decide which pre-tokenizer name llama.cpp must use.
  std::string regex;
  std::function<void(const nlohmann::json&)> find_regex = [&](const nlohmann::json& p) {
    if (!p.is_object()) return;
    if (p.value("type", "") == "Split" && p.contains("pattern") && p["pattern"].contains("Regex"))
      regex = p["pattern"]["Regex"].get<std::string>();
    if (p.contains("pretokenizers") && p["pretokenizers"].is_array())
      for (const auto& x : p["pretokenizers"]) find_regex(x);
  };
  if (tree.contains("pre_tokenizer")) find_regex(tree["pre_tokenizer"]);
  bool nfc = false;
  if (tree.contains("normalizer") && tree["normalizer"].is_object()) {
    const auto& n = tree["normalizer"];
    const std::string t = n.value("type", "");
    if (t == "NFC") nfc = true;
    else if (t == "Sequence" && n.contains("normalizers") && n["normalizers"].size() == 1 &&
             n["normalizers"][0].value("type", "") == "NFC")
      nfc = true;
    else
      throw file_error(tj_path, "normalizer '" + t + "' has no GGUF equivalent");
  }
  const std::string pre = vocab_pre_name(regex, nfc);
  if (pre.empty())
    throw file_error(tj_path, "its pre-tokenizer is none of Qwen2's, Qwen3.5's or Llama 3's: no llama.cpp pre-tokenizer name fits");

  const int64_t V = c.vocab;
  std::vector<std::string> tokens(static_cast<size_t>(V));
  std::vector<int32_t> types(static_cast<size_t>(V), int32_t(VocabTokenType::Unused));
  std::vector<bool> set(static_cast<size_t>(V), false);
  auto place = [&](int64_t id, const std::string& t, VocabTokenType ty) {
    if (id < 0 || id >= V)
      throw file_error(tj_path, "token id " + std::to_string(id) + " is outside the embedding (" + std::to_string(V) + " rows)");
    tokens[size_t(id)] = t;
    types[size_t(id)] = int32_t(ty);
    set[size_t(id)] = true;
  };
  for (const auto& [t, id] : doc.vocab) place(id, t, VocabTokenType::Normal);
  if (tree.contains("added_tokens") && tree["added_tokens"].is_array())
    for (const auto& a : tree["added_tokens"])
      place(a.at("id").get<int64_t>(), a.at("content").get<std::string>(),
            a.value("special", false) ? VocabTokenType::Control : VocabTokenType::UserDefined);
  for (int64_t i = 0; i < V; ++i)
    if (!set[size_t(i)]) tokens[size_t(i)] = "[PAD" + std::to_string(i) + "]";
  std::vector<GgufValue> tv, ty, mv;
  tv.reserve(size_t(V));
  for (auto& t : tokens) tv.push_back(GgufValue::str(t));
  for (int32_t t : types) ty.push_back(GgufValue::i32(t));
  for (const auto& [l, r] : doc.merges) mv.push_back(GgufValue::str(l + " " + r));
  w.add("tokenizer.ggml.model", GgufValue::str("gpt2"));
  w.add("tokenizer.ggml.pre", GgufValue::str(pre));
  w.add("tokenizer.ggml.tokens", GgufValue::array(GgufValueType::STRING, std::move(tv)));
  w.add("tokenizer.ggml.token_type", GgufValue::array(GgufValueType::I32, std::move(ty)));
  w.add("tokenizer.ggml.merges", GgufValue::array(GgufValueType::STRING, std::move(mv)));
  const SpecialTokens& sp = tk.special();
  // The model's own end-of-sequence (generation_config) first: it is what generation stops on.
  std::vector<int32_t> eos(c.eos_ids.begin(), c.eos_ids.end());
  for (int32_t e : sp.eos)
    if (std::find(eos.begin(), eos.end(), e) == eos.end()) eos.push_back(e);
  if (!eos.empty()) w.add("tokenizer.ggml.eos_token_id", GgufValue::u32(uint32_t(eos[0])));
  if (eos.size() > 1) w.add("tokenizer.ggml.eot_token_id", GgufValue::u32(uint32_t(eos[1])));
  const std::optional<int32_t> bos = sp.bos ? sp.bos : c.bos_id >= 0 ? std::optional<int32_t>(c.bos_id) : std::nullopt;
  if (bos) w.add("tokenizer.ggml.bos_token_id", GgufValue::u32(uint32_t(*bos)));
  if (sp.pad) w.add("tokenizer.ggml.padding_token_id", GgufValue::u32(uint32_t(*sp.pad)));
  w.add("tokenizer.ggml.add_bos_token", GgufValue::boolean(sp.add_bos));
  if (!tk.chat_template().empty()) w.add("tokenizer.chat_template", GgufValue::str(tk.chat_template()));
}

}  // namespace dflash
