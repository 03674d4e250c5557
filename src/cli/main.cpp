// The `tessera` binary: parses the command line and turns errors into messages and exit codes (1: error, 2: usage).
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <exception>
#include <vector>

#include "cli/commands.h"
#include "util/allocator.h"
#include "util/error.h"

int main(int argc, char** argv) {
  CLI::App app{"Tessera: run GGUF language models on one machine or split across several."};
  app.require_subcommand(1);
  app.set_version_flag("--version", "tessera 0.1.0");
  std::vector<tessera::Command> commands = {
      tessera::add_inspect_command(app),  tessera::add_gen_model_command(app),  tessera::add_run_command(app),
      tessera::add_tokenize_command(app), tessera::add_perplexity_command(app), tessera::add_probe_command(app),
      tessera::add_serve_command(app),    tessera::add_bench_command(app),      tessera::add_keygen_command(app),
      tessera::add_plan_command(app),     tessera::add_worker_command(app),     tessera::add_chat_template_command(app),
  };
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  try {
    for (auto& command : commands) {
      if (command.app->parsed()) return command.run();
    }
  } catch (const tessera::Error& e) {
    std::fflush(stdout);
    fmt::print(stderr, "error: {}\n", e.what());
    return 1;
  } catch (const std::exception& e) {
    std::fflush(stdout);
    fmt::print(stderr, "error: internal: {}\n", e.what());
    return 1;
  }
  return 2;
}
