// `dflash template`: renders a chat template, for checking it against Python's jinja2.
#include <cstdio>
#include <ctime>
#include <fstream>
#include <iostream>
#include <memory>
#include <optional>
#include <sstream>
#include <string>

#include "chat/chat_template.h"
#include "cli/commands.h"
#include "util/error.h"

namespace dflash::cli {

namespace {

std::string read_file(const std::string& path) {
  if (path == "-") {
    std::ostringstream ss;
    ss << std::cin.rdbuf();
    return ss.str();
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) throw file_error(path, "cannot open");
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

nlohmann::ordered_json parse_json(const std::string& text, const std::string& where) {
  try {
    return nlohmann::ordered_json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    throw Error(where + ": invalid JSON: " + e.what());
  }
}

// A .json file is a tokenizer_config.json carrying the template; anything else is the template.
std::string load_template(const std::string& path, const std::string& name) {
  std::string text = read_file(path);
  if (!ends_with(path, ".json")) return text;
  try {
    return chat_template_from_config(parse_json(text, path), name);
  } catch (const Error& e) {
    throw file_error(path, e.what());
  }
}

// --now: seconds since the epoch, or YYYY-MM-DD[THH:MM:SS] read as UTC.
std::time_t parse_now(const std::string& s) {
  if (!s.empty() && s.find_first_not_of("0123456789") == std::string::npos) return std::stoll(s);
  std::tm tm{};
  int n = std::sscanf(s.c_str(), "%d-%d-%dT%d:%d:%d", &tm.tm_year, &tm.tm_mon, &tm.tm_mday,
                      &tm.tm_hour, &tm.tm_min, &tm.tm_sec);
  if (n != 3 && n != 6) throw Error("--now: expected seconds since the epoch or YYYY-MM-DD[THH:MM:SS], got '" + s + "'");
  tm.tm_year -= 1900;
  tm.tm_mon -= 1;
  return timegm(&tm);
}

std::string dump_string(const std::string& s) {
  return nlohmann::ordered_json(s).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

struct Options {
  std::string template_path;
  std::string template_name = "default";
  std::string context_path;
  std::string jsonl_path;
  std::string now;
};

void run(const Options& opt) {
  ChatTemplate tpl(load_template(opt.template_path, opt.template_name));
  if (!opt.now.empty()) tpl.set_fixed_time(parse_now(opt.now));
  if (!opt.context_path.empty()) {
    std::string out = tpl.render(parse_json(read_file(opt.context_path), opt.context_path));
    std::fwrite(out.data(), 1, out.size(), stdout);
    std::fflush(stdout);
    return;
  }
  std::istringstream lines(read_file(opt.jsonl_path));
  std::string line;
  size_t lineno = 0;
  while (std::getline(lines, line)) {
    ++lineno;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    std::string result;
    try {
      auto ctx = parse_json(line, opt.jsonl_path + ":" + std::to_string(lineno));
      result = dump_string(tpl.render(ctx));
    } catch (const Error& e) {
      nlohmann::ordered_json err = {{"error", e.what()}};
      result = err.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    }
    result.push_back('\n');
    std::fwrite(result.data(), 1, result.size(), stdout);
  }
  std::fflush(stdout);
}

}  // namespace

void add_template_command(CLI::App& app) {
  auto opt = std::make_shared<Options>();
  auto* sub = app.add_subcommand("template", "Render a chat template with a JSON context");
  sub->add_option("--template", opt->template_path, "chat template (.jinja) or tokenizer_config.json")
      ->required();
  sub->add_option("--template-name", opt->template_name,
                  "which named template of a tokenizer_config.json list to use")
      ->capture_default_str();
  auto* ctx = sub->add_option("--context", opt->context_path,
                              "JSON object of template variables ('-' for stdin); prints the rendering");
  auto* jsonl = sub->add_option("--context-jsonl", opt->jsonl_path,
                                "one JSON context per line; prints one JSON string (or {\"error\": ...}) per line");
  ctx->excludes(jsonl);
  sub->add_option("--now", opt->now,
                  "time strftime_now() sees: epoch seconds or YYYY-MM-DD[THH:MM:SS] UTC (default: now)");
  sub->callback([opt] {
    if (opt->context_path.empty() && opt->jsonl_path.empty())
      throw Error("template: give --context FILE or --context-jsonl FILE");
    run(*opt);
  });
}

}  // namespace dflash::cli
