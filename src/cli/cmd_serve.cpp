#include "cli/commands.h"
#include "util/error.h"

namespace dflash::cli {

// Reserved: the OpenAI-compatible server arrives with its own issue.
void add_serve_command(CLI::App& app) {
  auto* sub = app.add_subcommand("serve", "OpenAI-compatible HTTP server (not built yet)");
  sub->allow_extras();
  sub->callback([] { throw Error("'dflash serve' is not implemented yet"); });
}

}  // namespace dflash::cli
