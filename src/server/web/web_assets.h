#pragma once
// The web chat page, compiled into the binary (no files to install next to it).
#include <string>

namespace dflash::server::web {

const std::string& index_html();
const std::string& app_js();
const std::string& style_css();

}  // namespace dflash::server::web
