// `tessera tokenize`: the model's tokenizer on a text, as llama.cpp's llama-tokenize prints it.
#include <fmt/format.h>

#include <fstream>
#include <iostream>

#include "cli/commands.h"
#include "cli/model_options.h"
#include "util/error.h"

namespace tessera {
namespace {

struct TokenizeArgs {
  ModelOptions model;
  std::string prompt;
  std::string file;
  bool ids = false;
  bool no_bos = false;
};

}  // namespace

Command add_tokenize_command(CLI::App& root) {
  auto a = std::make_shared<TokenizeArgs>();
  CLI::App* app = root.add_subcommand("tokenize", "Show how the model's tokenizer splits a text");
  add_model_options(*app, a->model, false);
  auto* p = app->add_option("-p,--prompt", a->prompt, "Text to tokenize");
  auto* f = app->add_option("-f,--file", a->file, "Read the text from a file");
  p->excludes(f);
  app->add_flag("--ids", a->ids, "Print only the ids, as [a, b, c]");
  app->add_flag("--no-bos", a->no_bos, "Add no BOS/EOS and do not parse special tokens in the text");
  return {app, [a] {
            std::string text = a->prompt;
            if (!a->file.empty()) {
              std::ifstream in(a->file, std::ios::binary);
              if (!in) fail("{}: cannot read", a->file);
              text.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
            }
            const auto tok = load_tokenizer(a->model.model);
            const auto ids = tok->encode(text, !a->no_bos, !a->no_bos);
            std::string out;
            if (a->ids) {
              out = "[";
              for (size_t i = 0; i < ids.size(); ++i) out += (i ? ", " : "") + std::to_string(ids[i]);
              out += "]\n";
            } else {
              for (auto id : ids) out += fmt::format("{:6} -> '{}'\n", id, tok->token_to_piece(id, true));
            }
            std::cout << out;
            return 0;
          }};
}

}  // namespace tessera
