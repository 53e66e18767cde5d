#pragma once
// Each subcommand lives in its own cmd_*.cpp and registers itself on the app.
#include <CLI/CLI.hpp>

namespace dflash::cli {

void add_generate_command(CLI::App& app);
void add_tokenize_command(CLI::App& app);
void add_logits_command(CLI::App& app);
void add_draft_logits_command(CLI::App& app);
void add_bench_command(CLI::App& app);
void add_template_command(CLI::App& app);
void add_serve_command(CLI::App& app);
void add_convert_command(CLI::App& app);
void add_graft_command(CLI::App& app);

}  // namespace dflash::cli
