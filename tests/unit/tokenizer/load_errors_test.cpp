// Files the engine cannot tokenize exactly are refused with one line naming file and problem.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "tiny_tokenizer.h"
#include "tokenizer/tokenizer.h"
#include "util/error.h"

namespace {

using dflash::Tokenizer;
using nlohmann::json;

// The message of the dflash::Error that loading throws ("" if it loads).
std::string load_error(const std::string& tj, const std::string& cfg = "") {
  try {
    Tokenizer::from_json(tj, cfg, "models/x/tokenizer.json");
  } catch (const dflash::Error& e) {
    const std::string msg = e.what();
    EXPECT_EQ(msg.find('\n'), std::string::npos) << "not one line: " << msg;
    return msg;
  }
  return "";
}

void expect_error(const std::string& msg, const std::string& file, const std::string& what) {
  EXPECT_EQ(msg.rfind(file + ": ", 0), 0u) << msg;
  EXPECT_NE(msg.find(what), std::string::npos) << msg;
}

TEST(TokenizerLoadErrors, TinyTokenizerLoads) { EXPECT_EQ(load_error(tiny::tokenizer_json().dump()), ""); }

TEST(TokenizerLoadErrors, UnknownModelType) {
  auto tj = tiny::tokenizer_json();
  tj["model"]["type"] = "WordPiece";
  expect_error(load_error(tj.dump()), "models/x/tokenizer.json", "model type 'WordPiece'");
  tj["model"]["type"] = "Unigram";
  expect_error(load_error(tj.dump()), "models/x/tokenizer.json", "'Unigram' is not supported");
}

TEST(TokenizerLoadErrors, MalformedJson) {
  expect_error(load_error("{\"model\": {"), "models/x/tokenizer.json", "malformed JSON");
  expect_error(load_error(""), "models/x/tokenizer.json", "malformed JSON");
  expect_error(load_error(tiny::tokenizer_json().dump(), "{oops"),
               "models/x/tokenizer_config.json", "malformed JSON");
  expect_error(load_error("[1, 2]"), "models/x/tokenizer.json", "no \"model\"");
}

TEST(TokenizerLoadErrors, UnsupportedComponents) {
  const std::string file = "models/x/tokenizer.json";
  auto with = [](const char* key, json v) {
    auto tj = tiny::tokenizer_json();
    tj[key] = std::move(v);
    return tj.dump();
  };
  expect_error(load_error(with("normalizer", {{"type", "Lowercase"}})), file, "'Lowercase'");
  expect_error(load_error(with("normalizer", {{"type", "Sequence"},
                                              {"normalizers", {{{"type", "NFC"}}, {{"type", "NFKD"}}}}})),
               file, "'NFKD'");
  expect_error(load_error(with("pre_tokenizer", {{"type", "Metaspace"}})), file, "'Metaspace'");
  expect_error(load_error(with("pre_tokenizer", nullptr)), file, "no ByteLevel");
  expect_error(load_error(with("decoder", {{"type", "WordPiece"}})), file, "decoder 'WordPiece'");
  expect_error(load_error(with("post_processor", {{"type", "BertProcessing"}})), file,
               "'BertProcessing'");
  expect_error(load_error(with("pre_tokenizer",
                               {{"type", "Split"},
                                {"pattern", {{"Regex", "(unclosed"}}},
                                {"behavior", "Isolated"}})),
               file, "cannot compile");
}

TEST(TokenizerLoadErrors, BadModelFields) {
  const std::string file = "models/x/tokenizer.json";
  auto tj = tiny::tokenizer_json();
  tj["model"]["byte_fallback"] = true;
  expect_error(load_error(tj.dump()), file, "byte_fallback");

  tj = tiny::tokenizer_json();
  tj["model"]["merges"].push_back(json::array({"Q", "nope"}));
  expect_error(load_error(tj.dump()), file, "'nope' is not in the vocab");

  tj = tiny::tokenizer_json(true);
  tj["model"]["merges"].push_back("abc");
  expect_error(load_error(tj.dump()), file, "merge 7");

  tj = tiny::tokenizer_json();
  tj["model"]["vocab"]["Q"] = "seven";
  expect_error(load_error(tj.dump()), file, "vocab entry 'Q'");

  tj = tiny::tokenizer_json();
  tj["model"].erase("merges");
  expect_error(load_error(tj.dump()), file, "no \"merges\"");
}

TEST(TokenizerLoadErrors, ConfigNamesUnknownTokens) {
  auto cfg = tiny::config_json();
  cfg["eos_token"] = "<|nope|>";
  expect_error(load_error(tiny::tokenizer_json().dump(), cfg.dump()),
               "models/x/tokenizer_config.json", "eos_token '<|nope|>'");
}

TEST(TokenizerLoadErrors, FromFolder) {
  const auto dir = std::filesystem::temp_directory_path() / "dflash_tok_folder_test";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  try {
    Tokenizer::from_folder(dir.string());
    ADD_FAILURE() << "loaded a folder without tokenizer.json";
  } catch (const dflash::Error& e) {
    expect_error(e.what(), (dir / "tokenizer.json").string(), "not found");
  }
  std::ofstream(dir / "tokenizer.json") << tiny::tokenizer_json().dump();
  std::ofstream(dir / "chat_template.jinja") << "{{ messages }}";
  const Tokenizer tok = Tokenizer::from_folder(dir.string());
  EXPECT_EQ(tok.encode("hello"), (std::vector<int32_t>{259}));
  EXPECT_EQ(tok.chat_template(), "{{ messages }}");
  std::filesystem::remove_all(dir);
}

// Hugging Face's newer layout keeps the template in chat_template.jinja; when the config has one
// too, the file wins (transformers reads the file over the config's copy).
TEST(TokenizerLoadErrors, ChatTemplateFileBesideTheConfig) {
  const auto dir = std::filesystem::temp_directory_path() / "dflash_tok_template_file_test";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "tokenizer.json") << tiny::tokenizer_json().dump();
  auto cfg = tiny::config_json();
  cfg["chat_template"] = "from the config";
  std::ofstream(dir / "tokenizer_config.json") << cfg.dump();
  EXPECT_EQ(Tokenizer::from_folder(dir.string()).chat_template(), "from the config");
  const std::string file_template = "{%- for m in messages %}{{ m.content }}{% endfor %}\n";
  std::ofstream(dir / "chat_template.jinja", std::ios::binary) << file_template;
  EXPECT_EQ(Tokenizer::from_folder(dir.string()).chat_template(), file_template);
  cfg["chat_template"] = json::array({json{{"name", "default"}, {"template", "listed"}}});
  std::ofstream(dir / "tokenizer_config.json") << cfg.dump();
  EXPECT_EQ(Tokenizer::from_folder(dir.string()).chat_template(), file_template);
  std::filesystem::remove(dir / "chat_template.jinja");
  EXPECT_EQ(Tokenizer::from_folder(dir.string()).chat_template(), "listed");
  std::filesystem::remove_all(dir);
}

}  // namespace
