#include "chat/chat_template.h"

#include <chrono>
#include <cstdio>

#include "chat/jinja_eval.h"
#include "chat/jinja_parser.h"
#include "util/error.h"

namespace dflash {

struct ChatTemplate::Impl {
  jinja::Body body;
};

ChatTemplate::ChatTemplate(std::string source) : source_(std::move(source)) {
  auto impl = std::make_shared<Impl>();
  impl->body = jinja::parse(source_);
  impl_ = std::move(impl);
}

std::string python_strftime(const std::string& fmt, const std::tm& tm, int microseconds) {
  // datetime.strftime expands %f, %z and %Z itself (empty for a naive datetime) before
  // handing the rest to the C library.
  std::string expanded;
  for (size_t i = 0; i < fmt.size(); ++i) {
    if (fmt[i] == '%' && i + 1 < fmt.size()) {
      char c = fmt[i + 1];
      ++i;
      if (c == 'f') {
        char buf[16];
        std::snprintf(buf, sizeof buf, "%06d", microseconds);
        expanded += buf;
      } else if (c != 'z' && c != 'Z') {
        expanded.push_back('%');
        expanded.push_back(c);
      }
      continue;
    }
    expanded.push_back(fmt[i]);
  }
  if (expanded.empty()) return "";
  std::string out(expanded.size() * 4 + 64, '\0');
  while (true) {
    size_t n = std::strftime(out.data(), out.size(), expanded.c_str(), &tm);
    if (n > 0 || out.size() > expanded.size() * 64 + 4096) {
      out.resize(n);
      return out;
    }
    out.resize(out.size() * 2);
  }
}

std::string ChatTemplate::render(const nlohmann::ordered_json& context) const {
  jinja::RenderHooks hooks;
  std::optional<std::time_t> fixed = fixed_time_;
  hooks.strftime_now = [fixed](const std::string& fmt) {
    std::tm tm{};
    int micros = 0;
    if (fixed) {
      gmtime_r(&*fixed, &tm);
    } else {
      auto now = std::chrono::system_clock::now();
      std::time_t t = std::chrono::system_clock::to_time_t(now);
      localtime_r(&t, &tm);
      micros = static_cast<int>(
          std::chrono::duration_cast<std::chrono::microseconds>(now.time_since_epoch()).count() % 1000000);
    }
    return python_strftime(fmt, tm, micros);
  };
  jinja::Value ctx = jinja::from_json(context);
  if (!ctx.is_dict()) throw Error("chat template context must be a JSON object");
  jinja::Interpreter interp(std::move(ctx), std::move(hooks));
  try {
    return interp.render(impl_->body);
  } catch (const jinja::RaisedError&) {
    throw;
  } catch (const jinja::RenderError& e) {
    std::string where = e.line ? " on line " + std::to_string(e.line) : "";
    throw Error("template error" + where + ": " + e.what());
  } catch (const Error&) {
    throw;
  } catch (const std::exception& e) {
    throw Error(std::string("template error: ") + e.what());
  }
}

std::string chat_template_from_config(const nlohmann::ordered_json& cfg, const std::string& name) {
  if (!cfg.is_object() || !cfg.contains("chat_template") || cfg["chat_template"].is_null())
    throw Error("tokenizer config has no chat_template");
  const auto& t = cfg["chat_template"];
  if (t.is_string()) return t.get<std::string>();
  if (t.is_array()) {
    for (const auto& entry : t) {
      if (entry.is_object() && entry.value("name", "") == name && entry.contains("template") &&
          entry["template"].is_string())
        return entry["template"].get<std::string>();
    }
    throw Error("tokenizer config has no chat template named '" + name + "'");
  }
  throw Error("tokenizer config chat_template must be a string or a list of {name, template}");
}

}  // namespace dflash
