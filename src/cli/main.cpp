#include <cstdio>
#include <exception>

#include "cli/commands.h"
#include "util/error.h"

int main(int argc, char** argv) {
  CLI::App app{"dflash: lossless speculative decoding with DFlash block-diffusion drafts"};
  app.require_subcommand(1);
  dflash::cli::add_generate_command(app);
  dflash::cli::add_tokenize_command(app);
  dflash::cli::add_logits_command(app);
  dflash::cli::add_draft_logits_command(app);
  dflash::cli::add_bench_command(app);
  dflash::cli::add_template_command(app);
  dflash::cli::add_serve_command(app);
  dflash::cli::add_convert_command(app);
  dflash::cli::add_graft_command(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  } catch (const std::exception& e) {
    // One line, so scripts and users see exactly what is wrong and where.
    std::fprintf(stderr, "dflash: error: %s\n", e.what());
    return 1;
  }
  return 0;
}
