// tokenizer.json + tokenizer_config.json -> Tokenizer::Impl. Everything the engine cannot
// reproduce exactly is refused here with the file's name, rather than tokenized differently.
#include <nlohmann/json.hpp>

#include "tokenizer/json_reader.h"
#include "tokenizer/tokenizer_impl.h"
#include "util/error.h"
#include "util/mapped_file.h"

namespace dflash::tok {
namespace {

using nlohmann::json;

constexpr int64_t kMaxAddedId = 1 << 24;

json parse_json(const std::string& text, const std::string& origin) {
  try {
    return json::parse(text);
  } catch (const json::parse_error& e) {
    throw file_error(origin, std::string("malformed JSON: ") + e.what());
  }
}

void check_decoder(const json& d, const std::string& origin) {
  if (d.is_null()) throw file_error(origin, "no decoder: only the ByteLevel decoder is supported");
  const std::string type = d.value("type", "");
  if (type == "ByteLevel") return;
  if (type == "Sequence" && d.contains("decoders") && d["decoders"].is_array()) {
    for (const auto& x : d["decoders"]) check_decoder(x, origin);
    return;
  }
  throw file_error(origin, "decoder '" + type + "' is not supported (only ByteLevel)");
}

// The post-processor only matters for add_special_tokens=true; it tells whether bos is added.
void read_post_processor(const json& p, const std::string& origin,
                         std::optional<std::string>& leading_special) {
  if (p.is_null()) return;
  const std::string type = p.value("type", "");
  if (type == "ByteLevel") return;
  if (type == "Sequence" && p.contains("processors") && p["processors"].is_array()) {
    for (const auto& x : p["processors"]) read_post_processor(x, origin, leading_special);
    return;
  }
  if (type == "TemplateProcessing") {
    const auto& single = p.value("single", json::array());
    if (single.is_array() && !single.empty() && single[0].contains("SpecialToken")) {
      leading_special = single[0]["SpecialToken"].value("id", "");
    }
    return;
  }
  throw file_error(origin, "post_processor '" + type +
                               "' is not supported (only ByteLevel, TemplateProcessing)");
}

void read_added_tokens(TokenizerData& impl, const json& list, const std::string& origin) {
  if (list.is_null()) return;
  if (!list.is_array()) throw file_error(origin, "\"added_tokens\" must be a list");
  impl.added.reserve(list.size());
  for (const auto& a : list) {
    if (!a.is_object() || !a.contains("id") || !a["id"].is_number_integer() ||
        !a.contains("content") || !a["content"].is_string()) {
      throw file_error(origin, "an added token needs an integer \"id\" and a \"content\" string");
    }
    AddedToken t;
    const auto id = a["id"].get<int64_t>();
    if (id < 0 || id >= kMaxAddedId) throw file_error(origin, "added token id out of range");
    t.id = static_cast<int32_t>(id);
    t.content = a["content"].get<std::string>();
    t.special = a.value("special", false);
    t.single_word = a.value("single_word", false);
    t.lstrip = a.value("lstrip", false);
    t.rstrip = a.value("rstrip", false);
    t.normalized = a.value("normalized", !t.special);
    impl.added.push_back(std::move(t));
  }
  for (size_t i = 0; i < impl.added.size(); ++i) {
    const AddedToken& t = impl.added[i];
    impl.added_by_id[t.id] = i;
    impl.added_by_content[t.content] = t.id;
    if (t.normalized) {
      impl.normalized_matcher.add(impl.normalizer.apply(t.content), &t);
    } else {
      impl.raw_matcher.add(t.content, &t);
    }
  }
}

// bos_token and friends: "text", {"content": "text"} or null.
std::optional<std::string> token_text(const json& cfg, const char* key) {
  if (!cfg.contains(key)) return std::nullopt;
  const json& v = cfg[key];
  if (v.is_string()) return v.get<std::string>();
  if (v.is_object() && v.contains("content") && v["content"].is_string()) {
    return v["content"].get<std::string>();
  }
  return std::nullopt;
}

std::optional<int32_t> resolve(const TokenizerData& impl, const std::string& text) {
  if (auto it = impl.added_by_content.find(text); it != impl.added_by_content.end()) {
    return it->second;
  }
  return impl.model.id_of_text(text);
}

int32_t require_token(const TokenizerData& impl, const std::string& text, const char* key,
                      const std::string& origin) {
  const auto id = resolve(impl, text);
  if (!id) throw file_error(origin, std::string(key) + " '" + text + "' is not in the vocabulary");
  return *id;
}

void read_config(TokenizerData& impl, const json& cfg, const std::string& origin,
                 const std::optional<std::string>& template_bos) {
  if (!cfg.is_object()) throw file_error(origin, "must be a JSON object");
  SpecialTokens& sp = impl.special;
  if (auto t = token_text(cfg, "bos_token")) sp.bos = require_token(impl, *t, "bos_token", origin);
  if (auto t = token_text(cfg, "eos_token")) {
    sp.eos.push_back(require_token(impl, *t, "eos_token", origin));
  } else if (cfg.contains("eos_token") && cfg["eos_token"].is_array()) {
    for (const auto& e : cfg["eos_token"]) {
      if (e.is_string()) sp.eos.push_back(require_token(impl, e, "eos_token", origin));
    }
  }
  if (auto t = token_text(cfg, "pad_token")) sp.pad = require_token(impl, *t, "pad_token", origin);

  if (cfg.contains("add_bos_token") && cfg["add_bos_token"].is_boolean()) {
    sp.add_bos = cfg["add_bos_token"].get<bool>();
  } else if (template_bos) {
    // No explicit flag: the fast tokenizer adds whatever its post-processor template starts with.
    const auto id = resolve(impl, *template_bos);
    sp.add_bos = id && (!sp.bos || *sp.bos == *id);
    if (id && !sp.bos) sp.bos = id;
  }

  if (cfg.contains("chat_template")) {
    const json& ct = cfg["chat_template"];
    if (ct.is_string()) {
      impl.chat_template = ct.get<std::string>();
    } else if (ct.is_array()) {
      for (const auto& entry : ct) {
        if (entry.is_object() && entry.value("name", "") == "default" &&
            entry.contains("template") && entry["template"].is_string()) {
          impl.chat_template = entry["template"].get<std::string>();
        }
      }
    }
  }
}

}  // namespace

void load_tokenizer(TokenizerData& impl, std::string_view tokenizer_json,
                    const std::string& origin, const std::string& config_json,
                    const std::string& config_origin) {
  const TokenizerJsonDoc doc = read_tokenizer_json(tokenizer_json, origin);
  const std::optional<std::string> template_bos = load_tokenizer_doc(impl, doc, origin);
  if (config_json.empty()) return;
  const json cfg = parse_json(config_json, config_origin);
  try {
    read_config(impl, cfg, config_origin, template_bos);
  } catch (const json::exception& e) {
    throw file_error(config_origin, std::string("unexpected JSON content: ") + e.what());
  }
}

std::optional<std::string> load_tokenizer_doc(TokenizerData& impl, const TokenizerJsonDoc& doc,
                                              const std::string& origin) {
  const json& tj = doc.tree;
  std::optional<std::string> template_bos;
  try {
    if (!tj.is_object() || !tj.contains("model")) {
      throw file_error(origin, "not a Hugging Face tokenizer.json (no \"model\")");
    }
    impl.model.load(doc, origin);
    impl.normalizer = Normalizer::from_json(tj.value("normalizer", json()), origin);
    impl.pre_tokenizer = PreTokenizer::from_json(tj.value("pre_tokenizer", json()), origin);
    check_decoder(tj.value("decoder", json()), origin);
    read_post_processor(tj.value("post_processor", json()), origin, template_bos);
    read_added_tokens(impl, tj.value("added_tokens", json()), origin);
  } catch (const json::exception& e) {
    throw file_error(origin, std::string("unexpected JSON content: ") + e.what());
  }
  int32_t max_id = impl.model.max_id();
  for (const auto& t : impl.added) max_id = std::max(max_id, t.id);
  impl.vocab_size = max_id + 1;
  return template_bos;
}

}  // namespace dflash::tok

namespace dflash {

Tokenizer Tokenizer::from_json(const std::string& tokenizer_json,
                               const std::string& tokenizer_config_json,
                               const std::string& origin) {
  // Name the config after the tokenizer file's folder, so errors point at the right file.
  const size_t slash = origin.find_last_of('/');
  const std::string config_origin =
      (slash == std::string::npos ? std::string() : origin.substr(0, slash + 1)) +
      "tokenizer_config.json";
  Tokenizer t;
  tok::load_tokenizer(*t.impl_, tokenizer_json, origin, tokenizer_config_json, config_origin);
  return t;
}

Tokenizer Tokenizer::from_folder(const std::string& dir) {
  const std::string base = dir.empty() || dir.back() == '/' ? dir : dir + "/";
  const std::string tj_path = base + "tokenizer.json";
  if (!file_exists(tj_path)) throw file_error(tj_path, "not found (a Hugging Face tokenizer.json is needed)");
  const std::string cfg_path = base + "tokenizer_config.json";
  const std::string cfg = file_exists(cfg_path) ? read_text_file(cfg_path) : std::string();
  Tokenizer t;
  const MappedFile tj(tj_path);  // 10 MB; no copy needed
  const std::string_view tj_text =
      tj.size() ? std::string_view(reinterpret_cast<const char*>(tj.data()), tj.size()) : "";
  tok::load_tokenizer(*t.impl_, tj_text, tj_path, cfg, cfg_path);
  // Newer checkpoints keep the template beside the config instead of inside it. When both
  // exist the file wins, as in transformers: save_pretrained writes the file, so a template
  // still inside the config is the older copy.
  if (file_exists(base + "chat_template.jinja")) {
    t.impl_->chat_template = read_text_file(base + "chat_template.jinja");
  }
  return t;
}

}  // namespace dflash
