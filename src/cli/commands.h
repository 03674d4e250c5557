// Each subcommand registers its options on the root CLI11 app and returns the action to run when chosen.
#pragma once

#include <CLI/CLI.hpp>
#include <functional>

namespace tessera {

struct Command {
  CLI::App* app;
  std::function<int()> run;
};

Command add_inspect_command(CLI::App& root);
Command add_gen_model_command(CLI::App& root);
Command add_run_command(CLI::App& root);
Command add_worker_command(CLI::App& root);
Command add_tokenize_command(CLI::App& root);
Command add_perplexity_command(CLI::App& root);
Command add_probe_command(CLI::App& root);
Command add_bench_command(CLI::App& root);
Command add_serve_command(CLI::App& root);
Command add_keygen_command(CLI::App& root);
Command add_plan_command(CLI::App& root);
Command add_chat_template_command(CLI::App& root);

}  // namespace tessera
